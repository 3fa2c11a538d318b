#include "json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace rvk {

class JsonParser {
public:
    explicit JsonParser(const std::string& text) : s_(text) {}

    Json document() {
        skip_ws();
        Json v = value(0);
        skip_ws();
        if (pos_ != s_.size()) fail("extra data");
        return v;
    }

private:
    const std::string& s_;
    size_t pos_ = 0;

    [[noreturn]] void fail(const std::string& what) const {
        throw JsonError(what + " at char " + std::to_string(pos_));
    }
    bool at_end() const { return pos_ >= s_.size(); }
    char peek() const { return at_end() ? '\0' : s_[pos_]; }
    void skip_ws() {
        while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
    }
    bool literal(const char* word) {
        size_t n = std::char_traits<char>::length(word);
        if (s_.compare(pos_, n, word) == 0) {
            pos_ += n;
            return true;
        }
        return false;
    }

    Json value(int depth) {
        if (depth > Json::kMaxDepth) fail("nesting deeper than " + std::to_string(Json::kMaxDepth));
        if (at_end()) fail("expecting value");
        char c = s_[pos_];
        Json v;
        if (c == '{') return object(depth);
        if (c == '[') return array(depth);
        if (c == '"') {
            v.type_ = Json::Type::String;
            v.string_ = string();
            return v;
        }
        if (literal("null")) return v;
        if (literal("true")) {
            v.type_ = Json::Type::Bool;
            v.bool_ = true;
            return v;
        }
        if (literal("false")) {
            v.type_ = Json::Type::Bool;
            return v;
        }
        // Python's json reads these non-standard constants too
        if (literal("NaN")) return number_of(std::numeric_limits<double>::quiet_NaN());
        if (literal("Infinity")) return number_of(std::numeric_limits<double>::infinity());
        if (literal("-Infinity")) return number_of(-std::numeric_limits<double>::infinity());
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        fail("expecting value");
    }

    static Json number_of(double d) {
        Json v;
        v.type_ = Json::Type::Float;
        v.float_ = d;
        return v;
    }

    Json number() {
        size_t start = pos_;
        if (peek() == '-') ++pos_;
        if (peek() == '0') {
            ++pos_;
        } else if (peek() >= '1' && peek() <= '9') {
            while (peek() >= '0' && peek() <= '9') ++pos_;
        } else {
            fail("expecting value");
        }
        bool is_float = false;
        if (peek() == '.' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
            is_float = true;
            ++pos_;
            while (peek() >= '0' && peek() <= '9') ++pos_;
        }
        if (peek() == 'e' || peek() == 'E') {
            size_t save = pos_;
            ++pos_;
            if (peek() == '+' || peek() == '-') ++pos_;
            if (peek() >= '0' && peek() <= '9') {
                is_float = true;
                while (peek() >= '0' && peek() <= '9') ++pos_;
            } else {
                pos_ = save;  // Python ends the number before a bare 'e'
            }
        }
        std::string text = s_.substr(start, pos_ - start);
        Json v;
        if (is_float) {
            v.type_ = Json::Type::Float;
            v.float_ = std::strtod(text.c_str(), nullptr);
            return v;
        }
        errno = 0;
        char* end = nullptr;
        long long n = std::strtoll(text.c_str(), &end, 10);
        if (errno == ERANGE) {
            pos_ = start;
            fail("integer " + text + " does not fit 64 bits");
        }
        v.type_ = Json::Type::Int;
        v.int_ = static_cast<int64_t>(n);
        return v;
    }

