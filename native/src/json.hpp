// A small JSON reader for the program section of a .rvk artifact (RFC 8259, as Python's json
// module writes it). Integers and floats stay apart as Python's json keeps them apart (a "1" is an
// int, a "1.0" a float: the validator's "is an integer" checks need the difference); an integer
// outside int64 is a parse error. Object keys keep their order; a repeated key takes the last value
// (Python's behaviour; parsing stays linear: keys are appended, lookups take the last). Nesting deeper
// than kMaxDepth is refused (no stack overflow on hostile input).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rvk {

struct JsonError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Json {
public:
    enum class Type { Null, Bool, Int, Float, String, Array, Object };
    static constexpr int kMaxDepth = 256;

    Json() = default;
    static Json parse(const std::string& text);  // throws JsonError

    Type type() const { return type_; }
    bool is_null() const { return type_ == Type::Null; }
    bool is_bool() const { return type_ == Type::Bool; }
    bool is_int() const { return type_ == Type::Int; }  // never a bool (Python: isinstance(v, int) and not bool)
    bool is_number() const { return type_ == Type::Int || type_ == Type::Float; }
    bool is_string() const { return type_ == Type::String; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_object() const { return type_ == Type::Object; }

    bool as_bool() const { return bool_; }
    int64_t as_int() const { return int_; }
    double as_number() const { return type_ == Type::Int ? static_cast<double>(int_) : float_; }
    const std::string& as_string() const { return string_; }
    const std::vector<Json>& items() const { return array_; }
    std::vector<Json>& items() { return array_; }
    const std::vector<std::pair<std::string, Json>>& members() const { return object_; }

    // The value of `key` in an object (nullptr when absent or not an object).
    const Json* get(const std::string& key) const;
    Json* get(const std::string& key);
    bool has(const std::string& key) const { return get(key) != nullptr; }
    void set(const std::string& key, Json value);
    void erase(const std::string& key);

    static Json of_int(int64_t v);
    static Json of_string(std::string v);
    static Json array();
    static Json object();
    void push(Json v) { array_.push_back(std::move(v)); }

    // Python's repr() of the value, for error messages that name values as Python prints them.
    std::string repr() const;

private:
    Type type_ = Type::Null;
    bool bool_ = false;
    int64_t int_ = 0;
    double float_ = 0;
    std::string string_;
    std::vector<Json> array_;
    std::vector<std::pair<std::string, Json>> object_;
    friend class JsonParser;
};

// Python's repr() of a string ('...' with escapes).
std::string py_repr(const std::string& s);

}  // namespace rvk
