// Conversions between JS values and C++ values for js/binding.cpp, with errors that name the argument and say what
// was expected ("prepare: rows[2].scoreStart must be an integer, got string"). Typed arrays are copied both ways.
#pragma once
#include <napi.h>
#include <ATen/ATen.h>

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace rlloop {

// Throws a JS TypeError (via Napi::Error) naming `what`.
[[noreturn]] void throw_type_error(Napi::Env env, const std::string& what, const std::string& expected,
                                   const Napi::Value& got);

Napi::Object require_object(const Napi::Value& v, const std::string& what);
Napi::Value member(const Napi::Object& o, const char* key);  // undefined when absent
std::string require_string(const Napi::Value& v, const std::string& what);
double require_number(const Napi::Value& v, const std::string& what);
int64_t require_integer(const Napi::Value& v, const std::string& what);
bool is_missing(const Napi::Value& v);  // undefined or null
// One of `choices` (a string), or `choices[0]` when `v` is missing.
std::string require_choice(const Napi::Value& v, const std::string& what, std::initializer_list<const char*> choices);

// Typed arrays -> CPU tensors (copies). `shape` must account for every element.
at::Tensor tensor_from_float32(const Napi::Value& v, const std::vector<int64_t>& shape, const std::string& what);
std::vector<int64_t> ints_from_int32(const Napi::Value& v, const std::string& what);

// CPU tensors -> fresh typed arrays (the tensor is converted to the array's element type first).
Napi::Float32Array to_float32_array(Napi::Env env, const at::Tensor& t);
Napi::Int32Array to_int32_array(Napi::Env env, const at::Tensor& t);
Napi::Uint8Array to_uint8_array(Napi::Env env, const at::Tensor& t);
Napi::Array to_shape_array(Napi::Env env, at::IntArrayRef shape);

// NamedTensors: { key: { shape: number[], data: Float32Array } }
Napi::Object to_named_tensors(Napi::Env env, const NamedTensorList& tensors);  // tensors already on the CPU
std::map<std::string, at::Tensor> from_named_tensors(const Napi::Value& v, const std::string& what);

}  // namespace rlloop
