// The Vulkan backend through wgpu-native's C API (webgpu.h + wgpu.h, opened at run time by
// wgpu_loader.cpp: the wgpu wheel's library): the artifact's WGSL kernels and the copy shaders (the
// fragments of native/src/shaders/copies.wgsl, embedded at build time).
//
// Adapters by the names and rules every relax_vk tool uses (NULL, "lavapipe"/"cpu", "gpu", an index
// of the Vulkan adapters). A session checks the program against the adapter's limits
// (check_limits), requests a device with those limits (and
// timestamp-query / shader-f16 where the program needs them), allocates every texture
// (rgba32float / rgba16float 2D arrays) and buffer of the artifact's storage plan as
// the device can bind it (an arena range per tensor, bound at its offset), creates every shader
// module, pipeline and bind group, the readback buffers of the outputs and the timestamp queries,
// and uploads the constants. A run then writes the inputs, submits the steps (one compute pass; a
// pass per step with a timestamp pair when profiling; recorded during the last run when it can be),
// then a command buffer that copies the states' new rows and the outputs (and the timestamps) into
// mappable buffers, and maps.
// Run-time dims (run_time_shapes.hpp): a kernel's integer arguments are one uniform block (emit.py's
// "uniforms" binding, a slot of one buffer made at load), and a grid that depends on the dims is
// dispatched indirectly from a buffer of workgroup counts; when a run's sizes change,
// shapes_changed() writes both (queue writes, so steps recorded ahead stay right at any size), and
// the inputs, outputs and buffer copies move the run's bytes (storage stays at the bound).
//
// wgpu-native's default uncaptured-error handler aborts the process: every device gets an error
// callback (errors are collected and raised as Error after the call that caused them; wgpu-native
// reports them synchronously) and a device-lost callback.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <system_error>
#include <thread>
#include <cctype>

#include "copies_wgsl.h"  // generated from native/src/shaders/copies.wgsl
#include "driver_caches.hpp"
#include "session.hpp"
#include "wgpu_loader.hpp"

