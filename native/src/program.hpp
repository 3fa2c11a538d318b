// The .rvk artifact and its program, as relax_vk/serialization/artifact.py and
// relax_vk/codegen/export.py write them: parsed, validated completely, then held as plain structs the
// backends execute.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "dtype.hpp"
#include "json.hpp"
#include "relax_vk/relax_vk.h"
#include "run_time_shapes.hpp"

namespace rvk {

// Every failure inside the library: a status for the C ABI and a message.
struct Error : std::runtime_error {
    rvk_status status;
    Error(rvk_status s, const std::string& message) : std::runtime_error(message), status(s) {}
};

using Extents = std::array<int64_t, 3>;  // image width, height, layers

struct Tensor {
    int id = 0;
    std::string name;
    std::vector<int64_t> shape;           // at the bound of the run-time dims (what is allocated)
    std::vector<ShapeExpr> shape_expr;    // per axis when the shape depends on run-time dims; else empty
    DType dtype = DType::F32;       // what the device holds
    DType host_dtype = DType::F32;  // what the caller reads/writes (host_dtype, else dtype)
    std::string scope;
    std::string kind;
    int64_t bytes = 0;
    bool is_image = false;
    Extents image{};
    std::string texel;  // "" or "float32"/"float16" (half storage of a float32 texture) / "snorm8" (a constant's bytes k: values k / 127)
    int storage = -1;   // allocation index (with a storage assignment)
    int64_t offset = 0;
    // a folded texture (codegen/texture_origins.py): its kernels address it at `origin` of its
    // allocation's image, and `image` is its folded extents (w, h * layers, 1); else (0, 0)
    std::array<int64_t, 2> origin{};
    // an integer input whose values index a table (passes/layout/index_ranges.py): each value
    // must lie in [lo, hi] (inclusive), which the session checks before it uploads the input; with
    // several ranges, one per position of the last axis (an index tuple's components): element i
    // against index_range[i % size]
    bool has_index_range = false;
    std::vector<std::array<int64_t, 2>> index_range;

    int64_t elements() const;
    const char* texel_dtype() const;  // storage.lifetimes.texel_dtype
    int64_t stored_bytes() const;     // storage.lifetimes.stored_bytes
};

struct Kernel {
    std::string name;
    // OpenCL: the function of the source the kernel runs ("entry"; its name when absent): kernels
    // whose device code is the same share one function
    std::string entry;
    std::array<int64_t, 3> global{}, local{};
    // Vulkan: the kernel's WGSL (bytes [shader_begin, shader_end) of the source), its binding kinds
    // ("buffer", "buffer_read", "texture", "storage_texture", "storage_texture_f16"; an entry that is
    // no string: its JSON text, an unknown kind) and its workgroup memory
    size_t shader_begin = 0, shader_end = 0;
    std::vector<std::string> bindings;
    int64_t workgroup_bytes = 0;
    int64_t loop_iterations = 0;  // "loop_iterations": one invocation's loop iterations, all loops, where past llvmpipe's cap
    bool half_arithmetic = false;  // "arithmetic": "float16" (ScopeOptions(arithmetic="fp16"))
};

struct ScalarArg {
    int index = 0;           // the kernel parameter's position
    DType dtype = DType::I32;  // int32 or int64
    ShapeExpr value = ShapeExpr::constant(0);
};

struct Step {
    enum Op { Launch, Copy } op = Launch;
    std::string kernel;  // Launch
    std::vector<int> args;          // the tensors, in parameter order (scalar parameters left out)
    std::vector<ScalarArg> scalars;  // integer parameters (run-time sizes)
    std::vector<ShapeExpr> global;   // the global size when it depends on run-time dims; else empty (the kernel's)
    // "loop_iterations": one invocation's loop iterations, all loops, where they depend on the
    // run-time dims and can pass llvmpipe's cap within their ranges (Vulkan; checked at each run's sizes)
    std::vector<ShapeExpr> loop_iterations;  // empty, or the one expression
    int src = -1, dst = -1;  // Copy
};

// An input the runtime keeps on the device between runs (relax_vk.core.states): the caller never
// sets it; it is zeroed at load and by a reset, and after each run output `update` ([rows, ...])
// is written into its rows [offset, offset + rows).
struct State {
    int tensor = -1;  // the input
    int update = -1;  // the output
    ShapeExpr offset = ShapeExpr::constant(0);
};

struct Allocation {
    int64_t bytes = 0;
    bool is_image = false;
    Extents image{};
    std::string dtype;  // texel dtype of an image
};

struct Program {
    std::string target;
    std::vector<DimRange> dims;  // run-time dims (empty: every shape is fixed)
    std::vector<Tensor> tensors;
    std::vector<Kernel> kernels;
    std::vector<Step> steps;
    std::vector<int> inputs, outputs;  // (in a session: the caller's, states and their updates left out)
    std::vector<State> states;
    bool has_storage = false;
    std::vector<Allocation> storage;

