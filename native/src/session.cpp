#include "session.hpp"

#include <cstdio>

#include <algorithm>

namespace rvk {

void half_arithmetic_problem(const Program& program, bool has_half, const std::string& device, const std::string& feature) {
    if (has_half) return;
    for (const Kernel& k : program.kernels)
        if (k.half_arithmetic)
            throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + " computes in float16 (half arithmetic) and " + device + " lacks " + feature +
                                             ": rebuild it with ScopeOptions(arithmetic='fp32') (precision='fp16' still stores half texels)");
}

void step_times(const std::vector<std::string>& names, const std::vector<uint64_t>& begins, const std::vector<uint64_t>& ends,
                std::vector<ProfileEntry>& profile, double& span_ms) {
    profile.clear();
    bool any = false;
    uint64_t last_end = 0;
    for (size_t i = 0; i < names.size(); ++i) {
        uint64_t start = any ? std::max(begins[i], last_end) : begins[i];
        uint64_t e = std::max(ends[i], start);
        profile.push_back({names[i], static_cast<double>(e - start) * 1e-6, static_cast<double>(start - begins[0]) * 1e-6});
        last_end = e;
        any = true;
    }
    span_ms = any ? static_cast<double>(last_end - begins[0]) * 1e-6 : 0.0;
}

Session::Session(std::shared_ptr<const Artifact> artifact) : artifact_(std::move(artifact)), program_(artifact_->program) {
    for (int tid : program_.inputs) {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        inputs_.emplace_back(static_cast<size_t>(t.bytes));
    }
    input_set_.assign(inputs_.size(), false);
    for (int tid : program_.outputs) {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        outputs_device_.emplace_back(static_cast<size_t>(t.bytes));
        outputs_host_.emplace_back(static_cast<size_t>(t.elements()) * dtype_size(t.host_dtype));
    }
}

// relax_vk.runtime.session.Session.check_inputs, for one input
void Session::set_input(int index, const void* data, size_t size, const char* dtype, const int64_t* shape, int rank) {
    if (index < 0 || index >= static_cast<int>(inputs_.size()))
        throw Error(RVK_ERROR_ARGUMENT, "input index " + std::to_string(index) + " out of range (the model takes " +
                                            std::to_string(inputs_.size()) + " inputs)");
    const Tensor& t = program_.tensors[static_cast<size_t>(program_.inputs[static_cast<size_t>(index)])];
    if (shape || rank) {
        if (rank < 0 || (rank > 0 && !shape)) throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": a shape of rank " + std::to_string(rank) + " and no extents");
        std::vector<int64_t> given(shape, shape + rank);
        if (given != t.shape) throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": shape " + list_repr(given) + ", expected " + list_repr(t.shape));
    }
    DType given = dtype ? dtype_from_name(dtype) : t.host_dtype;
    if (given == DType::Invalid || (given != t.host_dtype && given != t.dtype))
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": dtype " + (dtype ? dtype : "?") + ", expected " + dtype_name(t.host_dtype));
    size_t expected = static_cast<size_t>(t.elements()) * dtype_size(given);
    if (size != expected || (!data && size))
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": " + std::to_string(size) + " bytes, expected " + std::to_string(expected) + " (" +
                                            list_repr(t.shape) + " " + dtype_name(given) + ")");
    input_set_[static_cast<size_t>(index)] = false;
    if (!convert(given, data, t.dtype, inputs_[static_cast<size_t>(index)].data(), static_cast<size_t>(t.elements())))
        throw Error(RVK_ERROR_ARGUMENT, "input " + t.name + ": " + dtype_name(t.host_dtype) + " values outside the " + dtype_name(t.dtype) +
                                            " range the device holds them in");
    input_set_[static_cast<size_t>(index)] = true;
}

void Session::run() {
    for (size_t i = 0; i < inputs_.size(); ++i)
        if (!input_set_[i])
            throw Error(RVK_ERROR_ARGUMENT, "input " + program_.tensors[static_cast<size_t>(program_.inputs[i])].name + " is not set");
    execute(inputs_, outputs_device_);
    for (size_t i = 0; i < outputs_host_.size(); ++i) {  // Session.to_host
        const Tensor& t = program_.tensors[static_cast<size_t>(program_.outputs[i])];
        convert(t.dtype, outputs_device_[i].data(), t.host_dtype, outputs_host_[i].data(), static_cast<size_t>(t.elements()));
    }
}

void Session::get_output(int index, void* data, size_t size) const {
    if (index < 0 || index >= static_cast<int>(outputs_host_.size()))
        throw Error(RVK_ERROR_ARGUMENT, "output index " + std::to_string(index) + " out of range (the model has " +
                                            std::to_string(outputs_host_.size()) + " outputs)");
    const std::vector<uint8_t>& out = outputs_host_[static_cast<size_t>(index)];
    if (size != out.size() || (!data && size))
        throw Error(RVK_ERROR_ARGUMENT, "output " + program_.tensors[static_cast<size_t>(program_.outputs[static_cast<size_t>(index)])].name +
                                            ": " + std::to_string(size) + " bytes asked, it has " + std::to_string(out.size()));
    std::copy(out.begin(), out.end(), static_cast<uint8_t*>(data));
}

