#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "check.h"

namespace rlloop {

const char* json_type_name(Json::Type type) {
  switch (type) {
    case Json::Type::Null: return "null";
    case Json::Type::Bool: return "a boolean";
    case Json::Type::Number: return "a number";
    case Json::Type::String: return "a string";
    case Json::Type::Array: return "an array";
    case Json::Type::Object: return "an object";
  }
  return "?";
}

Json::Json(bool b) : type_(Type::Bool), bool_(b) {}
Json::Json(int64_t v) : type_(Type::Number), is_int_(true), int_(v), num_(static_cast<double>(v)) {}
Json::Json(double v) : type_(Type::Number), num_(v) {}
Json::Json(std::string s) : type_(Type::String), str_(std::move(s)) {}
Json::Json(Array a) : type_(Type::Array), arr_(std::make_shared<Array>(std::move(a))) {}
Json::Json(Object o) : type_(Type::Object), obj_(std::make_shared<Object>(std::move(o))) {}

#define RLLOOP_JSON_EXPECT(cond, expected)                                                             \
  RLLOOP_CHECK(cond, Format, "'" << what << "' must be " << expected << ", got " << json_type_name(type_) \
                                 << (type_ == Type::Number ? " " + std::to_string(num_) : std::string()))

bool Json::as_bool(const std::string& what) const {
  RLLOOP_JSON_EXPECT(is_bool(), "a boolean");
  return bool_;
}

int64_t Json::as_int(const std::string& what) const {
  RLLOOP_JSON_EXPECT(is_number() && (is_int_ || std::floor(num_) == num_), "an integer");
  return is_int_ ? int_ : static_cast<int64_t>(num_);
}

double Json::as_double(const std::string& what) const {
  RLLOOP_JSON_EXPECT(is_number(), "a number");
  return num_;
}

const std::string& Json::as_string(const std::string& what) const {
  RLLOOP_JSON_EXPECT(is_string(), "a string");
  return str_;
}

const Json::Array& Json::as_array(const std::string& what) const {
  RLLOOP_JSON_EXPECT(is_array(), "an array");
  return *arr_;
}

const Json::Object& Json::as_object(const std::string& what) const {
  RLLOOP_JSON_EXPECT(is_object(), "an object");
  return *obj_;
}

const Json* Json::find(const std::string& key) const {
  if (!is_object()) return nullptr;
  auto it = obj_->find(key);
  return it == obj_->end() ? nullptr : &it->second;
}

Json& Json::operator[](const std::string& key) {
  if (is_null()) {
    type_ = Type::Object;
    obj_ = std::make_shared<Object>();
  }
  RLLOOP_CHECK(is_object(), Internal, "JSON: member '" << key << "' set on " << json_type_name(type_));
  return (*obj_)[key];
}

// ---------------------------------------------------------------------------------------------------------------
// Parser: recursive descent over the whole text.

class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  Json parse_document() {
    Json value = parse_value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return value;
  }

 private:
  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& why) const {
    RLLOOP_FAIL(Format, what_ << ": invalid JSON at byte " << pos_ << ": " << why);
  }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }

  bool consume_word(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }

  Json parse_value(int depth) {
    if (depth > 64) fail("nesting deeper than 64");
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Json(parse_string());
    if (consume_word("true")) return Json(true);
    if (consume_word("false")) return Json(false);
    if (consume_word("null")) return Json();
    // Python's json module writes these for non-finite floats; accept them when reading.
    if (consume_word("NaN")) return Json(std::nan(""));
    if (consume_word("Infinity")) return Json(HUGE_VAL);
    if (consume_word("-Infinity")) return Json(-HUGE_VAL);
    return parse_number();
  }

  Json parse_object(int depth) {
    expect('{');
    Json::Object members;
    if (consume('}')) return Json(std::move(members));
    do {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
      std::string key = parse_string();
      expect(':');
      members[key] = parse_value(depth + 1);
    } while (consume(','));
    expect('}');
    return Json(std::move(members));
  }

  Json parse_array(int depth) {
    expect('[');
    Json::Array items;
    if (consume(']')) return Json(std::move(items));
    do {
      items.push_back(parse_value(depth + 1));
    } while (consume(','));
    expect(']');
    return Json(std::move(items));
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= h - '0';
      else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(pos_, 2, "\\u") == 0) {  // surrogate pair
            pos_ += 2;
            uint32_t low = parse_hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape \\") + e);
      }
    }
  }

  Json parse_number() {
    size_t start = pos_;
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integral = false;
        ++pos_;
      } else {
        break;
      }
    }
    std::string text = s_.substr(start, pos_ - start);
    if (text.empty() || text == "-") fail("expected a value");
    char* end = nullptr;
    if (integral) {
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && *end == '\0') return Json(static_cast<int64_t>(v));
    }
    double d = std::strtod(text.c_str(), &end);
    if (*end != '\0') fail("malformed number '" + text + "'");
    return Json(d);
  }
};

Json Json::parse(const std::string& text, const std::string& what) { return JsonParser(text, what).parse_document(); }

// ---------------------------------------------------------------------------------------------------------------
// Writer.

static void dump_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

static void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  switch (type_) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += bool_ ? "true" : "false"; break;
    case Type::Number:
      if (is_int_) {
        out += std::to_string(int_);
      } else if (!std::isfinite(num_)) {
        out += std::isnan(num_) ? "NaN" : (num_ > 0 ? "Infinity" : "-Infinity");
      } else {
        // Shortest of %.15g / %.17g that reads back exactly (1e-06 stays "1e-06").
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.15g", num_);
        if (std::strtod(buf, nullptr) != num_) std::snprintf(buf, sizeof buf, "%.17g", num_);
        out += buf;
      }
      break;
    case Type::String: dump_string(out, str_); break;
    case Type::Array: {
      out += '[';
      bool first = true;
      for (const Json& item : *arr_) {
        if (!first) out += ',';
        first = false;
        newline(out, indent, depth + 1);
        item.dump_to(out, indent, depth + 1);
      }
      if (!arr_->empty()) newline(out, indent, depth);
      out += ']';
      break;
    }
    case Type::Object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : *obj_) {
        if (!first) out += ',';
        first = false;
        newline(out, indent, depth + 1);
        dump_string(out, key);
        out += indent < 0 ? ":" : ": ";
        value.dump_to(out, indent, depth + 1);
      }
      if (!obj_->empty()) newline(out, indent, depth);
      out += '}';
      break;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

}  // namespace rlloop