namespace rvk {

namespace {

constexpr int kMaxQueries = 4096;  // WebGPU's limit on one query set (session.MAX_QUERIES)
constexpr int64_t kWorkgroup = 64;  // copies.WORKGROUP

// (borrows `s`: it must outlive the call the view is passed to)
WGPUStringView view(const std::string& s) { return WGPUStringView{s.data(), s.size()}; }
WGPUStringView view(const char* s) { return WGPUStringView{s, std::strlen(s)}; }

std::string text(WGPUStringView v) {
    if (!v.data) return "";
    return v.length == WGPU_STRLEN ? std::string(v.data) : std::string(v.data, v.length);
}

int64_t words(int64_t nbytes) { return (nbytes + 3) / 4 * 4; }  // session._words

// ------------------------------------------------------------------------------- adapters
struct Adapter {
    WGPUAdapter adapter;
    std::string device, type;  // info.device, the adapter type's name ("DiscreteGPU", "CPU", ...)
    bool cpu;
    uint32_t vendor_id;
    std::string driver_info;  // info.description: the driver's version ("Mesa 22.3.6 (LLVM 15.0.6)")
};

std::string adapter_type_name(WGPUAdapterType t) {
    switch (t) {
        case WGPUAdapterType_DiscreteGPU: return "DiscreteGPU";
        case WGPUAdapterType_IntegratedGPU: return "IntegratedGPU";
        case WGPUAdapterType_CPU: return "CPU";
        default: return "Unknown";
    }
}

// devices.describe_adapter
std::string describe(const Adapter& a) { return a.device + " (" + a.type + ", Vulkan)"; }

struct Instance {
    WGPUInstance instance = nullptr;
    std::vector<Adapter> adapters;  // on the Vulkan backend, in enumeration order
    DriverCaches caches;            // where the drivers keep their pipelines (set before the instance)
};

// The process's instance (devices._wgpu: timestamps normalized to nanoseconds) and its Vulkan
// adapters, made at the first call and kept for the process. The drivers' shader caches are
// pointed into relax_vk's cache folder first (driver_caches.hpp): the drivers read their settings
// when wgpu-native loads them, so the folder of the first Vulkan session stays the process's.
const Instance& instance() {
    static std::mutex lock;
    static Instance made;
    std::lock_guard<std::mutex> guard(lock);
    if (made.instance) return made;
    const Wgpu& w = wgpu();
    made.caches = point_driver_caches();
    WGPUInstanceExtras extras = {};
    extras.chain.sType = static_cast<WGPUSType>(WGPUSType_InstanceExtras);
    extras.backends = WGPUInstanceBackend_Vulkan;
    // (not WGPUInstanceFlag_Default, which in a release build of wgpu-native is its validation of
    // indirect dispatches: a validating compute pass before each. The session checks every
    // workgroup count it writes against the device's limit: VulkanSession::write_grids.)
    extras.flags = WGPUInstanceFlag_AutomaticTimestampNormalization;
    WGPUInstanceDescriptor desc = WGPU_INSTANCE_DESCRIPTOR_INIT;
    desc.nextInChain = &extras.chain;
    WGPUInstance inst = w.CreateInstance(&desc);
    if (!inst) throw Error(RVK_ERROR_DEVICE, "wgpu-native (" + w.path + ") could not create an instance");
    WGPUInstanceEnumerateAdapterOptions options = {};
    options.backends = WGPUInstanceBackend_Vulkan;
    std::vector<WGPUAdapter> all(w.InstanceEnumerateAdapters(inst, &options, nullptr));
    if (!all.empty()) all.resize(w.InstanceEnumerateAdapters(inst, &options, all.data()));
    for (WGPUAdapter a : all) {
        WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
        if (w.AdapterGetInfo(a, &info) != WGPUStatus_Success) continue;
        if (info.backendType == WGPUBackendType_Vulkan)
            made.adapters.push_back({a, text(info.device), adapter_type_name(info.adapterType), info.adapterType == WGPUAdapterType_CPU, info.vendorID,
                                     text(info.description)});
        else
            w.AdapterRelease(a);
        w.AdapterInfoFreeMembers(info);
    }
    made.instance = inst;
    return made;
}

// devices.select_adapter
const Adapter& select_adapter(const char* spec_or_null) {
    const std::vector<Adapter>& adapters = instance().adapters;
    if (adapters.empty())
        throw Error(RVK_ERROR_DEVICE, "no Vulkan adapter found (install a Vulkan driver: Debian 'mesa-vulkan-drivers libvulkan1' gives lavapipe)");
    const Adapter* gpu = nullptr;
    const Adapter* cpu = nullptr;
    for (const Adapter& a : adapters) {
        if (a.cpu && !cpu) cpu = &a;
        if (!a.cpu && !gpu) gpu = &a;
    }
    if (!spec_or_null || std::string(spec_or_null) == "default") return gpu ? *gpu : *cpu;
    std::string spec = spec_or_null;
    if (spec == "lavapipe" || spec == "cpu" || spec == "pocl") {
        if (!cpu) throw Error(RVK_ERROR_DEVICE, "no CPU Vulkan adapter (lavapipe); `relax-vk devices` lists the adapters");
        return *cpu;
    }
    if (spec == "gpu") {
        if (!gpu) throw Error(RVK_ERROR_DEVICE, "no GPU Vulkan adapter; `relax-vk devices` lists the adapters");
        return *gpu;
    }
    if (spec.size() < 10 && all_digits(spec) && std::stoul(spec) < adapters.size()) return adapters[std::stoul(spec)];
    throw Error(RVK_ERROR_ARGUMENT, "unknown Vulkan device " + py_repr(spec) + ": use 'lavapipe', 'gpu' or an index from `relax-vk devices`");
}

// ------------------------------------------------------------------------------- scope copies
const char* texture_format_name(const std::string& dtype) {
    return dtype == "float32" ? "rgba32float" : dtype == "float16" ? "rgba16float" : dtype == "snorm8" ? "rgba8snorm" : nullptr;
}

WGPUTextureFormat texture_format(const std::string& dtype) {
    return dtype == "float16" ? WGPUTextureFormat_RGBA16Float : dtype == "snorm8" ? WGPUTextureFormat_RGBA8Snorm : WGPUTextureFormat_RGBA32Float;
}

// "//! NAME" with NAME a word (copies._fragments' r"//! (\w+)")
bool fragment_marker(const std::string& line) {
    return line.size() > 4 && line.compare(0, 4, "//! ") == 0 &&
           std::all_of(line.begin() + 4, line.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// The named fragments of copies.wgsl (a line "//! NAME" starts one), as copies._fragments
const std::map<std::string, std::string>& fragments() {
    static const std::map<std::string, std::string> parsed = [] {
        std::map<std::string, std::vector<std::string>> lines;
        std::string name, source = kCopiesWgsl;
        for (size_t start = 0; start < source.size();) {
            size_t end = source.find('\n', start);
            std::string line = source.substr(start, end == std::string::npos ? std::string::npos : end - start);
            if (fragment_marker(line)) {
                name = line.substr(4);
                lines[name].clear();
            } else if (!name.empty()) {
                lines[name].push_back(line);
            }
            if (end == std::string::npos) break;
            start = end + 1;
        }
        std::map<std::string, std::string> out;
        for (const auto& [key, body] : lines)
            for (size_t i = 0; i < body.size(); ++i) out[key] += (i ? "\n" : "") + body[i];
        return out;
    }();
    return parsed;
}

// copies._fill: fragment `name` with every ${KEY} replaced
std::string fill(const std::string& name, const std::map<std::string, std::string>& values = {}) {
    auto it = fragments().find(name);
    if (it == fragments().end()) throw Error(RVK_ERROR_RUNTIME, "internal error: copies.wgsl has no fragment " + name);
    std::string out, s = it->second;
    for (size_t i = 0; i < s.size();) {
        if (s.compare(i, 2, "${") == 0) {
            size_t close = s.find('}', i);
            auto v = values.find(s.substr(i + 2, close - i - 2));
            if (close == std::string::npos || v == values.end()) throw Error(RVK_ERROR_RUNTIME, "internal error: copies.wgsl fragment " + name + " misses a value");
            out += v->second;
            i = close + 1;
        } else {
            out += s[i++];
        }
    }
    return out;
}

// copies.copy_items
int64_t copy_items(const Tensor& s, const Tensor& d, int64_t nbytes, int64_t itemsize) {
    if (!s.is_image && !d.is_image) return (nbytes + 3) / 4;
    return nbytes / (4 * itemsize);
}

// The uniform of a words copy whose count is the run's (binding 2: its word count in .x)
constexpr const char* kRunCountDecl = "@group(0) @binding(2) var<uniform> rvk_count: vec4<i32>;";

// copies.copy_shader (the same text, from the same fragments). `run_count`: a buffer-to-buffer copy
// of a tensor of run-time shape, which copies the words of binding 2's count (the run's bytes), not
// the bound's.
std::string copy_shader(const Tensor& s, const Tensor& d, int64_t nbytes, const std::string& dtype, int64_t groups_x, const std::string& texel,
                        bool run_count = false) {
    std::string src = s.is_image ? "texture" : "buffer", dst = d.is_image ? "texture" : "buffer";
    bool words_only = !s.is_image && !d.is_image;
    if (!texture_format_name(dtype) && !words_only)
        throw Error(RVK_ERROR_ARTIFACT, "texture copies of " + dtype + " tensors are not supported (float32 and float16)");
    if (run_count && !words_only) throw Error(RVK_ERROR_ARTIFACT, "copy " + s.name + "->" + d.name + ": a texture of run-time shape");
    std::string elem = dtype == "float32" ? "f32" : dtype == "float16" ? "f16" : "u32";
    int64_t count = copy_items(s, d, nbytes, dtype == "float16" ? 2 : 4);
    std::string count_text = run_count ? "rvk_count.x" : std::to_string(count);
    std::vector<std::string> parts = {fill("header", {{"src", src}, {"dst", dst}, {"count", run_count ? "(a run's)" : count_text}, {"dtype", dtype}})};
    std::string body;
    if (words_only) {
        parts.push_back(fill("words_src_decl"));
        parts.push_back(fill("words_dst_decl"));
        if (run_count) parts.push_back(kRunCountDecl);
        body = fill("words_body");
    } else {
        if (elem == "f16") parts.push_back(fill("enable_f16"));
        std::string read;
        if (s.is_image) {
            parts.push_back(fill("src_texture_decl"));
            read = fill("src_texture_read", {{"w", std::to_string(s.image[0])}, {"h", std::to_string(s.image[1])}, {"wh", std::to_string(s.image[0] * s.image[1])},
                                             {"x0", std::to_string(s.origin[0])}, {"y0", std::to_string(s.origin[1])}});
        } else {
            parts.push_back(fill("src_buffer_decl", {{"elem", elem}}));
            read = fill("src_buffer_read", {{"elem", elem}});
        }
        if (d.is_image) {
            parts.push_back(fill("dst_texture_decl", {{"format", texture_format_name(texel.empty() ? dtype : texel)}}));
            body = fill("dst_texture_body", {{"w", std::to_string(d.image[0])}, {"h", std::to_string(d.image[1])},
                                             {"wh", std::to_string(d.image[0] * d.image[1])}, {"read", read},
                                             {"x0", std::to_string(d.origin[0])}, {"y0", std::to_string(d.origin[1])}});
        } else {
            parts.push_back(fill("dst_buffer_decl", {{"elem", elem}}));
            body = fill("dst_buffer_body", {{"elem", elem}, {"read", read}});
        }
    }
    parts.push_back(fill("main", {{"workgroup", std::to_string(kWorkgroup)}, {"groups_x", std::to_string(groups_x)}, {"count", count_text}, {"body", body}}));
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? "\n" : "") + parts[i];
    return out + "\n";
}

// copies.copy_bindings
std::vector<std::string> copy_bindings(const Tensor& s, const Tensor& d, const std::string& dtype, const std::string& texel) {
    std::string src = s.is_image ? "texture" : "buffer_read";
    std::string dst = d.is_image ? ((texel.empty() ? dtype : texel) == "float16" ? "storage_texture_f16" : "storage_texture") : "buffer";
    return {src, dst};
}

// copies.copy_grid
std::pair<int64_t, int64_t> copy_grid(int64_t items, int64_t max_groups) {
    int64_t groups = std::max<int64_t>(1, (items + kWorkgroup - 1) / kWorkgroup);
    if (groups <= max_groups) return {groups, 1};
    int64_t y = (groups + max_groups - 1) / max_groups;
    return {(groups + y - 1) / y, y};
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Where "read>" of r"@binding\(I\)\s+var<storage,\s*read>" starts, for each match in `source`
std::vector<size_t> read_only_declarations(const std::string& source, size_t binding) {
    std::vector<size_t> out;
    const std::string head = "@binding(" + std::to_string(binding) + ")";
    for (size_t at = source.find(head); at != std::string::npos; at = source.find(head, at + 1)) {
        size_t i = at + head.size(), spaces = i;
        while (i < source.size() && is_space(source[i])) ++i;
        if (i == spaces || source.compare(i, 12, "var<storage,") != 0) continue;
        i += 12;
        while (i < source.size() && is_space(source[i])) ++i;
        if (source.compare(i, 5, "read>") == 0) out.push_back(i);
    }
    return out;
}

// session.writable_reads: the read-only buffers at `positions` declared and bound read-write
void writable_reads(std::string& source, std::vector<std::string>& bindings, const std::vector<size_t>& positions) {
    for (size_t i : positions) {
        if (bindings[i] != "buffer_read") continue;
        bindings[i] = "buffer";
        std::vector<size_t> found = read_only_declarations(source, i);
        if (found.size() != 1) throw Error(RVK_ERROR_ARTIFACT, "binding " + std::to_string(i) + " is not a read-only storage buffer declaration of the shader");
        source.replace(found[0], 5, "read_write>");
    }
}

// ------------------------------------------------------------------------------- the session
struct Limits {
    int64_t tex2d, layers, invocations, size[3], groups, workgroup_storage, buffers, storage_textures, textures, binding_size, buffer_size, alignment;
    int64_t uniforms;  // uniform buffers per shader stage (a kernel's integer arguments)
};

Limits limits_of(const WGPULimits& l) {
    return {l.maxTextureDimension2D, l.maxTextureArrayLayers, l.maxComputeInvocationsPerWorkgroup,
            {l.maxComputeWorkgroupSizeX, l.maxComputeWorkgroupSizeY, l.maxComputeWorkgroupSizeZ}, l.maxComputeWorkgroupsPerDimension,
            l.maxComputeWorkgroupStorageSize, l.maxStorageBuffersPerShaderStage, l.maxStorageTexturesPerShaderStage,
            l.maxSampledTexturesPerShaderStage, static_cast<int64_t>(l.maxStorageBufferBindingSize), static_cast<int64_t>(l.maxBufferSize),
            l.minStorageBufferOffsetAlignment, l.maxUniformBuffersPerShaderStage};
}

// llvmpipe (lavapipe) ends a shader invocation's loops after 65535 iterations of all of them
// together (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS) and returns what they had computed by then
constexpr int64_t kLlvmpipeLoopIterations = 65535;

bool is_llvmpipe(const std::string& device) { return device.find("llvmpipe") != std::string::npos; }

std::string loop_cap_message(const std::string& kernel, int64_t iterations, const std::string& device, const std::string& at) {
    return "kernel " + kernel + " runs " + std::to_string(iterations) + " loop iterations in one invocation" + at + "; " + device +
           " ends every invocation's loops after " + std::to_string(kLlvmpipeLoopIterations) +
           " in all (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS) and would return wrong numbers: run it on another Vulkan device, or on OpenCL";
}

// vulkan.session.check_limits (the same checks, the same messages)
void check_limits(const Program& program, const Limits& l, const std::string& device, bool f16) {
    half_arithmetic_problem(program, f16, device, "the shader-f16 feature");
    for (const Tensor& t : program.tensors) {
        if (t.is_image) {
            std::vector<std::string> problems;
            // (a placed texture: the image it sits in reaches at least its origin plus its extents)
            if (t.origin[0] + t.image[0] > l.tex2d)
                problems.push_back("width " + std::to_string(t.origin[0] + t.image[0]) + " > texture2d max width " + std::to_string(l.tex2d));
            if (t.origin[1] + t.image[1] > l.tex2d)
                problems.push_back("height " + std::to_string(t.origin[1] + t.image[1]) + " > texture2d max height " + std::to_string(l.tex2d));
            if (t.image[2] > l.layers) problems.push_back(std::to_string(t.image[2]) + " layers > max array layers " + std::to_string(l.layers));
            if (!problems.empty()) {
                std::string joined;
                for (size_t i = 0; i < problems.size(); ++i) joined += (i ? "; " : "") + problems[i];
                throw Error(RVK_ERROR_LIMIT, "tensor " + t.name + " (" + t.scope + ", image " + std::to_string(t.image[0]) + "x" + std::to_string(t.image[1]) +
                                                 "x" + std::to_string(t.image[2]) + ") does not fit " + device + ": " + joined);
            }
            if (!texture_format_name(dtype_name(t.dtype)))
                throw Error(RVK_ERROR_LIMIT, "tensor " + t.name + ": " + dtype_name(t.dtype) + " textures are not supported (float32 and float16 only)");
        }
        if (t.dtype == DType::F16 && !f16)
            throw Error(RVK_ERROR_LIMIT, "tensor " + t.name + " is float16; " + device + " lacks the shader-f16 feature (rebuild the model in float32)");
        if (!t.is_image && t.bytes > l.binding_size)
            throw Error(RVK_ERROR_LIMIT, "tensor " + t.name + " (" + std::to_string(t.bytes) + " bytes) exceeds " + device +
                                             "'s max storage buffer binding size " + std::to_string(l.binding_size));
    }
    static const char* const axes = "xyz";
    bool llvmpipe = is_llvmpipe(device);
    for (const Kernel& k : program.kernels) {
        if (llvmpipe && k.loop_iterations > kLlvmpipeLoopIterations)
            throw Error(RVK_ERROR_LIMIT, loop_cap_message(k.name, k.loop_iterations, device, ""));
        if (k.workgroup_bytes > l.workgroup_storage)
            throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + " needs " + std::to_string(k.workgroup_bytes) + " bytes of workgroup memory; " + device +
                                             " allows " + std::to_string(l.workgroup_storage));
        int64_t invocations = k.local[0] * k.local[1] * k.local[2];
        if (invocations > l.invocations)
            throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + " needs workgroups of " + std::to_string(invocations) + " invocations; " + device +
                                             " allows " + std::to_string(l.invocations));
        for (size_t a = 0; a < 3; ++a) {
            int64_t groups = k.global[a] / k.local[a];
            if (k.local[a] > l.size[a])
                throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + ": workgroup size " + axes[a] + "=" + std::to_string(k.local[a]) + " > " + std::to_string(l.size[a]));
            if (groups > l.groups)
                throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + ": " + std::to_string(groups) + " workgroups along " + axes[a] + " > " + device +
                                                 "'s limit " + std::to_string(l.groups));
        }
        int64_t counts[4] = {0, 0, 0, 0};  // buffer, texture, storage_texture, uniform
        for (const std::string& b : k.bindings) {
            if (b == "buffer" || b == "buffer_read") ++counts[0];
            if (b == "texture") ++counts[1];
            if (b == "storage_texture" || b == "storage_texture_f16") ++counts[2];
            if (b == "uniform" || b == "uniforms") ++counts[3];
        }
        const std::pair<const char*, int64_t> kinds[4] = {
            {"buffer", l.buffers}, {"texture", l.textures}, {"storage_texture", l.storage_textures}, {"uniform", l.uniforms}};
        const char* const keys[4] = {"max-storage-buffers-per-shader-stage", "max-sampled-textures-per-shader-stage",
                                     "max-storage-textures-per-shader-stage", "max-uniform-buffers-per-shader-stage"};
        for (size_t i = 0; i < 4; ++i)
            if (counts[i] > kinds[i].second)
                throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + " binds " + std::to_string(counts[i]) + " " + kinds[i].first + "s; " + device + " allows " +
                                                 std::to_string(kinds[i].second) + " (" + keys[i] + ")");
    }
}

// What the device's callbacks report (outlives the device: see VulkanSession's member order).
// wgpu-native reports an error synchronously, on the thread of the call that caused it: a call
// that may run beside others (VulkanSession::pipeline) captures its own.
struct Errors {
    std::string message;  // the first uncaptured error since the last take()
    std::string lost;     // why the device was lost ("" while it is not)
    static thread_local std::string* captured;  // where this thread's errors go while set (see Capture)

