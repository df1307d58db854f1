// A small strict JSON parser and writer (RFC 8259) for safetensors headers and config files.
//
// Strict: no comments, no trailing commas, no NaN/Infinity, no leading zeros, no control
// characters in strings, valid UTF-8 and surrogate pairs only, duplicate object keys rejected.
// Bounded: nesting depth and input size are capped so hostile input cannot exhaust the stack or
// memory. Every failure throws b12x::Error(kInvalidArgument) with the byte offset and the
// `source` name given by the caller (a file name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace b12x::json {

struct Limits {
  int max_depth = 64;
  size_t max_bytes = size_t{100} << 20;  ///< 100 MB, the safetensors header cap
};

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Object = std::vector<std::pair<std::string, Value>>;  // keeps file order
  using Array = std::vector<Value>;

  Value() = default;
  static Value null() { return Value(); }
  static Value boolean(bool b);
  static Value number(double d);
  static Value integer(int64_t i);
  static Value string(std::string s);
  static Value array(Array a = {});
  static Value object(Object o = {});

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  /// True for a number written without fraction/exponent that fits int64.
  bool is_integer() const { return type_ == Type::kNumber && is_int_; }

  bool as_bool() const { return b_; }
  double as_double() const { return d_; }
  int64_t as_int() const { return i_; }
  const std::string& as_string() const { return s_; }
  const Array& as_array() const { return a_; }
  Array& as_array() { return a_; }
  const Object& as_object() const { return o_; }
  Object& as_object() { return o_; }

  /// Object member lookup (nullptr when absent or not an object).
  const Value* find(std::string_view key) const;
  /// Appends (or replaces) an object member.
  void set(const std::string& key, Value v);
  void push(Value v) { a_.push_back(std::move(v)); }

  static const char* type_name(Type t);

 private:
  Type type_ = Type::kNull;
  bool b_ = false;
  bool is_int_ = false;
  double d_ = 0;
  int64_t i_ = 0;
  std::string s_;
  Array a_;
  Object o_;
  friend class Parser;
};

/// Parses exactly one JSON value; only whitespace may follow it.
Value parse(std::string_view text, const std::string& source, const Limits& limits = {});
/// Compact serialization (indent < 0) or pretty-printed with `indent` spaces.
std::string dump(const Value& v, int indent = -1);
/// JSON string literal (with quotes) for `s`.
std::string quote(std::string_view s);

}  // namespace b12x::json
