#include "io/json.h"

#include <cmath>
#include <limits>

#include "base/check.h"

namespace rlloop {
namespace {

[[noreturn]] void wrong_type(const Json& v, const std::string& what, const char* expected) {
  RLLOOP_FAIL(Format, "'" << what << "' must be " << expected << ", got " << v.type_name()
                                 << (v.is_number() ? " " + v.dump() : std::string()));
}

}  // namespace

Json parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    RLLOOP_FAIL(Format, what << ": invalid JSON at byte " << e.byte << " (" << e.what() << ")");
  }
}

const Json* json_member(const Json& object, const std::string& key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool json_bool(const Json& v, const std::string& what) {
  if (!v.is_boolean()) wrong_type(v, what, "a boolean");
  return v.get<bool>();
}

int64_t json_int(const Json& v, const std::string& what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    RLLOOP_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), Format, what << " is out of range: " << u);
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {  // a whole number written as a float ("4096.0"), as some configs' writers do
    const double d = v.get<double>();
    if (std::floor(d) == d && std::abs(d) <= 9007199254740992.0) return static_cast<int64_t>(d);
  }
  wrong_type(v, what, "an integer");
}

double json_double(const Json& v, const std::string& what) {
  if (!v.is_number()) wrong_type(v, what, "a number");
  return v.get<double>();
}

const std::string& json_string(const Json& v, const std::string& what) {
  if (!v.is_string()) wrong_type(v, what, "a string");
  return v.get_ref<const std::string&>();
}

const Json::array_t& json_array(const Json& v, const std::string& what) {
  if (!v.is_array()) wrong_type(v, what, "an array");
  return v.get_ref<const Json::array_t&>();
}

const Json::object_t& json_object(const Json& v, const std::string& what) {
  if (!v.is_object()) wrong_type(v, what, "an object");
  return v.get_ref<const Json::object_t&>();
}

}  // namespace rlloop
