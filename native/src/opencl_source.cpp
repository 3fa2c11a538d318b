// See opencl_source.hpp.
#include "opencl_source.hpp"

#include <cctype>

namespace rvk {

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool Parameter::tensor() const { return type.find("image") != std::string::npos || type.find('*') != std::string::npos; }

bool find_kernel(const std::string& source, const std::string& entry, KernelText& out) {
    std::string head = "__kernel void " + entry + "(";
    out.begin = source.find(head);
    if (out.begin == std::string::npos || source.find(head, out.begin + 1) != std::string::npos) return false;
    out.params = out.begin + head.size();
    out.close = source.find(')', out.params);
    if (out.close == std::string::npos) return false;
    out.body = source.find('{', out.close);
    if (out.body == std::string::npos) return false;
    out.end = source.find("__kernel void ", out.body);
    if (out.end == std::string::npos) out.end = source.size();
    return true;
}

std::vector<Parameter> parameters(const std::string& source, const KernelText& k) {
    std::string list = source.substr(k.params, k.close - k.params);
    std::vector<Parameter> out;
    for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        std::string p = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        size_t e = p.size();
        while (e && !identifier_char(p[e - 1])) --e;
        size_t b = e;
        while (b && identifier_char(p[b - 1])) --b;
        if (e > b) out.push_back({p.substr(0, b), p.substr(b, e - b)});
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

size_t words(const std::string& text, const std::string& name) {
    size_t n = 0;
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + name.size()))
        if ((at == 0 || !identifier_char(text[at - 1])) && (at + name.size() == text.size() || !identifier_char(text[at + name.size()]))) ++n;
    return n;
}

}  // namespace rvk