    static void on_error(WGPUDevice const*, WGPUErrorType type, WGPUStringView message, void* self, void*) {
        std::string& slot = captured ? *captured : static_cast<Errors*>(self)->message;
        if (slot.empty())
            slot = std::string(type == WGPUErrorType_OutOfMemory ? "out of memory: " : type == WGPUErrorType_Internal ? "internal error: " : "") + text(message);
    }
    static void on_lost(WGPUDevice const*, WGPUDeviceLostReason reason, WGPUStringView message, void* self, void*) {
        if (reason == WGPUDeviceLostReason_Destroyed || reason == WGPUDeviceLostReason_CallbackCancelled) return;  // (the session's own release)
        static_cast<Errors*>(self)->lost = "the Vulkan device was lost: " + text(message);
    }
    std::string take() {
        std::string m = message.empty() ? lost : message;
        message.clear();
        return m;
    }

    // The errors of this thread's wgpu calls go to `into` while it lives.
    struct Capture {
        std::string* before;
        explicit Capture(std::string& into) : before(captured) { captured = &into; }
        ~Capture() { captured = before; }
        Capture(const Capture&) = delete;
        Capture& operator=(const Capture&) = delete;
    };
};
thread_local std::string* Errors::captured = nullptr;

// Every wgpu object a session creates, released in reverse dependency order (also when the
// constructor throws half-way).
struct Handles {
    const Wgpu* w = nullptr;
    WGPUDevice device = nullptr;
    WGPUQueue queue = nullptr;
    std::vector<WGPUBuffer> buffers;
    std::vector<WGPUTexture> textures;
    std::vector<WGPUTextureView> views;
    std::vector<WGPUShaderModule> modules;
    std::vector<WGPUBindGroupLayout> layouts;
    std::vector<WGPUPipelineLayout> pipeline_layouts;
    std::vector<WGPUComputePipeline> pipelines;
    std::vector<WGPUBindGroup> groups;
    WGPUQuerySet queries = nullptr;

    ~Handles() {
        if (!w) return;
        for (WGPUBindGroup g : groups) w->BindGroupRelease(g);
        for (WGPUComputePipeline p : pipelines) w->ComputePipelineRelease(p);
        for (WGPUPipelineLayout p : pipeline_layouts) w->PipelineLayoutRelease(p);
        for (WGPUBindGroupLayout l : layouts) w->BindGroupLayoutRelease(l);
        for (WGPUShaderModule m : modules) w->ShaderModuleRelease(m);
        for (WGPUTextureView v : views) w->TextureViewRelease(v);
        for (WGPUTexture t : textures) w->TextureRelease(t);
        for (WGPUBuffer b : buffers) w->BufferRelease(b);
        if (queries) w->QuerySetRelease(queries);  // (wgpu-native's QuerySetDestroy then Release panics: release only)
        if (queue) w->QueueRelease(queue);
        if (device) w->DeviceRelease(device);
    }
};

class VulkanSession : public Session {
public:
    VulkanSession(std::shared_ptr<const Artifact> artifact, const Adapter& adapter, bool profile, int shader_checks)
        : Session(std::move(artifact)), w_(wgpu()), shader_checks_(shader_checks) {
        h_.w = &w_;
        program_origin = vulkan_origin(instance().caches, adapter.vendor_id, adapter.driver_info);
        buffer_binding = "bind groups";
        device_name = strip(adapter.device);
        WGPULimits adapter_limits = WGPU_LIMITS_INIT;
        if (w_.AdapterGetLimits(adapter.adapter, &adapter_limits) != WGPUStatus_Success)
            throw Error(RVK_ERROR_DEVICE, "wgpu cannot read the limits of " + describe(adapter));
        limits_ = limits_of(adapter_limits);
        bool f16 = w_.AdapterHasFeature(adapter.adapter, WGPUFeatureName_ShaderF16);
        check_limits(program_, limits_, describe(adapter), f16);
        llvmpipe_ = is_llvmpipe(describe(adapter));
        int steps = static_cast<int>(program_.steps.size());
        can_profile_ = profile;
        profiling_ = profile;
        spin_us_ = std::min(number_from_env("RVK_SPIN_US", adapter.cpu ? 0 : 2000), 10'000'000L);  // (a CPU adapter's "GPU" is the host's cores; at most 10 s)
        timestamps_ = profile && w_.AdapterHasFeature(adapter.adapter, WGPUFeatureName_TimestampQuery) && steps > 0 && 2 * steps <= kMaxQueries;
        request_device(adapter, adapter_limits);
        allocate_storage();
        prepare_steps();
        prepare_readback();
        touch_readbacks();
        upload_constants();
        for (const State& st : program_.states) {  // (WebGPU copies whole words)
            const Tensor& t = program_.tensors[static_cast<size_t>(st.tensor)];
            if (t.shape[0] && (t.bytes / t.shape[0]) % 4)
                throw Error(RVK_ERROR_LIMIT, "state " + t.name + ": rows of " + std::to_string(t.bytes / t.shape[0]) +
                                                 " bytes; Vulkan (WebGPU) copies rows of a multiple of 4 bytes");
        }
        reset_states();
        // A GPU adapter's first two runs of a session are its slowest (pipelines' first uses):
        // a program of run-time dims runs twice at their smallest values here, so that a user's
        // first run at any size costs what a new size costs (not on a CPU adapter, whose runs are
        // the host's own work; $RVK_VULKAN_WARM_UP=0: never, 1: on any adapter).
        const char* warm = std::getenv("RVK_VULKAN_WARM_UP");
        if (warm && *warm ? std::strcmp(warm, "0") != 0 : !adapter.cpu) warm_up_at_smallest(2);
        // a shape variant's session (fixed shapes) runs at load too, on a CPU adapter as well: its
        // first run would compile its pipelines there (lavapipe: 5.3 s against 0.35 for ResNet-18 at 96)
        warm_up_runs_ = warm && std::strcmp(warm, "0") == 0 ? 0 : adapter.cpu ? 1 : 2;
    }

    ~VulkanSession() override { drop_ahead(); }

protected:
    void execute(const std::vector<std::vector<uint8_t>>& inputs, std::vector<std::vector<uint8_t>>& outputs) override {
        for (size_t i = 0; i < inputs.size(); ++i) write(program_.inputs[i], inputs[i].data());
        bool stamped = profiling_ && timestamps_;
        if (stamped || ahead_.empty()) {
            drop_ahead();  // (recorded unstamped: a profiled run records its own)
            record_steps(stamped, true);
        } else {  // recorded during the last run: the inputs, integer arguments and grids written since are ordered before it
            w_.QueueSubmit(h_.queue, ahead_.size(), ahead_.data());
            drop_ahead();
        }
        record_tail(stamped);
        check_errors("running the program");
        if (!stamped && record_ahead_) record_steps(false, false);  // the next run's, while the GPU runs this one
        std::vector<std::pair<WGPUBuffer, uint64_t>> maps;
        for (const Readback& r : readbacks_)
            if (r.buffer) maps.push_back({r.buffer, r.size});
        if (stamped) maps.push_back({query_readback_, 16 * steps_.size()});
        map_all(maps, !stamped);
        for (size_t i = 0; i < outputs.size(); ++i) read_mapped(readbacks_[i], outputs[i]);
        if (stamped) {
            const uint64_t* stamps = static_cast<const uint64_t*>(w_.BufferGetConstMappedRange(query_readback_, 0, 16 * steps_.size()));
            std::vector<std::string> names;
            std::vector<uint64_t> begins, ends;
            for (size_t i = 0; i < steps_.size(); ++i) {
                names.push_back(steps_[i].name);
                begins.push_back(stamps[2 * i]);
                ends.push_back(stamps[2 * i + 1]);
            }
            w_.BufferUnmap(query_readback_);
            step_times(names, begins, ends, profile, device_ms);
        }
    }

    void zero_tensor(int tid) override {
        drop_ahead();  // (a run recorded ahead would be right; kept simple: the next run records its own)
        std::vector<uint8_t> zeros(static_cast<size_t>(program_.tensors[static_cast<size_t>(tid)].bytes), 0);
        write(tid, zeros.data());
    }

    // A mappable copy of the tensor, made, read and released at once (a tool's read: bisect)
    void read_device(int tid, void* data) override {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        Readback r = readback_of(tid);
        WGPUBufferDescriptor desc = WGPU_BUFFER_DESCRIPTOR_INIT;
        desc.size = r.size;
        desc.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
        r.buffer = w_.DeviceCreateBuffer(h_.device, &desc);
        ++device_objects;
        check_errors("allocating the readback of " + t.name);
        if (!r.buffer) throw Error(RVK_ERROR_RUNTIME, "allocating the readback of " + t.name + " failed");
        struct Release {
            const Wgpu& w;
            WGPUBuffer b;
            ~Release() { w.BufferRelease(b); }
        } release{w_, r.buffer};
        WGPUCommandEncoder encoder = w_.DeviceCreateCommandEncoder(h_.device, nullptr);
        copy_out(encoder, r);
        WGPUCommandBuffer commands = w_.CommandEncoderFinish(encoder, nullptr);
        w_.CommandEncoderRelease(encoder);
        w_.QueueSubmit(h_.queue, 1, &commands);
        w_.CommandBufferRelease(commands);
        check_errors("reading " + t.name);
        map_all({{r.buffer, r.size}}, false);
        std::vector<uint8_t> out;
        read_mapped(r, out);
        std::memcpy(data, out.data(), out.size());
    }

    // The run's integer arguments into the uniform arena and the launches' workgroup counts from
    // the run's global sizes (steps_[i] is step i's); a copy of run-time shape: its word count and
    // grid. Creates nothing on the device (queue writes). A step whose grid depends on the dims is
    // dispatched indirectly, its counts read from grids_ when it runs, so steps recorded ahead at
    // other sizes stay right: a decoder's every token changes its attention's grids.
    void shapes_changed() override {
        static const char* const axes = "xyz";
        std::string at = dims_text();
        auto slot = [&](uint64_t offset, int64_t value) {
            int32_t v = static_cast<int32_t>(value);
            std::memcpy(uniform_staging_.data() + offset, &v, sizeof v);
        };
        for (size_t i = 0; i < program_.steps.size(); ++i) {
            const Step& step = program_.steps[i];
            Prepared& p = steps_[i];
            if (step.op == Step::Copy) {
                if (!p.copy_groups_x) continue;
                int64_t items = (static_cast<int64_t>(bytes_now(step.src)) + 3) / 4;
                int64_t groups = std::max<int64_t>(1, (items + kWorkgroup - 1) / kWorkgroup);
                slot(p.uniforms[0], items);  // (within the bound's count: it fits i32)
                p.groups[0] = static_cast<uint32_t>(std::min(groups, p.copy_groups_x));
                p.groups[1] = static_cast<uint32_t>((groups + p.copy_groups_x - 1) / p.copy_groups_x);
                continue;
            }
            const Kernel& k = *program_.kernel(step.kernel);
            if (llvmpipe_ && !step.loop_iterations.empty()) {
                int64_t loops = step.loop_iterations[0].eval(shapes_.dims);
                if (loops > kLlvmpipeLoopIterations) throw Error(RVK_ERROR_LIMIT, loop_cap_message(k.name, loops, device_name, at));
            }
            for (size_t a = 0; a < step.scalars.size(); ++a) {
                int64_t v = shapes_.scalars[i][a];
                if (v < INT32_MIN || v > INT32_MAX)  // (WGSL computes sizes in i32: emit.py)
                    throw Error(RVK_ERROR_ARGUMENT, "kernel " + step.kernel + " argument " + std::to_string(step.scalars[a].index) + ": " + std::to_string(v) +
                                                        at + " does not fit the 32-bit integers Vulkan shaders compute sizes in");
                slot(p.uniforms[a], v);
            }
            for (size_t a = 0; a < 3; ++a) {
                int64_t groups = static_cast<int64_t>(shapes_.global[i][a]) / k.local[a];
                if (groups > limits_.groups)
                    throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + ": " + std::to_string(groups) + " workgroups along " + axes[a] + at + " > " + device_name +
                                                     "'s limit " + std::to_string(limits_.groups) + " (maxComputeWorkgroupsPerDimension)");
                p.groups[a] = static_cast<uint32_t>(groups);
            }
        }
        sizes_changed_ = true;  // (the next wait does not trust the recent ones: map_all)
        if (uniforms_) {
            w_.QueueWriteBuffer(h_.queue, uniforms_, 0, uniform_staging_.data(), uniform_staging_.size());
            check_errors("writing the kernels' integer arguments");
        }
        write_grids();
    }

