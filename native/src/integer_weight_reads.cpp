// See integer_weight_reads.hpp.
#include "integer_weight_reads.hpp"

#include <cctype>
#include <map>
#include <set>
#include <vector>

namespace rvk {

namespace {

const char* kReader =
    "\n#ifdef __OPENCL_VERSION__\n"
    "#if __OPENCL_VERSION__ == CL_VERSION_2_0 || __OPENCL_VERSION__ == CL_VERSION_3_0\n"
    "#define RVK_READ_SNORM8(image, sampler, coord) (convert_float4(read_imagei(image, sampler, coord)) * (1.0f / 127.0f))\n"
    "#else\n"
    "#define RVK_READ_SNORM8(image, sampler, coord) (convert_float4(read_imagei(image, coord)) * (1.0f / 127.0f))\n"
    "#endif\n"
    "#endif\n";

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// [begin, end) of kernel `entry`'s text: from its signature to the next kernel's, or the end
bool kernel_span(const std::string& source, const std::string& entry, size_t& begin, size_t& params, size_t& end) {
    std::string head = "__kernel void " + entry + "(";
    begin = source.find(head);
    if (begin == std::string::npos || source.find(head, begin + 1) != std::string::npos) return false;
    params = begin + head.size();
    end = source.find("__kernel void ", params);
    if (end == std::string::npos) end = source.size();
    return true;
}

// the names of the image and pointer parameters of the list starting at `at` (up to its closing
// parenthesis), in order
std::vector<std::string> tensor_parameters(const std::string& source, size_t at) {
    size_t close = source.find(')', at);
    std::vector<std::string> names;
    if (close == std::string::npos) return names;
    std::string list = source.substr(at, close - at);
    for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        std::string p = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        size_t e = p.size();
        while (e && !identifier_char(p[e - 1])) --e;
        size_t b = e;
        while (b && identifier_char(p[b - 1])) --b;
        std::string type = p.substr(0, b);
        if (type.find("image") != std::string::npos || type.find('*') != std::string::npos) names.push_back(p.substr(b, e - b));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return names;
}

// occurrences of `name` as a whole identifier in `text`
size_t words(const std::string& text, const std::string& name) {
    size_t n = 0;
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + name.size()))
        if ((at == 0 || !identifier_char(text[at - 1])) && (at + name.size() == text.size() || !identifier_char(text[at + name.size()]))) ++n;
    return n;
}

}  // namespace

std::string with_integer_snorm8_reads(const Program& program, const std::string& source, std::string& why) {
    auto snorm = [&](int tid) { return tid >= 0 && static_cast<size_t>(tid) < program.tensors.size() && program.tensors[tid].texel == "snorm8"; };
    // entry -> tensor-argument positions bound to snorm8 tensors, the same in every launch
    std::map<std::string, std::set<size_t>> positions;
    std::set<std::string> seen;
    for (const Step& s : program.steps) {
        if (s.op == Step::Copy) {
            if (snorm(s.src) || snorm(s.dst)) return why = "a copy step touches snorm8 texels", "";
            continue;
        }
        const Kernel* k = program.kernel(s.kernel);
        if (!k) return why = "kernel " + s.kernel + " is not in the program", "";
        std::set<size_t> here;
        for (size_t j = 0; j < s.args.size(); ++j)
            if (snorm(s.args[j])) here.insert(j);
        if (!seen.insert(k->entry).second && positions[k->entry] != here)
            return why = "kernel " + k->entry + " binds snorm8 texels in some launches only", "";
        positions[k->entry] = here;
    }
    std::string out = source;
    for (const auto& [entry, args] : positions) {
        if (args.empty()) continue;
        size_t begin = 0, params = 0, end = 0;
        if (!kernel_span(out, entry, begin, params, end)) return why = "kernel " + entry + " is not once in the source", "";
        // the tensor arguments' parameters, in order: the images and pointers (integer parameters
        // carry sizes and origins)
        std::vector<std::string> tensor_params = tensor_parameters(out, params);
        std::string body = out.substr(params, end - params);
        for (size_t j : args) {
            if (j >= tensor_params.size() || tensor_params[j].empty()) return why = "kernel " + entry + " has no parameter for argument " + std::to_string(j), "";
            const std::string& name = tensor_params[j];
            std::string from = "READ_IMAGEF(" + name + ",", to = "RVK_READ_SNORM8(" + name + ",";
            size_t reads = 0;
            for (size_t at = body.find(from); at != std::string::npos; at = body.find(from, at)) {
                if (at && identifier_char(body[at - 1])) {
                    at += from.size();
                    continue;
                }
                body.replace(at, from.size(), to);
                at += to.size();
                ++reads;
            }
            // every use of the parameter but its declaration must be such a read (not a call passing it on)
            if (reads == 0 || words(body, name) != reads + 1)
                return why = "kernel " + entry + " uses " + name + " otherwise than reading it through READ_IMAGEF", "";
        }
        out.replace(params, end - params, body);
    }
    return kReader + out;
}

}  // namespace rvk
