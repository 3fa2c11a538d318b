// Reading the OpenCL C that relax_vk's exporter writes (TVM's codegen): each kernel as
// `__kernel void NAME(PARAMS) { ... }`, one after another. For the load-time rewrites of a program's
// source (integer_weight_reads.hpp).
#pragma once

#include <string>
#include <vector>

namespace rvk {

struct KernelText {
    size_t begin = 0;   // "__kernel void NAME(" starts here
    size_t params = 0;  // the parameter list starts here
    size_t close = 0;   // its closing parenthesis
    size_t body = 0;    // the body's opening brace
    size_t end = 0;     // the next kernel's "__kernel void", or the source's end
};

struct Parameter {
    std::string type, name;  // "__global float* restrict", "x_ptr"
    bool tensor() const;     // an image or a pointer (else an integer)
};

// Kernel `entry` of `source`, when it is there exactly once.
bool find_kernel(const std::string& source, const std::string& entry, KernelText& out);
// The parameters of the list [params, close).
std::vector<Parameter> parameters(const std::string& source, const KernelText& k);
// Occurrences of `name` as a whole identifier in `text`.
size_t words(const std::string& text, const std::string& name);
bool identifier_char(char c);

}  // namespace rvk
