// Strict bounded JSON parser and writer (see json.h).
#include "checkpoint/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "b12x/status.h"

namespace b12x::json {

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.b_ = b;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.type_ = Type::kNumber;
  v.d_ = d;
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
    v.is_int_ = true;
    v.i_ = static_cast<int64_t>(d);
  }
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::kNumber;
  v.is_int_ = true;
  v.i_ = i;
  v.d_ = static_cast<double>(i);
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::array(Array a) {
  Value v;
  v.type_ = Type::kArray;
  v.a_ = std::move(a);
  return v;
}
Value Value::object(Object o) {
  Value v;
  v.type_ = Type::kObject;
  v.o_ = std::move(o);
  return v;
}

const Value* Value::find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const auto& kv : o_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  if (type_ == Type::kNull) type_ = Type::kObject;
  for (auto& kv : o_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  o_.emplace_back(key, std::move(v));
}

const char* Value::type_name(Type t) {
  switch (t) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "boolean";
    case Type::kNumber:
      return "number";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "?";
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source, const Limits& limits)
      : t_(text), src_(source), lim_(limits) {}

  Value run() {
    if (t_.size() > lim_.max_bytes)
      fail("document is ", t_.size(), " bytes, larger than the limit of ", lim_.max_bytes);
    skip_ws();
    Value v = value(0);
    skip_ws();
    if (p_ != t_.size()) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  template <typename... A>
  [[noreturn]] void fail(A&&... a) {
    B12X_FAIL(Status::kInvalidArgument, src_, ": malformed JSON at byte ", p_, ": ",
              std::forward<A>(a)...);
  }
  bool eof() const { return p_ >= t_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(t_[p_]); }
  void skip_ws() {
    while (!eof()) {
      const char c = t_[p_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        ++p_;
      else
        break;
    }
  }
  void expect_literal(const char* lit) {
    const size_t n = std::strlen(lit);
    if (t_.size() - p_ < n || t_.compare(p_, n, lit) != 0) fail("invalid literal");
    p_ += n;
  }

  Value value(int depth) {
    if (depth > lim_.max_depth) fail("nesting deeper than ", lim_.max_depth, " levels");
    if (eof()) fail("unexpected end of input");
    const char c = t_[p_];
    switch (c) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return Value::string(string());
      case 't':
        expect_literal("true");
        return Value::boolean(true);
      case 'f':
        expect_literal("false");
        return Value::boolean(false);
      case 'n':
        expect_literal("null");
        return Value::null();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        fail("unexpected character 0x", std::hex, static_cast<int>(peek()));
    }
  }

  Value object(int depth) {
    ++p_;  // '{'
    Value v = Value::object();
    std::unordered_set<std::string> seen;
    skip_ws();
    if (!eof() && t_[p_] == '}') {
      ++p_;
      return v;
    }
    while (true) {
      skip_ws();
      if (eof() || t_[p_] != '"') fail("expected a string key");
      const size_t key_at = p_;
      std::string key = string();
      // Linear scan for small objects; a hash set once an object grows (a 100 MB header may
      // hold millions of keys, and a quadratic check would be a denial of service).
      bool dup = false;
      if (v.o_.size() < 16) {
        for (const auto& kv : v.o_) dup = dup || kv.first == key;
      } else {
        if (seen.empty())
          for (const auto& kv : v.o_) seen.insert(kv.first);
        dup = !seen.insert(key).second;
      }
      if (dup) {
        p_ = key_at;
        fail("duplicate key \"", key, "\"");
      }
      skip_ws();
      if (eof() || t_[p_] != ':') fail("expected ':' after a key");
      ++p_;
      skip_ws();
      Value member = value(depth + 1);
      v.o_.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (eof()) fail("unterminated object");
      if (t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (t_[p_] == '}') {
        ++p_;
        return v;
      }
      fail("expected ',' or '}' in an object");
    }
  }

  Value array(int depth) {
    ++p_;  // '['
    Value v = Value::array();
    skip_ws();
    if (!eof() && t_[p_] == ']') {
      ++p_;
      return v;
    }
    while (true) {
      skip_ws();
      v.a_.push_back(value(depth + 1));
      skip_ws();
      if (eof()) fail("unterminated array");
      if (t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (t_[p_] == ']') {
        ++p_;
        return v;
      }
      fail("expected ',' or ']' in an array");
    }
  }

  unsigned hex4() {
    if (t_.size() - p_ < 4) fail("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = t_[p_++];
      u <<= 4;
      if (c >= '0' && c <= '9')
        u |= c - '0';
      else if (c >= 'a' && c <= 'f')
        u |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        u |= c - 'A' + 10;
      else
        fail("invalid hex digit in \\u escape");
    }
    return u;
  }

  static void put_utf8(std::string& out, uint32_t cp) {
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

  // Validates one UTF-8 sequence starting at p_ (shortest form, no surrogates, <= U+10FFFF).
  void utf8(std::string& out) {
    const unsigned char c = peek();
    int n = 0;
    uint32_t cp = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      fail("invalid UTF-8 lead byte 0x", std::hex, static_cast<int>(c));
    }
    if (t_.size() - p_ <= static_cast<size_t>(n)) fail("truncated UTF-8 sequence");
    for (int i = 1; i <= n; ++i) {
      const unsigned char cc = static_cast<unsigned char>(t_[p_ + i]);
      if ((cc & 0xC0) != 0x80) fail("invalid UTF-8 continuation byte");
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      fail("invalid UTF-8 code point");
    out.append(t_.data() + p_, n + 1);
    p_ += n + 1;
  }

  std::string string() {
    ++p_;  // opening quote
    std::string out;
    while (true) {
      if (eof()) fail("unterminated string");
      const unsigned char c = peek();
      if (c == '"') {
        ++p_;
        return out;
      }
      if (c < 0x20) fail("unescaped control character in a string");
      if (c == '\\') {
        ++p_;
        if (eof()) fail("unterminated escape");
        const char e = t_[p_++];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (t_.size() - p_ < 2 || t_[p_] != '\\' || t_[p_ + 1] != 'u')
                fail("unpaired high surrogate");
              p_ += 2;
              const uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) fail("invalid low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              fail("unpaired low surrogate");
            }
            put_utf8(out, cp);
            break;
          }
          default:
            --p_;
            fail("invalid escape '\\", e, "'");
        }
        continue;
      }
      if (c < 0x80) {
        out += static_cast<char>(c);
        ++p_;
      } else {
        utf8(out);
      }
    }
  }

  Value number() {
    const size_t start = p_;
    bool neg = false, is_int = true;
    if (t_[p_] == '-') {
      neg = true;
      ++p_;
    }
    if (eof()) fail("truncated number");
    if (t_[p_] == '0') {
      ++p_;
      if (!eof() && t_[p_] >= '0' && t_[p_] <= '9') fail("leading zero in a number");
    } else if (t_[p_] >= '1' && t_[p_] <= '9') {
      while (!eof() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    } else {
      fail("invalid number");
    }
    if (!eof() && t_[p_] == '.') {
      is_int = false;
      ++p_;
      if (eof() || t_[p_] < '0' || t_[p_] > '9') fail("digit expected after '.'");
      while (!eof() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    }
    if (!eof() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      is_int = false;
      ++p_;
      if (!eof() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      if (eof() || t_[p_] < '0' || t_[p_] > '9') fail("digit expected in exponent");
      while (!eof() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    }
    const std::string text(t_.substr(start, p_ - start));
    Value v;
    v.type_ = Value::Type::kNumber;
    if (is_int) {
      // Exact int64 parse with overflow detection; larger integers stay doubles.
      const size_t digits_at = neg ? 1 : 0;
      unsigned long long mag = 0;
      bool overflow = false;
      for (size_t i = digits_at; i < text.size(); ++i) {
        const unsigned d = text[i] - '0';
        if (mag > (~0ULL - d) / 10) {
          overflow = true;
          break;
        }
        mag = mag * 10 + d;
      }
      const unsigned long long lim = neg ? (1ULL << 63) : (1ULL << 63) - 1;
      if (!overflow && mag <= lim) {
        v.is_int_ = true;
        v.i_ = neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
        v.d_ = static_cast<double>(v.i_);
        return v;
      }
    }
    v.d_ = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(v.d_)) fail("number out of range");
    return v;
  }

  std::string_view t_;
  const std::string& src_;
  Limits lim_;
  size_t p_ = 0;
};

Value parse(std::string_view text, const std::string& source, const Limits& limits) {
  return Parser(text, source, limits).run();
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

namespace {
void dump_to(const Value& v, int indent, int level, std::string& out) {
  const auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.type()) {
    case Value::Type::kNull:
      out += "null";
      break;
    case Value::Type::kBool:
      out += v.as_bool() ? "true" : "false";
      break;
    case Value::Type::kNumber:
      if (v.is_integer()) {
        out += std::to_string(v.as_int());
      } else {
        char buf[40];
        std::snprintf(buf, sizeof(buf), "%.17g", v.as_double());
        out += buf;
      }
      break;
    case Value::Type::kString:
      out += quote(v.as_string());
      break;
    case Value::Type::kArray: {
      out += '[';
      bool first = true;
      for (const auto& e : v.as_array()) {
        if (!first) out += indent < 0 ? "," : ",";
        first = false;
        newline(level + 1);
        dump_to(e, indent, level + 1, out);
      }
      if (!v.as_array().empty()) newline(level);
      out += ']';
      break;
    }
    case Value::Type::kObject: {
      out += '{';
      bool first = true;
      for (const auto& kv : v.as_object()) {
        if (!first) out += ",";
        first = false;
        newline(level + 1);
        out += quote(kv.first);
        out += indent < 0 ? ":" : ": ";
        dump_to(kv.second, indent, level + 1, out);
      }
      if (!v.as_object().empty()) newline(level);
      out += '}';
      break;
    }
  }
}
}  // namespace

std::string dump(const Value& v, int indent) {
  std::string out;
  dump_to(v, indent, 0, out);
  return out;
}

}  // namespace b12x::json
