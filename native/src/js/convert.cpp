#include "js/convert.h"

#include <cmath>
#include <cstring>

namespace rlloop {

namespace {
std::string describe(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsNumber()) return "number " + std::to_string(v.As<Napi::Number>().DoubleValue());
  if (v.IsString()) return "string \"" + v.As<Napi::String>().Utf8Value() + "\"";
  if (v.IsBoolean()) return "boolean";
  if (v.IsTypedArray()) return "a typed array";
  if (v.IsArray()) return "an array";
  if (v.IsFunction()) return "a function";
  return "an object";
}
}  // namespace

void throw_type_error(Napi::Env env, const std::string& what, const std::string& expected, const Napi::Value& got) {
  Napi::Error error = Napi::TypeError::New(env, what + " must be " + expected + ", got " + describe(got));
  error.Set("code", Napi::String::New(env, "ERR_RLLOOP_INVALID"));
  throw error;
}

bool is_missing(const Napi::Value& v) { return v.IsUndefined() || v.IsNull(); }

Napi::Object require_object(const Napi::Value& v, const std::string& what) {
  if (!v.IsObject() || v.IsArray()) throw_type_error(v.Env(), what, "an object", v);
  return v.As<Napi::Object>();
}

Napi::Value member(const Napi::Object& o, const char* key) { return o.Has(key) ? o.Get(key) : o.Env().Undefined(); }

std::string require_string(const Napi::Value& v, const std::string& what) {
  if (!v.IsString()) throw_type_error(v.Env(), what, "a string", v);
  return v.As<Napi::String>().Utf8Value();
}

std::string require_choice(const Napi::Value& v, const std::string& what, std::initializer_list<const char*> choices) {
  if (is_missing(v)) return *choices.begin();
  std::string listed;
  for (const char* c : choices) {
    if (v.IsString() && v.As<Napi::String>().Utf8Value() == c) return c;
    listed += (listed.empty() ? "\"" : " or \"") + std::string(c) + "\"";
  }
  throw_type_error(v.Env(), what, listed, v);
}

double require_number(const Napi::Value& v, const std::string& what) {
  if (!v.IsNumber() || !std::isfinite(v.As<Napi::Number>().DoubleValue()))
    throw_type_error(v.Env(), what, "a finite number", v);
  return v.As<Napi::Number>().DoubleValue();
}

int64_t require_integer(const Napi::Value& v, const std::string& what) {
  double d = require_number(v, what);
  if (std::floor(d) != d) throw_type_error(v.Env(), what, "an integer", v);
  return static_cast<int64_t>(d);
}

at::Tensor tensor_from_float32(const Napi::Value& v, const std::vector<int64_t>& shape, const std::string& what) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    throw_type_error(v.Env(), what, "a Float32Array", v);
  auto array = v.As<Napi::Float32Array>();
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (static_cast<int64_t>(array.ElementLength()) != numel)
    throw_type_error(v.Env(), what, "a Float32Array of " + std::to_string(numel) + " values (shape " + shape_string(shape) + ")",
                     Napi::Number::New(v.Env(), static_cast<double>(array.ElementLength())));
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  std::memcpy(t.data_ptr<float>(), array.Data(), numel * sizeof(float));
  return t;
}

std::vector<int64_t> ints_from_int32(const Napi::Value& v, const std::string& what) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
    throw_type_error(v.Env(), what, "an Int32Array", v);
  auto array = v.As<Napi::Int32Array>();
  return std::vector<int64_t>(array.Data(), array.Data() + array.ElementLength());
}

template <typename ArrayType, typename Element>
static ArrayType to_array(Napi::Env env, const at::Tensor& t, at::ScalarType type) {
  at::Tensor c = t.to(at::kCPU, type).contiguous();
  ArrayType out = ArrayType::New(env, static_cast<size_t>(c.numel()));
  if (c.numel() > 0) std::memcpy(out.Data(), c.data_ptr(), c.numel() * sizeof(Element));
  return out;
}

Napi::Float32Array to_float32_array(Napi::Env env, const at::Tensor& t) {
  return to_array<Napi::Float32Array, float>(env, t, at::kFloat);
}
Napi::Int32Array to_int32_array(Napi::Env env, const at::Tensor& t) {
  return to_array<Napi::Int32Array, int32_t>(env, t, at::kInt);
}
Napi::Uint8Array to_uint8_array(Napi::Env env, const at::Tensor& t) {
  return to_array<Napi::Uint8Array, uint8_t>(env, t, at::kByte);
}

Napi::Array to_shape_array(Napi::Env env, at::IntArrayRef shape) {
  Napi::Array out = Napi::Array::New(env, shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(shape[i])));
  return out;
}

Napi::Object to_named_tensors(Napi::Env env, const NamedTensorList& tensors) {
  Napi::Object out = Napi::Object::New(env);
  for (const auto& [key, t] : tensors) {
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("shape", to_shape_array(env, t.sizes()));
    entry.Set("data", to_float32_array(env, t));
    out.Set(key, entry);
  }
  return out;
}

std::map<std::string, at::Tensor> from_named_tensors(const Napi::Value& v, const std::string& what) {
  Napi::Object o = require_object(v, what);
  std::map<std::string, at::Tensor> out;
  Napi::Array keys = o.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    std::string key = keys.Get(i).As<Napi::String>().Utf8Value();
    std::string where = what + "['" + key + "']";
    Napi::Object entry = require_object(o.Get(key), where);
    Napi::Value shape_value = member(entry, "shape");
    if (!shape_value.IsArray()) throw_type_error(v.Env(), where + ".shape", "an array of integers", shape_value);
    Napi::Array shape_array = shape_value.As<Napi::Array>();
    std::vector<int64_t> shape;
    for (uint32_t d = 0; d < shape_array.Length(); ++d) shape.push_back(require_integer(shape_array.Get(d), where + ".shape"));
    out[key] = tensor_from_float32(member(entry, "data"), shape, where + ".data");
  }
  return out;
}

}  // namespace rlloop
