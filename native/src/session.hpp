// What every backend's session shares: the model's edges (inputs
// checked and converted to the device dtype, outputs converted back to the host dtype), the
// per-step profile (step_times) and the run protocol. A backend implements execute().
#pragma once

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "program.hpp"

namespace rvk {

struct ProfileEntry {
    std::string name;
    double ms;
    double start_ms = std::nan("");  // where the step began, from the first step's start (a gap before it is device idle time)
};

// relax_vk.runtime.session.step_times: per-step ms that tile the device span (nanosecond stamps)
void step_times(const std::vector<std::string>& names, const std::vector<uint64_t>& begins, const std::vector<uint64_t>& ends,
                std::vector<ProfileEntry>& profile, double& span_ms);

// relax_vk.runtime.session.half_arithmetic_problem: throws Error(RVK_ERROR_LIMIT) when a kernel of
// `program` computes in float16 and the device lacks half arithmetic (`feature`), before any
// kernel is compiled (a compiler's refusal names no op and no remedy)
void half_arithmetic_problem(const Program& program, bool has_half, const std::string& device, const std::string& feature);

// The sizes of one run (the run-time dims' values and what follows from them): per tensor its shape
// and bytes, per launch step its scalar arguments and global size. A program without run-time dims
// has one, made at load.
struct RunShapes {
    std::vector<int64_t> dims;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<int64_t> bytes;
    std::vector<std::vector<int64_t>> scalars;  // per step: in the order of Step::scalars
    std::vector<std::array<size_t, 3>> global;  // per step (launches)
};

// Each distinct expression of a program's sizes once, and where each is used: a decoder's hundreds
// of tensor axes, integer arguments and grids hold a handful of expressions, which evaluate_shapes
// then evaluates once each. It holds copies and indices, nothing that points into the program: a
// session may replace its program by one of the same tensors, steps and kernels (OpenCL's float
// texels in place of half ones).
struct ShapePlan {
    ShapePlan() = default;
    explicit ShapePlan(const Program& program);
    std::vector<ShapeExpr> exprs;
    std::vector<std::vector<int>> axes;     // per tensor: its axes' expressions (empty: a fixed shape)
    std::vector<std::vector<int>> scalars;  // per step: its integer arguments' expressions
    std::vector<std::vector<int>> global;   // per step: its global size's three (empty: the kernel's)
    std::vector<int> kernels;               // per step: the index of the kernel it launches (-1: a copy)
};

// The RunShapes of `program` at `dims` (one value per Program::dims), into `shapes`: sized at the
// first call, then only what depends on the dims is written again, each distinct expression of
// `plan` evaluated once (a decoder changes its dims every token: Qwen3-0.6B's program took 0.22 ms
// a token on the H200's host when each call made its vectors anew, 0.03 ms now). Throws
// Error(RVK_ERROR_ARGUMENT) when a size cannot be computed or a tensor would outgrow the storage
// planned at the bound, with `shapes` partly written.
void evaluate_shapes(const Program& program, const ShapePlan& plan, const std::vector<int64_t>& dims, RunShapes& shapes);

class Session {
public:
    explicit Session(std::shared_ptr<const Artifact> artifact);
    virtual ~Session() = default;
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    const Program& program() const { return program_; }
    void set_input(int index, const void* data, size_t size, const char* dtype, const int64_t* shape, int rank);
    void run();
    void get_output(int index, void* data, size_t size) const;
    void set_profiling(bool enabled);
    // The shape of tensor `tid` as far as it is known: fixed, else the last run's (an input: the
    // last one set); -1 for a run-time dim not yet bound.
    std::vector<int64_t> current_shape(int tid) const;
    // Run-time dim `index`'s value in the last run (-1 before the first).
    int64_t dim_value(int index) const { return shapes_.dims.empty() ? -1 : shapes_.dims[static_cast<size_t>(index)]; }
    // Tensor `tid` of the program as the device holds it now, in its device dtype (half texels read
    // back as the tensor's dtype): `size` must be its exact byte size. After a run an intermediate
    // holds its value only in an artifact built without storage reuse (`relax-vk bisect`).
    void read_tensor(int tid, void* data, size_t size);
    // Zeroes every state (relax_vk.core.states): a new sequence. Also done at load.
    void reset_states();
    // For a driver that compiles a kernel again when its grid passes a width (pocl: a work-group
    // function for grids under 65,535 work-items wide, another for wider ones): when some launch's
    // grid is under `width` at every run-time dim's smallest value and not at its largest (or the
    // other way), runs the program once at each on zero inputs, so that both forms are compiled at
    // load and no run at a new size compiles. Leaves no input set, no output and no profile; a
    // program with states (a run would write them) is left alone. Returns whether it ran.
    bool warm_up_across(size_t width);
    // `runs` runs at the dims' smallest values on zero inputs, as warm_up_across leaves things: a
    // GPU's first runs of a session cost 2-2.7x a steady one (the H200's Vulkan: PP-OCR rec at
    // width 32, 3.3-4.0 and 2.7-3.3 ms against 1.4), so the user's first run at any size would.
    bool warm_up_at_smallest(int runs);
    // `runs` runs of a program of fixed shape on zero inputs (a shape variant's session: its first
    // runs would be a user's first runs at that size), as warm_up_across leaves things.
    bool warm_up_fixed(int runs);
    // The warm-up runs a shape variant gets at load (Vulkan: 2 on a GPU adapter, 1 on a CPU one;
    // pocl: 1; none where $RVK_VULKAN_WARM_UP / $RVK_POCL_WARM_UP is 0).
    int warm_up_runs() const { return warm_up_runs_; }