private:
    struct Memory {
        WGPUBuffer buffer = nullptr;
        WGPUTexture texture = nullptr;
        uint64_t size = 0;  // a buffer's bytes
    };
    struct Pipeline {
        WGPUComputePipeline pipeline;
        WGPUBindGroupLayout layout;
    };
    struct Prepared {
        std::string name;
        WGPUComputePipeline pipeline;
        WGPUBindGroup group;
        uint32_t groups[3];
        std::vector<uint64_t> uniforms;  // its integer arguments' byte offsets in uniforms_ (Step::scalars order; a run-count copy's count)
        int64_t copy_groups_x = 0;       // a run-count copy: the row of workgroups its shader indexes with (the bound's)
        int64_t grid = -1;               // a grid that depends on the dims: its counts' byte offset in grids_ (an indirect dispatch)
        uint64_t block_bytes = kUniformBytes;  // the bytes its uniform binding reads (a launch's block of integers, a copy's count)
    };
    struct Readback {  // an output's mappable copy
        int tid;
        WGPUBuffer buffer = nullptr;  // NULL for a tensor of no elements
        uint64_t size = 0;
        uint32_t row = 0, padded_row = 0, rows = 0;  // a texture's rows (bytes, bytes with the 256-byte alignment, rows of all layers)
    };

    Errors errors_;  // (declared before h_: the callbacks may fire until the device is released)
    std::mutex handles_lock_;  // h_'s shader and pipeline lists, while make_kernel_pipelines' threads fill them
    using MapResults = std::vector<std::pair<int, std::string>>;  // per buffer of a map_all: 1 mapped, -1 failed (message), 0 pending
    std::vector<std::shared_ptr<MapResults>> abandoned_maps_;  // (the same: results of maps an error left pending)
    const Wgpu& w_;
    Handles h_;
    int shader_checks_;
    // A command buffer per this many steps, each submitted as soon as it is recorded, so the GPU
    // works while the host records the rest (0: one per run; $RVK_SUBMIT_EVERY overrides it). On the
    // H100, native Vulkan, vulkan/opencl wall: mobilenet_v2 1.41-1.56 with one submission, 1.38-1.43
    // every 8 steps, 1.33-1.35 every 16, 1.39-1.45 every 32; resnet18 1.11-1.16 whatever the value.
    // (The Python session submits every 32: its recording costs more host time per step.)
    size_t submit_every_ = static_cast<size_t>(number_from_env("RVK_SUBMIT_EVERY", 16));
    // An unprofiled run records the next run's command buffer after submitting its own, so its
    // host recording overlaps the GPU's work instead of preceding it ($RVK_RECORD_AHEAD=0: off).
    // WebGPU command buffers are single-use, so each run records one for its successor; the
    // bindings never change, and the next run's input writes are queued before its submission.
    bool record_ahead_ = flag_from_env("RVK_RECORD_AHEAD", true);
    // How long a run polls for its outputs without blocking before it blocks, in microseconds
    // ($RVK_SPIN_US; 0: block at once). A blocking wait wakes the thread well after the GPU is
    // done: on the H100, 2 ms of polling takes mobilenet_v2 from 0.684 to 0.610 ms and a
    // one-kernel run from 0.171 to 0.125 ms. The cost is a busy CPU core for up to that long per
    // run: where the shortest of the recent waits was longer, a run sleeps first, until shortly
    // before it should be done.
    // Default 2000, and 0 on a CPU adapter (polling would take a core from its "GPU").
    long spin_us_ = 0;
    // How many threads make the kernels' pipelines at load ($RVK_PIPELINE_THREADS, 1 by default:
    // the loading thread alone). Not measured to help yet: the 2-core machine this was written on
    // gives a process about 0.65 of a core however many threads it runs (two busy processes: 0.68
    // cores together), so 2 threads made no difference there; a GPU host's cores are what it is for.
    size_t pipeline_threads_ = static_cast<size_t>(std::max(1L, number_from_env("RVK_PIPELINE_THREADS", 1)));
    static constexpr size_t kWaitsKept = 8;
    std::vector<double> waits_s_;  // the last unprofiled runs' waits for their outputs, oldest first
    bool sizes_changed_ = false;   // the run's sizes changed since the last wait
    std::vector<WGPUCommandBuffer> ahead_;
    Limits limits_{};
    bool llvmpipe_ = false;  // steps' run-time loop counts checked at each run's sizes (Step::loop_iterations)
    bool timestamps_ = false;
    std::vector<Memory> memory_;     // per tensor
    std::vector<int64_t> offsets_;   // per tensor: its byte offset in its buffer
    std::map<std::string, Pipeline> pipelines_;  // by kernel name, (kernel, writable positions) or copy source
    std::vector<Prepared> steps_;
    std::vector<Readback> readbacks_;
    // The launches' integer arguments (run-time sizes) as uniforms: one buffer, a slot aligned to
    // kUniformStride (WebGPU's default minUniformBufferOffsetAlignment, which the device is
    // requested with) per distinct block of arguments, each an i32 word, and per run-count copy (its
    // count as i32 in the slot's first 4 of kUniformBytes). Written by shapes_changed().
    static constexpr uint64_t kUniformStride = 256, kUniformBytes = 16;
    WGPUBuffer uniforms_ = nullptr;
    std::vector<uint8_t> uniform_staging_;
    // The workgroup counts of the steps whose grids depend on the dims (three u32 each, read by
    // indirect dispatches), written by shapes_changed().
    WGPUBuffer grids_ = nullptr;
    std::vector<uint8_t> grid_staging_;
    WGPUBuffer query_buffer_ = nullptr, query_readback_ = nullptr;
    std::vector<uint8_t> staging_;
    std::vector<uint8_t> read_scratch_;  // a padded texture's rows gathered for read_mapped
    std::vector<uint8_t> constant_scratch_;  // a constant converted for upload (snorm8 bytes as float32 texels)

    static bool flag_from_env(const char* name, bool fallback) {
        const char* v = std::getenv(name);
        if (!v || !*v) return fallback;
        return std::strcmp(v, "0") != 0;
    }

    static long number_from_env(const char* name, long fallback) {
        const char* v = std::getenv(name);
        if (!v || !*v) return fallback;
        char* end = nullptr;
        long n = std::strtol(v, &end, 10);
        return end && *end == '\0' && n >= 0 ? n : fallback;
    }


    // Records a run's steps, which are the same at every size (a grid that depends on the dims
    // is read from grids_). `submit`: each part is submitted as soon as it is recorded, in parts
    // of `submit_every_` steps; else the parts are kept in `ahead_` for the next execute().
    void record_steps(bool stamped, bool submit) {
        WGPUCommandEncoder encoder = w_.DeviceCreateCommandEncoder(h_.device, nullptr);
        WGPUComputePassEncoder pass = nullptr;
        auto end_pass = [&] {
            if (!pass) return;
            w_.ComputePassEncoderEnd(pass);
            w_.ComputePassEncoderRelease(pass);
            pass = nullptr;
        };
        auto finish = [&] {
            end_pass();
            WGPUCommandBuffer part = w_.CommandEncoderFinish(encoder, nullptr);
            w_.CommandEncoderRelease(encoder);
            encoder = nullptr;
            if (submit) {
                w_.QueueSubmit(h_.queue, 1, &part);
                w_.CommandBufferRelease(part);
            } else {
                ahead_.push_back(part);
            }
        };
        for (size_t i = 0; i < steps_.size(); ++i) {
            const Prepared& s = steps_[i];
            if (submit && submit_every_ && i && i % submit_every_ == 0) {  // the GPU starts while the rest is recorded
                finish();
                encoder = w_.DeviceCreateCommandEncoder(h_.device, nullptr);
            }
            if (stamped) {
                WGPUPassTimestampWrites stamps = WGPU_PASS_TIMESTAMP_WRITES_INIT;
                stamps.querySet = h_.queries;
                stamps.beginningOfPassWriteIndex = static_cast<uint32_t>(2 * i);
                stamps.endOfPassWriteIndex = static_cast<uint32_t>(2 * i + 1);
                WGPUComputePassDescriptor desc = WGPU_COMPUTE_PASS_DESCRIPTOR_INIT;
                desc.timestampWrites = &stamps;
                pass = w_.CommandEncoderBeginComputePass(encoder, &desc);
            } else if (!pass) {
                pass = w_.CommandEncoderBeginComputePass(encoder, nullptr);
            }
            w_.ComputePassEncoderSetPipeline(pass, s.pipeline);  // WebGPU orders each dispatch's accesses after the last's
            w_.ComputePassEncoderSetBindGroup(pass, 0, s.group, 0, nullptr);
            if (s.grid >= 0)
                w_.ComputePassEncoderDispatchWorkgroupsIndirect(pass, grids_, static_cast<uint64_t>(s.grid));
            else
                w_.ComputePassEncoderDispatchWorkgroups(pass, s.groups[0], s.groups[1], s.groups[2]);
            if (stamped) end_pass();
        }
        finish();
        check_errors(submit ? "running the program" : "recording the next run");
    }

    // Records and submits what follows a run's steps and changes with each run: the states' new
    // rows, the outputs' copies at the run's sizes and the timestamps' resolution when `stamped`.
    void record_tail(bool stamped) {
        WGPUCommandEncoder encoder = w_.DeviceCreateCommandEncoder(h_.device, nullptr);
        for (const StateCopy& c : state_copies_) {  // the states' new rows, after the steps
            const Memory& src = memory_[static_cast<size_t>(c.src)];
            const Memory& dst = memory_[static_cast<size_t>(c.dst)];
            if (c.bytes)
                w_.CommandEncoderCopyBufferToBuffer(encoder, src.buffer, static_cast<uint64_t>(offsets_[static_cast<size_t>(c.src)]), dst.buffer,
                                                    static_cast<uint64_t>(offsets_[static_cast<size_t>(c.dst)] + c.dst_offset), static_cast<uint64_t>(c.bytes));
        }
        for (const Readback& r : readbacks_) copy_out(encoder, r);
        if (stamped) {
            uint32_t n = static_cast<uint32_t>(2 * steps_.size());
            w_.CommandEncoderResolveQuerySet(encoder, h_.queries, 0, n, query_buffer_, 0);
            w_.CommandEncoderCopyBufferToBuffer(encoder, query_buffer_, 0, query_readback_, 0, 8ull * n);
        }
        WGPUCommandBuffer tail = w_.CommandEncoderFinish(encoder, nullptr);
        w_.CommandEncoderRelease(encoder);
        w_.QueueSubmit(h_.queue, 1, &tail);
        w_.CommandBufferRelease(tail);
    }

    // The workgroup counts of the steps dispatched indirectly (Prepared::grid), into grids_.
    // Every count is within the device's limit: shapes_changed() and copy_grid() check them, so
    // the indirect dispatches need no validation on the device (instance()).
    void write_grids() {
        if (!grids_) return;
        for (const Prepared& p : steps_)
            if (p.grid >= 0) std::memcpy(grid_staging_.data() + p.grid, p.groups, sizeof p.groups);
        w_.QueueWriteBuffer(h_.queue, grids_, 0, grid_staging_.data(), grid_staging_.size());
        check_errors("writing the launches' workgroup counts");
    }

    void drop_ahead() {
        for (WGPUCommandBuffer b : ahead_) w_.CommandBufferRelease(b);
        ahead_.clear();
    }

    void check_errors(const std::string& what, rvk_status status = RVK_ERROR_RUNTIME) {
        std::string message = errors_.take();
        if (!message.empty()) throw Error(status, what + ": " + message);
    }

    static void on_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message, void* request, void*) {
        auto* r = static_cast<std::pair<WGPUDevice, std::string>*>(request);
        if (status == WGPURequestDeviceStatus_Success)
            r->first = device;
        else
            r->second = text(message).empty() ? "status " + std::to_string(static_cast<int>(status)) : text(message);
    }

    void request_device(const Adapter& adapter, const WGPULimits& a) {
        std::vector<WGPUFeatureName> features;
        if (timestamps_) features.push_back(WGPUFeatureName_TimestampQuery);
        bool half = artifact_->source.find("enable f16;") != std::string::npos;
        for (const Tensor& t : program_.tensors) half = half || t.dtype == DType::F16;
        if (half) features.push_back(WGPUFeatureName_ShaderF16);
        WGPULimits limits = WGPU_LIMITS_INIT;  // session.LIMIT_KEYS: the adapter's own
        limits.maxTextureDimension2D = a.maxTextureDimension2D;
        limits.maxTextureArrayLayers = a.maxTextureArrayLayers;
        limits.maxComputeInvocationsPerWorkgroup = a.maxComputeInvocationsPerWorkgroup;
        limits.maxComputeWorkgroupSizeX = a.maxComputeWorkgroupSizeX;
        limits.maxComputeWorkgroupSizeY = a.maxComputeWorkgroupSizeY;
        limits.maxComputeWorkgroupSizeZ = a.maxComputeWorkgroupSizeZ;
        limits.maxComputeWorkgroupsPerDimension = a.maxComputeWorkgroupsPerDimension;
        limits.maxComputeWorkgroupStorageSize = a.maxComputeWorkgroupStorageSize;
        limits.maxStorageBuffersPerShaderStage = a.maxStorageBuffersPerShaderStage;
        limits.maxUniformBuffersPerShaderStage = a.maxUniformBuffersPerShaderStage;
        limits.maxStorageTexturesPerShaderStage = a.maxStorageTexturesPerShaderStage;
        limits.maxSampledTexturesPerShaderStage = a.maxSampledTexturesPerShaderStage;
        limits.maxStorageBufferBindingSize = a.maxStorageBufferBindingSize;
        limits.maxBufferSize = a.maxBufferSize;
        WGPUDeviceDescriptor desc = WGPU_DEVICE_DESCRIPTOR_INIT;
        desc.requiredFeatureCount = features.size();
        desc.requiredFeatures = features.data();
        desc.requiredLimits = &limits;
        desc.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
        desc.deviceLostCallbackInfo.callback = &Errors::on_lost;
        desc.deviceLostCallbackInfo.userdata1 = &errors_;
        desc.uncapturedErrorCallbackInfo.callback = &Errors::on_error;
        desc.uncapturedErrorCallbackInfo.userdata1 = &errors_;
        std::pair<WGPUDevice, std::string> request{nullptr, ""};
        WGPURequestDeviceCallbackInfo callback = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
        callback.mode = WGPUCallbackMode_AllowSpontaneous;
        callback.callback = &VulkanSession::on_device;
        callback.userdata1 = &request;
        w_.AdapterRequestDevice(adapter.adapter, &desc, callback);
        for (int i = 0; i < 100 && !request.first && request.second.empty(); ++i) w_.InstanceProcessEvents(instance().instance);
        if (!request.first)
            throw Error(RVK_ERROR_DEVICE, "wgpu could not create a device on " + describe(adapter) + ": " + (request.second.empty() ? "no answer" : request.second));
        h_.device = request.first;
        h_.queue = w_.DeviceGetQueue(h_.device);
    }

    // ----------------------------------------------------------------------------- memory
    WGPUBuffer buffer(uint64_t size, WGPUBufferUsage usage, const std::string& what) {
        WGPUBufferDescriptor desc = WGPU_BUFFER_DESCRIPTOR_INIT;
        desc.size = size;
        desc.usage = usage;
        WGPUBuffer b = w_.DeviceCreateBuffer(h_.device, &desc);
        ++device_objects;
        if (b) h_.buffers.push_back(b);
        check_errors("allocating " + what);
        if (!b) throw Error(RVK_ERROR_RUNTIME, "allocating " + what + " failed");
        return b;
    }

    // session._allocate: a 2D-array texture of the texel format, or a storage buffer
    Memory allocate(const Allocation& a, const std::string& what) {
        Memory m;
        if (a.is_image) {
            WGPUTextureDescriptor desc = WGPU_TEXTURE_DESCRIPTOR_INIT;
            desc.usage = WGPUTextureUsage_TextureBinding | WGPUTextureUsage_CopyDst | WGPUTextureUsage_CopySrc;
            if (a.dtype != "snorm8") desc.usage |= WGPUTextureUsage_StorageBinding;  // (snorm8: constants, only read)
            desc.dimension = WGPUTextureDimension_2D;
            desc.size = {static_cast<uint32_t>(a.image[0]), static_cast<uint32_t>(a.image[1]), static_cast<uint32_t>(a.image[2])};
            desc.format = texture_format(a.dtype);
            m.texture = w_.DeviceCreateTexture(h_.device, &desc);
            ++device_objects;
            if (m.texture) h_.textures.push_back(m.texture);
            check_errors("allocating " + what);
            if (!m.texture) throw Error(RVK_ERROR_RUNTIME, "allocating " + what + " failed");
            return m;
        }
        m.size = static_cast<uint64_t>(std::max<int64_t>(4, words(a.bytes)));
        m.buffer = buffer(m.size, WGPUBufferUsage_Storage | WGPUBufferUsage_CopyDst | WGPUBufferUsage_CopySrc, what);
        return m;
    }

    // session._allocate_storage
    void allocate_storage() {
        Placement placement = device_placement(program_, limits_.alignment, limits_.buffer_size);
        device_bytes = placement.device_bytes;
        std::vector<Memory> objects;
        for (size_t i = 0; i < placement.allocations.size(); ++i)
            objects.push_back(placement.allocations[i] ? allocate(*placement.allocations[i], "allocation " + std::to_string(i)) : Memory{});
        for (size_t i = 0; i < program_.tensors.size(); ++i) {
            const Tensor& t = program_.tensors[i];
            const std::optional<Place>& place = placement.places[i];
            if (!place) {
                Allocation own;
                own.bytes = t.bytes;
                memory_.push_back(allocate(own, t.name));
                offsets_.push_back(0);
            } else {
                memory_.push_back(objects[static_cast<size_t>(place->allocation)]);
                offsets_.push_back(place->offset);
            }
        }
    }

    // session._write: `data` holds the tensor in its dtype (converted to its texel dtype); a tensor
    // of run-time shape: the run's bytes
    void write(int tid, const void* data, bool as_texels = false) {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        int64_t nbytes = bytes_now(tid);
        if (nbytes == 0) return;  // a tensor of no elements: nothing to write (wgpu refuses empty writes)
        const Memory& m = memory_[static_cast<size_t>(tid)];
        size_t elements = static_cast<size_t>(t.elements());
        if (t.is_image) {
            size_t itemsize = texel_itemsize(t.texel_dtype());
            size_t dense = static_cast<size_t>(t.image[0] * t.image[1] * t.image[2] * 4) * itemsize;
            staging_.assign(std::max(dense, elements * itemsize), 0);
            if (as_texels)  // (`data` holds the texels: a constant's snorm8 bytes)
                std::memcpy(staging_.data(), data, elements * itemsize);
            else
                convert(t.dtype, data, dtype_from_name(t.texel_dtype()), staging_.data(), elements);
            WGPUTexelCopyTextureInfo dst = WGPU_TEXEL_COPY_TEXTURE_INFO_INIT;
            dst.texture = m.texture;
            dst.origin = {static_cast<uint32_t>(t.origin[0]), static_cast<uint32_t>(t.origin[1]), 0};
            WGPUTexelCopyBufferLayout layout = WGPU_TEXEL_COPY_BUFFER_LAYOUT_INIT;
            layout.bytesPerRow = static_cast<uint32_t>(4 * itemsize * static_cast<size_t>(t.image[0]));
            layout.rowsPerImage = static_cast<uint32_t>(t.image[1]);
            WGPUExtent3D size = {static_cast<uint32_t>(t.image[0]), static_cast<uint32_t>(t.image[1]), static_cast<uint32_t>(t.image[2])};
            w_.QueueWriteTexture(h_.queue, &dst, staging_.data(), dense, &layout, &size);
        } else {
            size_t n = static_cast<size_t>(nbytes);
            uint64_t offset = static_cast<uint64_t>(offsets_[static_cast<size_t>(tid)]);
            if (n % 4 == 0) {  // (wgpu copies it into its own staging memory)
                w_.QueueWriteBuffer(h_.queue, m.buffer, offset, data, n);
            } else {  // padded to whole words, as WebGPU requires
                staging_.assign(static_cast<size_t>(words(nbytes)), 0);
                std::memcpy(staging_.data(), data, n);
                w_.QueueWriteBuffer(h_.queue, m.buffer, offset, staging_.data(), staging_.size());
            }
        }
        check_errors("writing " + t.name);
    }

    void upload_constants() {
        for (const Tensor& t : program_.tensors) {
            if (t.kind != "constant") continue;
            const Constant& c = artifact_->constant_table.at("t" + std::to_string(t.id));
            bool as_texels = false;
            const void* data = constant_upload(t, c, artifact_->constants.data() + c.offset, constant_scratch_, &as_texels);
            write(t.id, data, as_texels);
        }
    }

    // an output's mappable buffer (readback_.buffer NULL for a tensor of no elements)
    // the rows and size of tensor `tid`'s mappable copy (no buffer yet)
    Readback readback_of(int tid) const {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        Readback r;
        r.tid = tid;
        if (t.is_image) {
            r.row = static_cast<uint32_t>(4 * texel_itemsize(t.texel_dtype()) * static_cast<size_t>(t.image[0]));
            r.padded_row = (r.row + 255) / 256 * 256;  // WebGPU's bytesPerRow alignment
            r.rows = static_cast<uint32_t>(t.image[1] * t.image[2]);
            r.size = static_cast<uint64_t>(r.padded_row) * r.rows;
        } else {
            r.size = static_cast<uint64_t>(words(t.bytes));
        }
        return r;
    }

    void prepare_readback() {
        for (int tid : program_.outputs) {
            const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
            Readback r = readback_of(tid);
            if (t.bytes) r.buffer = buffer(r.size, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "the readback of " + t.name);
            readbacks_.push_back(r);
        }
        if (timestamps_) {
            size_t n = 2 * program_.steps.size();
            WGPUQuerySetDescriptor desc = WGPU_QUERY_SET_DESCRIPTOR_INIT;
            desc.type = WGPUQueryType_Timestamp;
            desc.count = static_cast<uint32_t>(n);
            h_.queries = w_.DeviceCreateQuerySet(h_.device, &desc);
            check_errors("creating the timestamp queries");
            query_buffer_ = buffer(8 * n, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc, "the timestamps");
            query_readback_ = buffer(8 * n, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "the timestamp readback");
        }
    }

    // Each readback buffer mapped whole once at load and its pages read: a run's map then finds
    // them in the process (a first run at a larger size than any before faulted the new pages
    // in, milliseconds for PP-OCR rec's 4 MB output at a line 1280 wide on the H200).
    void touch_readbacks() {
        std::vector<std::pair<WGPUBuffer, uint64_t>> maps;
        for (const Readback& r : readbacks_)
            if (r.buffer) maps.push_back({r.buffer, r.size});
        if (maps.empty()) return;
        map_all(maps, false);
        unsigned sum = 0;
        for (const auto& m : maps) {
            const volatile uint8_t* p = static_cast<const uint8_t*>(w_.BufferGetConstMappedRange(m.first, 0, static_cast<size_t>(m.second)));
            for (uint64_t at = 0; p && at < m.second; at += 4096) sum += p[at];
            w_.BufferUnmap(m.first);
        }
        (void)sum;
    }

    void copy_out(WGPUCommandEncoder encoder, const Readback& r) {
        if (!r.buffer) return;
        const Tensor& t = program_.tensors[static_cast<size_t>(r.tid)];
        const Memory& m = memory_[static_cast<size_t>(r.tid)];
        if (t.is_image) {
            WGPUTexelCopyTextureInfo src = WGPU_TEXEL_COPY_TEXTURE_INFO_INIT;
            src.texture = m.texture;
            src.origin = {static_cast<uint32_t>(t.origin[0]), static_cast<uint32_t>(t.origin[1]), 0};
            WGPUTexelCopyBufferInfo dst = WGPU_TEXEL_COPY_BUFFER_INFO_INIT;
            dst.buffer = r.buffer;
            dst.layout.bytesPerRow = r.padded_row;
            dst.layout.rowsPerImage = static_cast<uint32_t>(t.image[1]);
            WGPUExtent3D size = {static_cast<uint32_t>(t.image[0]), static_cast<uint32_t>(t.image[1]), static_cast<uint32_t>(t.image[2])};
            w_.CommandEncoderCopyTextureToBuffer(encoder, &src, &dst, &size);
        } else {
            // (the run's bytes: the readback is the bound's size)
            uint64_t n = static_cast<uint64_t>(words(bytes_now(r.tid)));
            if (n) w_.CommandEncoderCopyBufferToBuffer(encoder, m.buffer, static_cast<uint64_t>(offsets_[static_cast<size_t>(r.tid)]), r.buffer, 0, n);
        }
    }

    static void on_mapped(WGPUMapAsyncStatus status, WGPUStringView message, void* result, void*) {
        auto* r = static_cast<std::pair<int, std::string>*>(result);
        r->first = status == WGPUMapAsyncStatus_Success ? 1 : -1;
        if (status != WGPUMapAsyncStatus_Success) r->second = text(message);
    }

    // Seconds a wait sleeps before it polls,
    // given the shortest of the last kWaitsKept waits: that less a margin of a tenth of it, at least
    // 0.2 ms and at most the polling budget; 0 without a last wait or a budget, or where the budget
    // covers the whole wait. (The shortest: one slow run does not make the next ones oversleep.)
    // A run whose sizes changed since the last wait does not sleep: the recent waits were of other
    // sizes (PP-OCR's recognizer on a line 100 wide after lines of 1280 slept through 1.9x its own
    // steady run on the H200, 1.1x now), so it polls for up to a quarter more than the shortest of
    // them (at most 50 ms) before it blocks; a decoder's every token is such a run.
    static double sleep_before_polling(double wait_s, double spin_s) {
        if (wait_s < 0 || spin_s <= 0 || wait_s <= spin_s) return 0.0;
        return wait_s - std::min(spin_s, std::max(0.1 * wait_s, 2e-4));
    }
    double shortest_wait() const {
        return waits_s_.empty() ? -1.0 : *std::min_element(waits_s_.begin(), waits_s_.end());
    }

    // `adaptive`: an unprofiled run's wait, which may sleep first and is kept among the recent waits.
    void map_all(const std::vector<std::pair<WGPUBuffer, uint64_t>>& buffers, bool adaptive) {
        auto held = std::make_shared<MapResults>(buffers.size(), std::pair<int, std::string>{0, ""});
        MapResults& results = *held;
        for (size_t i = 0; i < buffers.size(); ++i) {
            WGPUBufferMapCallbackInfo callback = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
            callback.mode = WGPUCallbackMode_AllowSpontaneous;
            callback.callback = &VulkanSession::on_mapped;
            callback.userdata1 = &results[i];
            w_.BufferMapAsync(buffers[i].first, WGPUMapMode_Read, 0, static_cast<size_t>(buffers[i].second), callback);
        }
        auto pending = [&] { return std::any_of(results.begin(), results.end(), [](const auto& r) { return r.first == 0; }); };
        // Poll without blocking for up to spin_us_ (the driver's blocking wait wakes the thread
        // tens of microseconds after the GPU is done), then block; where the shortest recent wait
        // was longer than that, sleep first until shortly before the GPU should be done.
        using clock = std::chrono::steady_clock;
        auto start = clock::now();
        bool changed = adaptive && sizes_changed_;
        double sleep = adaptive && !changed ? sleep_before_polling(shortest_wait(), static_cast<double>(spin_us_) * 1e-6) : 0.0;
        if (sleep > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
        double spin_s = static_cast<double>(spin_us_) * 1e-6;
        if (changed && spin_us_ > 0) spin_s = std::max(spin_s, std::min(1.25 * shortest_wait(), 0.05));
        auto spin_end = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(spin_s));
        if (adaptive) sizes_changed_ = false;
        while (spin_us_ > 0 && pending() && errors_.lost.empty() && clock::now() < spin_end) {
            w_.DevicePoll(h_.device, false, nullptr);
            if (pending()) w_.InstanceProcessEvents(instance().instance);
        }
        for (int i = 0; i < 1000 && pending() && errors_.lost.empty(); ++i) {
            w_.DevicePoll(h_.device, true, nullptr);
            if (pending()) w_.InstanceProcessEvents(instance().instance);
        }
        bool failed = !errors_.message.empty() || !errors_.lost.empty() ||
                      std::any_of(results.begin(), results.end(), [](const auto& r) { return r.first != 1; });
        if (failed) {  // every buffer unmapped and pending maps cancelled, so the next run can copy into them
            for (const auto& b : buffers) w_.BufferUnmap(b.first);
            w_.InstanceProcessEvents(instance().instance);
            if (pending()) abandoned_maps_.push_back(held);  // (their callbacks may still come: keep what they write to)
        }
        check_errors("reading the outputs");
        for (const auto& r : results)
            if (r.first != 1)
                throw Error(RVK_ERROR_RUNTIME, r.first == 0 ? "reading the outputs: the device did not finish"
                                                            : "reading the outputs: mapping a readback buffer failed" + (r.second.empty() ? "" : ": " + r.second));
        if (adaptive) {
            if (waits_s_.size() == kWaitsKept) waits_s_.erase(waits_s_.begin());
            waits_s_.push_back(std::chrono::duration<double>(clock::now() - start).count());
        }
    }

    // session._read (of a mapped readback): into `out` in the tensor's dtype, converted from the
    // mapped memory itself (a texture's rows gathered first where they are padded), into `out`
    // resized within its capacity (the bound's: no allocation, no zero fill). It was copied out
    // whole, then zero-filled and converted: PP-OCR's recognizer (a 2.1 MB output at a line 640
    // wide) ran in 2.54-2.75 ms a run on the H200 against 2.94-3.02.
    void read_mapped(const Readback& r, std::vector<uint8_t>& out) {
        if (!r.buffer) return;
        const Tensor& t = program_.tensors[static_cast<size_t>(r.tid)];
        size_t elements = t.shape_expr.empty() ? static_cast<size_t>(t.elements()) : static_cast<size_t>(bytes_now(r.tid)) / dtype_size(t.dtype);
        size_t nbytes = elements * texel_itemsize(t.texel_dtype());
        const uint8_t* src = nullptr;
        size_t have = 0;  // the bytes at src
        if (t.is_image) {
            const uint8_t* p = static_cast<const uint8_t*>(w_.BufferGetConstMappedRange(r.buffer, 0, static_cast<size_t>(r.padded_row) * r.rows));
            have = static_cast<size_t>(r.row) * r.rows;
            if (r.padded_row == r.row) {
                src = p;
            } else {
                read_scratch_.resize(have);
                for (uint32_t row = 0; row < r.rows; ++row)
                    std::memcpy(read_scratch_.data() + static_cast<size_t>(row) * r.row, p + static_cast<size_t>(row) * r.padded_row, r.row);
                src = read_scratch_.data();
            }
        } else {
            have = static_cast<size_t>(words(bytes_now(r.tid)));
            src = have ? static_cast<const uint8_t*>(w_.BufferGetConstMappedRange(r.buffer, 0, have)) : nullptr;
        }
        if (have < nbytes) {  // (fewer bytes than the elements' texels: the rest read as zeros)
            if (src != read_scratch_.data()) read_scratch_.assign(src, src + have);
            read_scratch_.resize(nbytes, 0);
            src = read_scratch_.data();
        }
        out.resize(elements * dtype_size(t.dtype));
        if (elements) convert_texels(t.texel_dtype(), src, t.dtype, out.data(), elements);
        w_.BufferUnmap(r.buffer);
    }

    // ----------------------------------------------------------------------------- pipelines
    static WGPUBindGroupLayoutEntry layout_entry(uint32_t binding, const std::string& kind) {
        WGPUBindGroupLayoutEntry e = WGPU_BIND_GROUP_LAYOUT_ENTRY_INIT;
        e.binding = binding;
        e.visibility = WGPUShaderStage_Compute;
        e.buffer.type = WGPUBufferBindingType_BindingNotUsed;
        e.sampler.type = WGPUSamplerBindingType_BindingNotUsed;
        e.texture.sampleType = WGPUTextureSampleType_BindingNotUsed;
        e.storageTexture.access = WGPUStorageTextureAccess_BindingNotUsed;
        if (kind == "buffer") {
            e.buffer.type = WGPUBufferBindingType_Storage;
        } else if (kind == "buffer_read") {
            e.buffer.type = WGPUBufferBindingType_ReadOnlyStorage;
        } else if (kind == "uniform") {  // a run-count copy's count: vec4<i32>, its value in .x
            e.buffer.type = WGPUBufferBindingType_Uniform;
            e.buffer.minBindingSize = kUniformBytes;
        } else if (kind == "uniforms") {  // a kernel's integer arguments: array<vec4<i32>, M>, a word each
            e.buffer.type = WGPUBufferBindingType_Uniform;
            e.buffer.minBindingSize = 0;  // (M is the step's: wgpu checks the bound block's size at the dispatch)
        } else if (kind == "texture") {
            e.texture.sampleType = WGPUTextureSampleType_UnfilterableFloat;
            e.texture.viewDimension = WGPUTextureViewDimension_2DArray;
            e.texture.multisampled = false;
        } else {  // storage_texture, storage_texture_f16 (kinds checked by the caller)
            e.storageTexture.access = WGPUStorageTextureAccess_WriteOnly;
            e.storageTexture.format = texture_format(kind == "storage_texture_f16" ? "float16" : "float32");
            e.storageTexture.viewDimension = WGPUTextureViewDimension_2DArray;
        }
        return e;
    }

    static bool known_kind(const std::string& kind) {
        return kind == "buffer" || kind == "buffer_read" || kind == "texture" || kind == "storage_texture" || kind == "storage_texture_f16" ||
               kind == "uniform" || kind == "uniforms";
    }

    // session.ShaderError's message
    static std::string shader_error(const std::string& kernel, const std::string& error, const std::string& source) {
        std::string numbered;
        size_t line = 1;
        for (size_t start = 0; start < source.size(); ++line) {
            size_t end = source.find('\n', start);
            char prefix[16];
            std::snprintf(prefix, sizeof prefix, "%4zu | ", line);
            numbered += (line > 1 ? "\n" : "") + std::string(prefix) + source.substr(start, end == std::string::npos ? std::string::npos : end - start);
            if (end == std::string::npos) break;
            start = end + 1;
        }
        return "shader for kernel " + kernel + " was rejected by the device:\n" + error + "\n--- shader ---\n" + numbered;
    }

    // session._pipeline (shader_modules.create_shader_module: wgpu's checks unless the session
    // asked for fewer)
    Pipeline pipeline(const std::string& name, const std::string& source, const std::vector<std::string>& bindings) {
        for (size_t i = 0; i < bindings.size(); ++i)
            if (!known_kind(bindings[i]))
                throw Error(RVK_ERROR_BUILD, shader_error(name, "unknown binding kind " + py_repr(bindings[i]), source));
        WGPUShaderSourceWGSL wgsl = WGPU_SHADER_SOURCE_WGSL_INIT;
        wgsl.chain.sType = WGPUSType_ShaderSourceWGSL;
        wgsl.code = view(source);
        WGPUShaderModuleDescriptor desc = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
        desc.nextInChain = &wgsl.chain;
        desc.label = view(name);
        std::string error;
        Errors::Capture capture(error);  // (this call's errors, whichever thread makes it)
        WGPUShaderModule module;
        if (shader_checks_ == 0) {
            module = w_.DeviceCreateShaderModule(h_.device, &desc);
        } else {
            if (!w_.DeviceCreateShaderModuleTrusted)
                throw Error(RVK_ERROR_UNSUPPORTED, "shader checks other than 'bounds': this wgpu-native (" + w_.path + ") has no wgpuDeviceCreateShaderModuleTrusted");
            module = w_.DeviceCreateShaderModuleTrusted(h_.device, &desc, shader_checks_ == RVK_SESSION_SHADER_CHECKS_LOOPS
                                                                               ? WGPUShaderRuntimeChecks_ForceLoopBounding
                                                                               : WGPUShaderRuntimeChecks_None);
        }
        std::vector<WGPUBindGroupLayoutEntry> entries;
        for (size_t i = 0; i < bindings.size(); ++i) entries.push_back(layout_entry(static_cast<uint32_t>(i), bindings[i]));
        WGPUBindGroupLayoutDescriptor layout_desc = WGPU_BIND_GROUP_LAYOUT_DESCRIPTOR_INIT;
        layout_desc.entryCount = entries.size();
        layout_desc.entries = entries.data();
        WGPUBindGroupLayout layout = w_.DeviceCreateBindGroupLayout(h_.device, &layout_desc);
        WGPUPipelineLayoutDescriptor pipeline_layout_desc = WGPU_PIPELINE_LAYOUT_DESCRIPTOR_INIT;
        pipeline_layout_desc.bindGroupLayoutCount = 1;
        pipeline_layout_desc.bindGroupLayouts = &layout;
        WGPUPipelineLayout pipeline_layout = w_.DeviceCreatePipelineLayout(h_.device, &pipeline_layout_desc);
        WGPUComputePipelineDescriptor pipeline_desc = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
        pipeline_desc.layout = pipeline_layout;
        pipeline_desc.compute.module = module;
        pipeline_desc.compute.entryPoint = view("main");
        WGPUComputePipeline p = w_.DeviceCreateComputePipeline(h_.device, &pipeline_desc);
        {
            std::lock_guard<std::mutex> hold(handles_lock_);
            if (module) h_.modules.push_back(module);
            if (layout) h_.layouts.push_back(layout);
            if (pipeline_layout) h_.pipeline_layouts.push_back(pipeline_layout);
            if (p) h_.pipelines.push_back(p);
        }
        if (!error.empty() || !module || !layout || !pipeline_layout || !p)
            throw Error(RVK_ERROR_BUILD, shader_error(name, error.empty() ? "wgpu returned no object" : error, source));
        return {p, layout};
    }

    const Pipeline& kernel_pipeline(const Kernel& k, const std::vector<size_t>& writable) {
        std::string key = k.name;
        for (size_t i : writable) key += "|" + std::to_string(i);
        auto it = pipelines_.find(key);
        if (it != pipelines_.end()) return it->second;
        std::string source = artifact_->source.substr(k.shader_begin, k.shader_end - k.shader_begin);
        std::vector<std::string> bindings = k.bindings;
        writable_reads(source, bindings, writable);
        return pipelines_[key] = pipeline(k.name, source, bindings);
    }

    // Every kernel's pipeline (session.pipelines), made by pipeline_threads_ threads at once.
    // wgpu-native translates each WGSL shader (naga) and the driver compiles it inside these
    // creation calls, one shader after another on one thread: most of a load. wgpu-native lets
    // threads make them side by side (no lock held across a call: a second thread never waited on
    // one under strace). The first shader that fails, in the kernels' order, is the error a serial
    // load reports.
    void make_kernel_pipelines() {
        struct Job {
            const Kernel* kernel;
            Pipeline made;
            std::exception_ptr error;
        };
        std::vector<Job> jobs;
        // kernels whose shader (its span of the source) and bindings are the same share one pipeline
        auto code_of = [](const Kernel& k) { return std::make_tuple(k.shader_begin, k.shader_end, k.bindings); };
        std::map<std::tuple<size_t, size_t, std::vector<std::string>>, size_t> job_of;
        std::vector<std::pair<const Kernel*, size_t>> sharing;
        for (const Kernel& k : program_.kernels) {
            if (pipelines_.count(k.name)) continue;
            auto [at, fresh] = job_of.emplace(code_of(k), jobs.size());
            if (fresh) jobs.push_back({&k, {}, nullptr});
            sharing.emplace_back(&k, at->second);
        }
        std::atomic<size_t> next{0}, failed{jobs.size()};  // (no job after a failed one is started)
        auto work = [&] {
            for (size_t i; (i = next++) < jobs.size() && i < failed;) {
                const Kernel& k = *jobs[i].kernel;
                try {
                    jobs[i].made = pipeline(k.name, artifact_->source.substr(k.shader_begin, k.shader_end - k.shader_begin), k.bindings);
                } catch (...) {
                    jobs[i].error = std::current_exception();
                    for (size_t f = failed; i < f && !failed.compare_exchange_weak(f, i);) {
                    }
                }
            }
        };
        std::vector<std::thread> helpers;
        for (size_t t = 1; t < std::min(pipeline_threads_, jobs.size()); ++t) {
            try {
                helpers.emplace_back(work);
            } catch (const std::system_error&) {  // (no more threads: the ones there are do the work)
                break;
            }
        }
        work();
        for (std::thread& t : helpers) t.join();
        for (const Job& j : jobs)
            if (j.error) std::rethrow_exception(j.error);
        for (const auto& [k, job] : sharing) pipelines_[k->name] = jobs[job].made;
    }

    // session._shared_buffers: positions of `args` bound to a buffer another argument is bound to too
    std::vector<size_t> shared_buffers(const std::vector<int>& args) const {
        std::vector<size_t> out;
        for (size_t i = 0; i < args.size(); ++i) {
            WGPUBuffer b = memory_[static_cast<size_t>(args[i])].buffer;
            if (program_.tensors[static_cast<size_t>(args[i])].is_image || !b) continue;
            size_t n = 0;
            for (int other : args) n += !program_.tensors[static_cast<size_t>(other)].is_image && memory_[static_cast<size_t>(other)].buffer == b;
            if (n > 1) out.push_back(i);
        }
        return out;
    }

    static std::string tensor_kind(const Tensor& t) { return t.is_image ? "texture" : "buffer"; }

    // Whether copy step `step` is a buffer-to-buffer copy of a tensor of run-time shape (its count a uniform)
    bool run_count_copy(const Step& step) const {
        const Tensor& s = program_.tensors[static_cast<size_t>(step.src)];
        const Tensor& d = program_.tensors[static_cast<size_t>(step.dst)];
        return !s.is_image && !d.is_image && (!s.shape_expr.empty() || !d.shape_expr.empty());
    }

    // A launch's integer arguments in the order of their parameters (the words of the kernel's
    // uniform block, emit.py "uniforms"): step.scalars' positions, sorted by parameter index
    static std::vector<size_t> block_order(const Step& step) {
        std::vector<size_t> order(step.scalars.size());
        for (size_t a = 0; a < order.size(); ++a) order[a] = a;
        std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return step.scalars[x].index < step.scalars[y].index; });
        return order;
    }

    // The bytes of a block of `count` integer words (array<vec4<i32>, M>: 16 bytes a vec4)
    static uint64_t block_bytes(size_t count) { return 16 * ((count + 3) / 4); }

    // The uniform arena: a slot per distinct argument block of the launches (the same expressions
    // of the dims in the same order: a decoder's hundreds of launches pass a few such lists), each
    // kUniformStride-aligned, first, then one per run-count copy, written by shapes_changed().
    // Returns each block's slot offset (by its expressions) and the first copy's.
    std::pair<std::map<std::string, uint64_t>, uint64_t> allocate_uniforms() {
        std::map<std::string, uint64_t> blocks;
        uint64_t next = 0, copies = 0;
        for (const Step& step : program_.steps) {
            if (step.op == Step::Launch && !step.scalars.empty()) {
                auto [at, fresh] = blocks.emplace(block_key(step), next);
                if (fresh) next += (block_bytes(step.scalars.size()) + kUniformStride - 1) / kUniformStride * kUniformStride;
            } else if (step.op == Step::Copy && run_count_copy(step)) {
                ++copies;
            }
        }
        uint64_t bytes = next + copies * kUniformStride;
        if (bytes) {
            uniform_staging_.assign(static_cast<size_t>(bytes), 0);
            uniforms_ = buffer(bytes, WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst, "the kernels' integer arguments");
        }
        return {blocks, next};
    }

    std::string block_key(const Step& step) const {
        std::string key;
        for (size_t a : block_order(step)) key += step.scalars[a].value.repr(program_.dims) + ";";
        return key;
    }

    // session._prepare: a step's pipeline, bind group (made once here) and workgroup counts (a
    // step whose grid depends on run-time dims: at the bound until shapes_changed())
    void prepare_steps() {
        make_kernel_pipelines();
        auto [argument_slots, next_uniform] = allocate_uniforms();  // (next_uniform: the next run-count copy's slot)
        int64_t grids = 0;  // grids_'s bytes
        for (size_t index = 0; index < program_.steps.size(); ++index) {
            const Step& step = program_.steps[index];
            Prepared p{};
            std::vector<int> slots;  // per binding: a tensor, or -1 for a uniform (its offset in `offsets`)
            std::vector<uint64_t> offsets;
            std::vector<std::string> kinds;
            if (step.op == Step::Launch) {
                const Kernel& k = *program_.kernel(step.kernel);
                std::string at = "step " + std::to_string(index) + " (" + k.name + ")";
                // the tensors take the kernel's bindings in order; its integers, if it has any, the
                // last one: one uniform block, a word each in the order of their parameters (emit.py)
                bool block = !k.bindings.empty() && k.bindings.back() == "uniforms";
                size_t tensors = k.bindings.size() - (block ? 1 : 0);
                if (step.args.size() != tensors || block == step.scalars.empty())
                    throw Error(RVK_ERROR_ARTIFACT, at + " passes " + std::to_string(step.args.size()) + " tensors and " + std::to_string(step.scalars.size()) +
                                                        " integers; the kernel binds " + std::to_string(tensors) + " tensors and " +
                                                        (block ? "a block of integers" : "no integers"));
                std::vector<int> args(step.args.begin(), step.args.end());  // the tensors and their bindings
                std::vector<size_t> binding_of;
                for (size_t i = 0; i < tensors; ++i) {
                    if (k.bindings[i] == "uniform" || k.bindings[i] == "uniforms")
                        throw Error(RVK_ERROR_ARTIFACT, at + ": binding " + std::to_string(i) + " of the kernel is " + k.bindings[i] +
                                                            ", where its tensors' bindings come first and one block of integers last");
                    slots.push_back(args[i]);
                    offsets.push_back(0);
                    binding_of.push_back(i);
                }
                if (block) {
                    uint64_t slot = argument_slots.at(block_key(step));
                    std::vector<size_t> order = block_order(step);
                    p.uniforms.assign(step.scalars.size(), 0);
                    for (size_t word = 0; word < order.size(); ++word) p.uniforms[order[word]] = slot + 4 * word;
                    slots.push_back(-1);
                    offsets.push_back(slot);
                    p.block_bytes = block_bytes(step.scalars.size());
                }
                std::vector<size_t> writable;
                for (size_t i : shared_buffers(args))
                    if (k.bindings[binding_of[i]] == "buffer_read") writable.push_back(binding_of[i]);
                const Pipeline& pl = kernel_pipeline(k, writable);
                p.pipeline = pl.pipeline;
                p.name = step.kernel;
                for (size_t a = 0; a < 3; ++a) p.groups[a] = static_cast<uint32_t>(k.global[a] / k.local[a]);
                if (!step.global.empty()) p.grid = next_grid(grids);
                kinds = k.bindings;
                bind(p, pl.layout, slots, offsets, kinds);
            } else {
                const Tensor& s = program_.tensors[static_cast<size_t>(step.src)];
                const Tensor& d = program_.tensors[static_cast<size_t>(step.dst)];
                std::string dtype = dtype_name(s.dtype);
                bool run_count = run_count_copy(step);
                auto [gx, gy] = copy_grid(copy_items(s, d, s.bytes, static_cast<int64_t>(dtype_size(s.dtype))), limits_.groups);
                p.name = "copy " + s.name + "->" + d.name;
                slots = {step.src, step.dst};
                offsets = {0, 0};
                std::string texel = d.is_image ? d.texel_dtype() : "";
                std::string source = copy_shader(s, d, s.bytes, dtype, gx, texel, run_count);
                kinds = copy_bindings(s, d, dtype, texel);
                if (run_count) {  // binding 2: the run's word count
                    kinds.push_back("uniform");
                    slots.push_back(-1);
                    offsets.push_back(next_uniform);
                    p.uniforms.push_back(next_uniform);
                    next_uniform += kUniformStride;
                    p.copy_groups_x = gx;
                    p.grid = next_grid(grids);
                }
                writable_reads(source, kinds, shared_buffers({step.src, step.dst}));
                auto it = pipelines_.find(source);  // copies of the same shape share one pipeline
                if (it == pipelines_.end()) it = pipelines_.emplace(source, pipeline(p.name, source, kinds)).first;
                p.pipeline = it->second.pipeline;
                p.groups[0] = static_cast<uint32_t>(gx);
                p.groups[1] = static_cast<uint32_t>(gy);
                p.groups[2] = 1;
                bind(p, it->second.layout, slots, offsets, kinds);
            }
            steps_.push_back(p);
        }
        if (grids) {
            grid_staging_.assign(static_cast<size_t>(grids), 0);
            grids_ = buffer(static_cast<uint64_t>(grids), WGPUBufferUsage_Indirect | WGPUBufferUsage_CopyDst, "the launches' workgroup counts");
            write_grids();
        }
    }

    static int64_t next_grid(int64_t& bytes) {
        int64_t at = bytes;
        bytes += 3 * sizeof(uint32_t);
        return at;
    }

    // the step's bind group: every tensor at its full size (session._resource); binding i is tensor
    // slots[i], or the uniform at uniforms_'s offsets[i] where slots[i] is -1
    void bind(Prepared& p, WGPUBindGroupLayout layout, const std::vector<int>& slots, const std::vector<uint64_t>& offsets,
              const std::vector<std::string>& kinds) {
        std::string described;
        for (size_t i = 0; i < slots.size(); ++i) {
            if (slots[i] < 0) {
                described += std::string(i ? ", " : "") + "the integers (a uniform block)";
                continue;
            }
            const Tensor& t = program_.tensors[static_cast<size_t>(slots[i])];
            described += (i ? ", " : "") + t.name + " (" + dtype_name(t.dtype) + ", " + tensor_kind(t) + ")";
        }
        auto mismatch = [&](const std::string& why) {
            return Error(RVK_ERROR_ARTIFACT, "step " + p.name + ": its tensors [" + described + "] do not match the kernel's bindings: " + why);
        };
        std::vector<WGPUBindGroupEntry> entries;
        for (size_t i = 0; i < slots.size(); ++i) {
            WGPUBindGroupEntry e = WGPU_BIND_GROUP_ENTRY_INIT;
            e.binding = static_cast<uint32_t>(i);
            if (slots[i] < 0) {  // integer arguments: their block of the uniform arena (a copy's count: 16 bytes)
                if ((kinds[i] != "uniform" && kinds[i] != "uniforms") || !uniforms_)
                    throw mismatch("binding " + std::to_string(i) + " is a " + kinds[i] + ", the step passes integers");
                e.buffer = uniforms_;
                e.offset = offsets[i];
                e.size = p.block_bytes;
                entries.push_back(e);
                continue;
            }
            const Tensor& t = program_.tensors[static_cast<size_t>(slots[i])];
            const Memory& m = memory_[static_cast<size_t>(slots[i])];
            bool wants_texture = kinds[i] == "texture" || kinds[i] == "storage_texture" || kinds[i] == "storage_texture_f16";
            if (wants_texture != t.is_image || kinds[i] == "uniform")
                throw mismatch("binding " + std::to_string(i) + " is a " + kinds[i] + ", tensor " + t.name + " a " + tensor_kind(t));
            if (t.is_image) {
                WGPUTextureViewDescriptor desc = WGPU_TEXTURE_VIEW_DESCRIPTOR_INIT;
                desc.dimension = WGPUTextureViewDimension_2DArray;
                WGPUTextureView v = w_.TextureCreateView(m.texture, &desc);
                if (v) h_.views.push_back(v);
                e.textureView = v;
            } else {
                uint64_t offset = static_cast<uint64_t>(offsets_[static_cast<size_t>(slots[i])]);
                if (offset >= m.size) throw mismatch("tensor " + t.name + " lies outside its buffer");
                e.buffer = m.buffer;
                e.offset = offset;
                e.size = std::min<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(4, words(t.bytes))), m.size - offset);
            }
            entries.push_back(e);
        }
        std::string error = errors_.take();
        if (!error.empty()) throw mismatch(error);
        WGPUBindGroupDescriptor desc = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
        desc.layout = layout;
        desc.entryCount = entries.size();
        desc.entries = entries.data();
        p.group = w_.DeviceCreateBindGroup(h_.device, &desc);
        if (p.group) h_.groups.push_back(p.group);
        error = errors_.take();
        if (!error.empty() || !p.group) throw mismatch(error.empty() ? "wgpu returned no bind group" : error);
    }
};

