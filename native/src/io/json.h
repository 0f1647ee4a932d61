// JSON values are nlohmann::json (config.json, adapter_config.json, safetensors headers, the optimizer sidecar,
// the backward timeline's lines). What this file adds is the module's errors: a parse failure or a value of the
// wrong type is a Format error naming the file and the value ("text_config.hidden_size must be an integer, got
// string"), where nlohmann's own exceptions would reach JS as an untyped libtorch-style error.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace rlloop {

using Json = nlohmann::json;

// `what` names the text in the error (a file name); the error carries nlohmann's byte offset and reason.
Json parse_json(const std::string& text, const std::string& what);

// An object's member, or nullptr when absent (or when `object` is not an object).
const Json* json_member(const Json& object, const std::string& key);

// Typed access; `what` names the value in the error.
bool json_bool(const Json& v, const std::string& what);
int64_t json_int(const Json& v, const std::string& what);  // an integer in int64's range
double json_double(const Json& v, const std::string& what);  // any number
const std::string& json_string(const Json& v, const std::string& what);
const Json::array_t& json_array(const Json& v, const std::string& what);
const Json::object_t& json_object(const Json& v, const std::string& what);

}  // namespace rlloop