    // Shape variants (relax_vk.codegen.shape_variants): `session` runs the program fixed to `dims`
    // (one value per Program::dims) in place of this one at runs with those dims. Its device memory
    // and objects count in this session's.
    void add_variant(std::vector<int64_t> dims, std::unique_ptr<Session> session);
    // The variant the last run ran (an index of the artifact's variants), -1: this program (or no run yet).
    int last_variant() const { return last_variant_; }

    std::vector<ProfileEntry> profile;
    double device_ms = std::nan("");
    int64_t device_bytes = 0;
    // Device memory objects (buffers, images, sub-buffers, textures, readback and staging buffers)
    // the session has created since it was made: runs create none (allocations are made at load).
    int64_t device_objects = 0;
    std::string device_name;
    std::string warnings;
    // how the device program was made (binary_cache.BuildInfo.origin): "binary" (the cache's),
    // "source" (built and stored), "source (cache off)"; Vulkan: "driver cache at FOLDER" or
    // "source (...)" (driver_caches.hpp's vulkan_origin)
    std::string program_origin;
    // how kernels are given the buffers: OpenCL "svm" (arenas' tensors by their shared-virtual-memory
    // address, OpenCLSession::use_svm) or "memory objects" (cl_mem); Vulkan "bind groups"
    std::string buffer_binding;

protected:
    // Uploads `inputs` (device-dtype bytes, one per program input), runs every step and downloads
    // every output into `outputs` (device-dtype bytes, sized by the caller); fills the profile when
    // profiling.
    virtual void execute(const std::vector<std::vector<uint8_t>>& inputs, std::vector<std::vector<uint8_t>>& outputs) = 0;
    // Copies tensor `tid` into `data` (its dtype's bytes, the size checked by read_tensor), after
    // every step submitted so far.
    virtual void read_device(int tid, void* data) = 0;
    // Called when shapes_ changed (the first run, a run at other run-time dims) before execute():
    // a backend sets the launches' scalar arguments and grids from it.
    virtual void shapes_changed() {}
    // Sets tensor `tid` (a buffer of fixed shape) to zeros on the device (reset_states()).
    virtual void zero_tensor(int tid) = 0;

    // This run's state updates, in order, for execute() to make after the steps: `bytes` of tensor
    // `src` (from its start) to tensor `dst` at byte `dst_offset`, on the device.
    struct StateCopy {
        int src, dst;
        int64_t dst_offset, bytes;
    };
    std::vector<StateCopy> state_copies_;

    // The bytes tensor `tid` holds in the current run (its planned bytes when its shape is fixed)
    int64_t bytes_now(int tid) const;
    // " at W=37, H=8": the current run's dims, for messages
    std::string dims_text() const;