// One row of vulkan_devices_json (in the OpenCL rows' shape)
std::string adapter_row(const Adapter& a, size_t index) {
    const Wgpu& w = wgpu();
    WGPULimits l = WGPU_LIMITS_INIT;
    if (w.AdapterGetLimits(a.adapter, &l) != WGPUStatus_Success) throw Error(RVK_ERROR_DEVICE, "wgpu cannot read the limits of " + describe(a));
    DeviceRow r;
    r.index = std::to_string(index);
    r.platform = "Vulkan (" + a.driver_info + ")";
    r.device = strip(a.device);
    r.type = a.type;
    // every Vulkan adapter wgpu exposes has what relax_vk needs (core WebGPU: rgba32float storage
    // textures, 2D arrays, rgba16float storage); a plan's sizes are checked against its limits at load
    r.images = r.half_images = true;
    r.image_width = r.image_height = l.maxTextureDimension2D;
    r.image_layers = l.maxTextureArrayLayers;
    r.max_buffer_bytes = static_cast<int64_t>(l.maxStorageBufferBindingSize);
    r.max_alloc_bytes = std::max<int64_t>(static_cast<int64_t>(l.maxBufferSize), r.max_buffer_bytes);
    r.memory_bytes = std::max<int64_t>(r.max_alloc_bytes, int64_t{4} << 30);  // (wgpu reports no memory size: DeviceLimits' default)
    r.max_workgroups = l.maxComputeWorkgroupsPerDimension;
    r.max_workgroup_size = l.maxComputeInvocationsPerWorkgroup;
    r.max_shared_bytes = l.maxComputeWorkgroupStorageSize;
    r.source = "Vulkan adapter " + a.device + " (wgpu limits)";
    r.half_arithmetic = w.AdapterHasFeature(a.adapter, WGPUFeatureName_ShaderF16);
    return device_row_json(r);
}

}  // namespace

std::string vulkan_devices_json(const char* spec) {
    const std::vector<Adapter>& adapters = instance().adapters;
    if (spec) {
        const Adapter& chosen = select_adapter(spec);
        return "[" + adapter_row(chosen, static_cast<size_t>(&chosen - adapters.data())) + "]";
    }
    std::string out = "[";
    for (size_t i = 0; i < adapters.size(); ++i) out += (i ? ", " : "") + adapter_row(adapters[i], i);
    return out + "]";
}

std::unique_ptr<Session> open_vulkan_session(std::shared_ptr<const Artifact> artifact, const char* device, bool profile, int shader_checks) {
    const Adapter& adapter = select_adapter(device);
    return std::make_unique<VulkanSession>(std::move(artifact), adapter, profile, shader_checks);
}

}  // namespace rvk