void Session::read_tensor(int tid, void* data, size_t size) {
    if (tid < 0 || tid >= static_cast<int>(program_.tensors.size()))
        throw Error(RVK_ERROR_ARGUMENT, "tensor " + std::to_string(tid) + " out of range (the program has " + std::to_string(program_.tensors.size()) + " tensors)");
    const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
    size_t expected = static_cast<size_t>(t.elements()) * dtype_size(t.dtype);
    if (size != expected || (!data && size))
        throw Error(RVK_ERROR_ARGUMENT, "tensor " + t.name + ": " + std::to_string(size) + " bytes asked, it has " + std::to_string(expected));
    if (size) read_device(tid, data);
}

std::string strip(std::string s) {
    size_t a = s.find_first_not_of(" \t\n\r\f\v");
    size_t b = s.find_last_not_of(" \t\n\r\f\v");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool all_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string json_quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

std::string device_row_json(const DeviceRow& r) {
    auto num = [](int64_t v) { return std::to_string(v); };
    auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
    std::string limits = "{\"image_width\": " + num(r.image_width) + ", \"image_height\": " + num(r.image_height) + ", \"image_layers\": " +
                         num(r.image_layers) + ", \"max_buffer_bytes\": " + num(r.max_buffer_bytes) + ", \"max_alloc_bytes\": " + num(r.max_alloc_bytes) +
                         ", \"max_workgroups\": " + num(r.max_workgroups) + ", \"max_workgroup_size\": " + num(r.max_workgroup_size) +
                         ", \"max_shared_bytes\": " + num(r.max_shared_bytes) + ", \"memory_bytes\": " + num(r.memory_bytes) +
                         ", \"source\": " + json_quote(r.source) + "}";
    return "{\"index\": " + json_quote(r.index) + ", \"platform\": " + json_quote(r.platform) + ", \"device\": " + json_quote(r.device) +
           ", \"type\": " + json_quote(r.type) + ", \"image_support\": " + flag(r.images) +
           ", \"image2d_max\": " + (r.images ? "[" + num(r.image_width) + ", " + num(r.image_height) + "]" : "null") +
           ", \"image_max_array_size\": " + (r.images ? num(r.image_layers) : "null") + ", \"usable\": " + flag(r.problem.empty()) +
           ", \"problem\": " + json_quote(r.problem) + ", \"limits\": " + limits + ", \"fp16\": {\"half_images\": " + flag(r.half_images) +
           ", \"half_arithmetic\": " + flag(r.half_arithmetic) + "}}";
}

void Session::set_profiling(bool enabled) {
    if (enabled && !can_profile_) throw Error(RVK_ERROR_ARGUMENT, "the session was created without RVK_SESSION_PROFILE");
    profiling_ = enabled;
}

std::unique_ptr<Session> open_session(std::shared_ptr<const Artifact> artifact, const char* device, uint32_t flags) {
    bool profile = (flags & RVK_SESSION_PROFILE) != 0;
    uint32_t checks = flags & (RVK_SESSION_SHADER_CHECKS_LOOPS | RVK_SESSION_SHADER_CHECKS_NONE);
    if (checks == (RVK_SESSION_SHADER_CHECKS_LOOPS | RVK_SESSION_SHADER_CHECKS_NONE))
        throw Error(RVK_ERROR_ARGUMENT, "RVK_SESSION_SHADER_CHECKS_LOOPS and RVK_SESSION_SHADER_CHECKS_NONE exclude each other");
    if (artifact->program.target == "vulkan") return open_vulkan_session(std::move(artifact), device, profile, static_cast<int>(checks));
    if (checks) throw Error(RVK_ERROR_ARGUMENT, "shader checks apply to Vulkan artifacts only (this one targets " + artifact->program.target + ")");
    return open_opencl_session(std::move(artifact), device, profile);
}

#ifndef RVK_VULKAN
std::unique_ptr<Session> open_vulkan_session(std::shared_ptr<const Artifact>, const char*, bool, int) {
    throw Error(RVK_ERROR_UNSUPPORTED, "the artifact targets vulkan; this build of the native runtime has no Vulkan backend (configure it with wgpu-native's headers: -DRVK_WGPU_INCLUDE_DIR=)");
}
std::string vulkan_devices_json(const char*) {
    throw Error(RVK_ERROR_UNSUPPORTED, "this build of the native runtime has no Vulkan backend (configure it with wgpu-native's headers: -DRVK_WGPU_INCLUDE_DIR=)");
}
#endif

}  // namespace rvk
