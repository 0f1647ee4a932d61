// A small JSON value with a parser and a writer, for config.json, adapter_config.json, safetensors headers and the
// optimizer sidecar. Why hand-written: torch's headers reference nlohmann/json but the PyPI wheel does not ship it,
// and the build links only what the Python venv provides (no system C++ packages are installed by the setup).
// These files are small and well-formed; errors still name the byte offset and what was expected.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rlloop {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;

  Json() = default;  // null
  Json(bool b);
  Json(int v) : Json(static_cast<int64_t>(v)) {}
  Json(int64_t v);
  Json(double v);
  Json(const char* s) : Json(std::string(s)) {}
  Json(std::string s);
  Json(Array a);
  Json(Object o);

  static Json parse(const std::string& text, const std::string& what /* file name, for errors */);
  // Compact JSON (indent < 0) or pretty-printed with `indent` spaces.
  std::string dump(int indent = -1) const;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_integer() const { return type_ == Type::Number && is_int_; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Typed access; `what` names the value in the error ("text_config.hidden_size").
  bool as_bool(const std::string& what) const;
  int64_t as_int(const std::string& what) const;
  double as_double(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  const Array& as_array(const std::string& what) const;
  const Object& as_object(const std::string& what) const;

  // Object members: `find` returns nullptr when absent (or when this is not an object).
  const Json* find(const std::string& key) const;
  Json& operator[](const std::string& key);  // creates an object member (this becomes an object if null)

 private:
  Type type_ = Type::Null;
  bool bool_ = false;
  bool is_int_ = false;
  int64_t int_ = 0;
  double num_ = 0;
  std::string str_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;

  void dump_to(std::string& out, int indent, int depth) const;
  friend class JsonParser;
};

const char* json_type_name(Json::Type type);

}  // namespace rlloop