    // by name (kernel_index is made as the kernels are read: a decoder runs hundreds of launches per token)
    const Kernel* kernel(const std::string& name) const;
    std::unordered_map<std::string, size_t> kernel_index;
};

struct Constant {
    DType dtype;
    std::vector<int64_t> shape;
    size_t offset, nbytes;  // in the constants section
};

struct Artifact;

// A build of the same model with every run-time dim fixed (relax_vk.codegen.shape_variants): a
// session runs it where a run's dims equal `dims` (one value per Program::dims).
struct Variant {
    std::vector<int64_t> dims;
    std::shared_ptr<const Artifact> artifact;
};

struct Artifact {
    Program program;
    std::string source;
    std::string constants;  // the constant section's bytes
    std::map<std::string, Constant> constant_table;  // "t<id>" -> where its data lies ("variant<i>": a variant's artifact)
    std::vector<Variant> variants;
};

// Parses and validates a whole .rvk (relax_vk.serialization.artifact.Artifact.from_bytes); `what`
// names it in messages. Throws Error(RVK_ERROR_ARTIFACT).
std::shared_ptr<const Artifact> parse_artifact(const uint8_t* data, size_t size, const std::string& what);

uint32_t crc32(const uint8_t* data, size_t size);

// relax_vk.storage.lifetimes.image_bytes
int64_t image_bytes(const Extents& image, const std::string& dtype);
// textures of `texel` texels ("float16", "snorm8") stored as float32 texels (a device without such
// images); a constant's data stays as the artifact holds it (constant_upload converts it)
Program with_float_texels(const Program& p, const std::string& texel);
// bytes of one channel of a texel dtype ("float32" 4, "float16" 2, "snorm8" 1)
size_t texel_itemsize(const std::string& texel);
// Converts n texel channels of `texel` ("snorm8": bytes k, values max(-1, k / 127)) to dtype d.
void convert_texels(const std::string& texel, const void* src, DType d, void* dst, size_t n);
// The data to upload for constant tensor `t` (`data`: the artifact's bytes of it): as they are,
// unless they are snorm8 bytes k of a tensor no longer stored in snorm8 texels (a device without
// such images), whose float32 values k / 127 are written into `scratch`. `as_texels` says whether
// the result is already in the tensor's texel format (no conversion on the way to the device).
const void* constant_upload(const Tensor& t, const Constant& c, const void* data, std::vector<uint8_t>& scratch, bool* as_texels);

// the allocations of a storage plan (relax_vk.storage.program.allocations / allocated_bytes), and
// where they go on a device (an arena the device cannot make whole: a buffer per tensor)
struct Place {
    int allocation;
    int64_t offset;
};
void allocations(const Program& p, std::vector<Allocation>& objects, std::vector<Place>& places);
struct Placement {
    std::vector<std::optional<Allocation>> allocations;  // nullopt: an arena the device cannot make whole
    std::vector<std::optional<Place>> places;            // nullopt: a buffer of its own
    std::vector<bool> shared;
    int64_t device_bytes = 0;
};
Placement device_placement(const Program& p, int64_t alignment, int64_t max_alloc_bytes);
int64_t allocated_bytes(const Program& p);

// "[1, 2, 3]" (Python's repr of a list of ints)
std::string list_repr(const int64_t* v, size_t n);
inline std::string list_repr(const std::vector<int64_t>& v) { return list_repr(v.data(), v.size()); }

}  // namespace rvk
