// See integer_weight_reads.hpp.
#include "integer_weight_reads.hpp"

#include "opencl_source.hpp"

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

}  // namespace

std::string with_integer_snorm8_reads(const Program& program, const std::string& source, std::string& why) {
    auto snorm = [&](int tid) { return tid >= 0 && static_cast<size_t>(tid) < program.tensors.size() && program.tensors[tid].texel == "snorm8"; };
    // entry -> tensor-argument positions bound to snorm8 tensors, the same in every launch
    std::map<std::string, std::set<size_t>> positions;
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
        auto [at, first] = positions.emplace(k->entry, here);
        if (!first && at->second != here) return why = "kernel " + k->entry + " binds snorm8 texels in some launches only", "";
    }
    std::string out = source;
    for (const auto& [entry, args] : positions) {
        if (args.empty()) continue;
        KernelText k;
        if (!find_kernel(out, entry, k)) return why = "kernel " + entry + " is not once in the source", "";
        // the tensor arguments' parameters, in order: the images and pointers (integer parameters
        // carry sizes and origins)
        std::vector<std::string> tensor_params;
        for (const Parameter& p : parameters(out, k))
            if (p.tensor()) tensor_params.push_back(p.name);
        size_t params = k.params, end = k.end;
        std::string body = out.substr(params, end - params);
        for (size_t j : args) {
            if (j >= tensor_params.size()) return why = "kernel " + entry + " has no parameter for argument " + std::to_string(j), "";
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