    unsigned hex4() {
        if (pos_ + 4 > s_.size()) fail("invalid \\uXXXX escape");
        unsigned u = 0;
        for (int i = 0; i < 4; ++i) {
            char c = s_[pos_++];
            u <<= 4;
            if (c >= '0' && c <= '9') u |= static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') u |= static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') u |= static_cast<unsigned>(c - 'A' + 10);
            else fail("invalid \\uXXXX escape");
        }
        return u;
    }

    static void put_utf8(std::string& out, unsigned cp) {
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

    std::string string() {
        ++pos_;  // the opening quote
        std::string out;
        for (;;) {
            if (at_end()) fail("unterminated string");
            unsigned char c = static_cast<unsigned char>(s_[pos_]);
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (c < 0x20) fail("invalid control character");
            if (c != '\\') {
                out += static_cast<char>(c);
                ++pos_;
                continue;
            }
            ++pos_;
            if (at_end()) fail("unterminated string");
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
                    unsigned cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(pos_, 2, "\\u") == 0) {
                        size_t save = pos_;
                        pos_ += 2;
                        unsigned lo = hex4();
                        if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        else pos_ = save;
                    }
                    put_utf8(out, cp);
                    break;
                }
                default: --pos_; fail("invalid \\escape");
            }
        }
    }

    Json array(int depth) {
        ++pos_;
        Json v;
        v.type_ = Json::Type::Array;
        skip_ws();
        if (peek() == ']') {
            ++pos_;
            return v;
        }
        for (;;) {
            skip_ws();
            v.array_.push_back(value(depth + 1));
            skip_ws();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == ']') {
                ++pos_;
                return v;
            }
            fail("expecting ',' delimiter");
        }
    }

    Json object(int depth) {
        ++pos_;
        Json v;
        v.type_ = Json::Type::Object;
        skip_ws();
        if (peek() == '}') {
            ++pos_;
            return v;
        }
        for (;;) {
            skip_ws();
            if (peek() != '"') fail("expecting property name enclosed in double quotes");
            std::string key = string();
            skip_ws();
            if (peek() != ':') fail("expecting ':' delimiter");
            ++pos_;
            skip_ws();
            v.object_.emplace_back(std::move(key), value(depth + 1));  // a repeated key: get() finds the last
            skip_ws();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == '}') {
                ++pos_;
                return v;
            }
            fail("expecting ',' delimiter");
        }
    }
};

Json Json::parse(const std::string& text) { return JsonParser(text).document(); }

const Json* Json::get(const std::string& key) const {
    if (type_ != Type::Object) return nullptr;
    for (auto it = object_.rbegin(); it != object_.rend(); ++it)  // the last of repeated keys (Python's json)
        if (it->first == key) return &it->second;
    return nullptr;
}

Json* Json::get(const std::string& key) {
    return const_cast<Json*>(static_cast<const Json*>(this)->get(key));
}

void Json::set(const std::string& key, Json value) {
    if (Json* old = get(key)) {
        *old = std::move(value);
        return;
    }
    object_.emplace_back(key, std::move(value));
}

void Json::erase(const std::string& key) {
    for (auto it = object_.begin(); it != object_.end(); ++it)
        if (it->first == key) {
            object_.erase(it);
            return;
        }
}

Json Json::of_int(int64_t v) {
    Json j;
    j.type_ = Type::Int;
    j.int_ = v;
    return j;
}

Json Json::of_string(std::string v) {
    Json j;
    j.type_ = Type::String;
    j.string_ = std::move(v);
    return j;
}

Json Json::array() {
    Json j;
    j.type_ = Type::Array;
    return j;
}

Json Json::object() {
    Json j;
    j.type_ = Type::Object;
    return j;
}

std::string py_repr(const std::string& s) {
    bool single = s.find('\'') == std::string::npos || s.find('"') != std::string::npos;
    char q = single ? '\'' : '"';
    std::string out(1, q);
    for (unsigned char c : s) {
        if (c == static_cast<unsigned char>(q) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + q;
}

static std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[40];
    for (int precision = 1; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, d);
        if (std::strtod(buf, nullptr) == d) break;
    }
    std::string out(buf);
    if (out.find_first_of(".eni") == std::string::npos) out += ".0";
    return out;
}

std::string Json::repr() const {
    switch (type_) {
        case Type::Null: return "None";
        case Type::Bool: return bool_ ? "True" : "False";
        case Type::Int: return std::to_string(int_);
        case Type::Float: return float_repr(float_);
        case Type::String: return py_repr(string_);
        case Type::Array: {
            std::string out = "[";
            for (size_t i = 0; i < array_.size(); ++i) out += (i ? ", " : "") + array_[i].repr();
            return out + "]";
        }
        case Type::Object: {
            std::string out = "{";
            for (size_t i = 0; i < object_.size(); ++i)
                out += (i ? ", " : "") + py_repr(object_[i].first) + ": " + object_[i].second.repr();
            return out + "}";
        }
    }
    return "?";
}

}  // namespace rvk