    RunShapes shapes_;  // the current run's sizes (RunShapes); for fixed shapes, set at load
    RunShapes next_shapes_;  // the sizes a change of dims is evaluated into, then swapped with shapes_
    bool shapes_ready_ = false;  // shapes_changed() has seen shapes_
    std::shared_ptr<const Artifact> artifact_;
    Program program_;  // what is allocated (half texels may have become float texels)
    ShapePlan plan_;   // program_'s size expressions (made at load)
    bool can_profile_ = false;
    bool profiling_ = false;
    int warm_up_runs_ = 0;

private:
    std::vector<std::vector<uint8_t>> inputs_, outputs_device_, outputs_host_;
    std::vector<bool> input_set_;
    std::vector<std::vector<int64_t>> input_shapes_;  // the shape of each input as set
    std::vector<int64_t> bind_dims() const;
    // Refuses an input that indexes a table (Tensor::index_range) holding a value outside its range.
    void check_index_values(const Tensor& t, const uint8_t* data, const std::vector<int64_t>& shape) const;
    // Every input unset: a fixed input's buffer sized, a run-time-dims one empty (as at load)
    void clear_inputs();
    // The warm-ups' runs: one on zero inputs at each of `sizes`, then nothing set, output or
    // profiled, the dims unbound (a refusal becomes a warning naming `what`). Returns whether all ran.
    bool run_zeros_at(const std::vector<const RunShapes*>& sizes, const char* what);
    // The shapes of a run with every dim at its smallest (`largest`: largest) value into `out`;
    // false when those values together are no valid run (the warm-ups then skip it).
    bool shapes_at_extreme(bool largest, RunShapes& out) const;
    struct VariantSession {
        std::vector<int64_t> dims;
        std::unique_ptr<Session> session;
    };
    std::vector<VariantSession> variants_;
    int last_variant_ = -1;
    // Runs variant `index` on this session's inputs and takes its outputs and profile.
    void run_variant(int index);
};

// A session for the artifact's target on `device` (OpenCL: NULL, "pocl", "gpu", "P:D"; Vulkan:
// NULL, "lavapipe", "cpu", "gpu", an adapter index) with the RVK_SESSION_* `flags`. Throws Error.
std::unique_ptr<Session> open_session(std::shared_ptr<const Artifact> artifact, const char* device, uint32_t flags);

// One device as `relax-vk devices` lists it (relax_vk.core.limits.DeviceLimits' fields in `limits`)
struct DeviceRow {
    std::string index, platform, device, type, problem;  // problem "": usable
    bool images = false;                                   // image support (image_* below only then)
    int64_t image_width = 1, image_height = 1, image_layers = 1;
    int64_t max_buffer_bytes = 0, max_alloc_bytes = 0, max_workgroups = 0, max_workgroup_size = 0, max_shared_bytes = 0, memory_bytes = 0;
    std::string source;                                    // where the limits come from
    bool half_images = false, half_arithmetic = false;
};
std::string device_row_json(const DeviceRow& row);

// The devices a session can open, as a JSON array of rows (`relax-vk devices`): index (the spec
// that names it), platform, device, type, image_support, image2d_max, image_max_array_size, usable,
// problem, limits (relax_vk.core.limits.DeviceLimits' fields) and fp16 {half_images, half_arithmetic}.
// `spec` NULL: every device of the API; else the one row of the device the spec selects (as a
// session would), or Error(RVK_ERROR_DEVICE / RVK_ERROR_ARGUMENT).
std::string opencl_devices_json(const char* spec);
std::string vulkan_devices_json(const char* spec);

// A JSON string literal of `s` (quotes and escapes).
std::string json_quote(const std::string& s);

// `s` without leading and trailing whitespace (Python's str.strip(): device names as drivers report them).
std::string strip(std::string s);

// Whether `s` is a non-empty run of decimal digits (a device index in a "P:D" or "N" device spec).
bool all_digits(const std::string& s);

std::unique_ptr<Session> open_opencl_session(std::shared_ptr<const Artifact> artifact, const char* device, bool profile);
// `shader_checks`: 0 (wgpu's bounds checks), RVK_SESSION_SHADER_CHECKS_LOOPS or _NONE. Without wgpu
// headers at build time (RVK_VULKAN off) it throws Error(RVK_ERROR_UNSUPPORTED).
std::unique_ptr<Session> open_vulkan_session(std::shared_ptr<const Artifact> artifact, const char* device, bool profile, int shader_checks);

}  // namespace rvk
