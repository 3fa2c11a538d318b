// The OpenCL backend, through the ICD loader
// (or a vendor's libOpenCL), opened at run time by opencl_loader.cpp.
//
// Devices by the names and rules every relax_vk tool uses ("gpu", "pocl", "P:D", NULL; a device counts only
// when it builds an image-writing probe kernel). A session allocates every image and buffer of the
// artifact's storage plan at load (device_placement: an arena offset the device cannot bind, or an
// arena larger than one allocation, becomes a buffer of its own), gives every tensor of a shared
// buffer a sub-buffer, creates one kernel object per launch step with its arguments set once, and
// uploads the constants; a run then only enqueues: input writes, the steps (kernels and scope copies:
// the API's buffer<->image copy commands, a scratch buffer between two image mappings, the shared
// texel-converting kernels of texel_copies.cl when half texels are on one side), output reads, one
// clFinish.
#include <CL/cl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "binary_cache.hpp"
#include "driver_caches.hpp"
#include "integer_weight_reads.hpp"
#include "session.hpp"
#include "sha256.hpp"
#include "texel_copies_cl.h"  // generated from native/src/shaders/texel_copies.cl

namespace rvk {

const std::string& opencl_library_error();  // opencl_loader.cpp: why no OpenCL library loaded ("" if one did)

namespace {

const char* cl_error_name(cl_int code) {
    switch (code) {
#define RVK_CL_ERR(x) \
    case x: return #x;
        RVK_CL_ERR(CL_DEVICE_NOT_FOUND) RVK_CL_ERR(CL_DEVICE_NOT_AVAILABLE) RVK_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
        RVK_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE) RVK_CL_ERR(CL_OUT_OF_RESOURCES) RVK_CL_ERR(CL_OUT_OF_HOST_MEMORY)
        RVK_CL_ERR(CL_PROFILING_INFO_NOT_AVAILABLE) RVK_CL_ERR(CL_MEM_COPY_OVERLAP) RVK_CL_ERR(CL_IMAGE_FORMAT_MISMATCH)
        RVK_CL_ERR(CL_IMAGE_FORMAT_NOT_SUPPORTED) RVK_CL_ERR(CL_BUILD_PROGRAM_FAILURE) RVK_CL_ERR(CL_MAP_FAILURE)
        RVK_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET) RVK_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        RVK_CL_ERR(CL_INVALID_VALUE) RVK_CL_ERR(CL_INVALID_DEVICE_TYPE) RVK_CL_ERR(CL_INVALID_PLATFORM) RVK_CL_ERR(CL_INVALID_DEVICE)
        RVK_CL_ERR(CL_INVALID_CONTEXT) RVK_CL_ERR(CL_INVALID_QUEUE_PROPERTIES) RVK_CL_ERR(CL_INVALID_COMMAND_QUEUE)
        RVK_CL_ERR(CL_INVALID_HOST_PTR) RVK_CL_ERR(CL_INVALID_MEM_OBJECT) RVK_CL_ERR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
        RVK_CL_ERR(CL_INVALID_IMAGE_SIZE) RVK_CL_ERR(CL_INVALID_SAMPLER) RVK_CL_ERR(CL_INVALID_BINARY) RVK_CL_ERR(CL_INVALID_BUILD_OPTIONS)
        RVK_CL_ERR(CL_INVALID_PROGRAM) RVK_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE) RVK_CL_ERR(CL_INVALID_KERNEL_NAME)
        RVK_CL_ERR(CL_INVALID_KERNEL_DEFINITION) RVK_CL_ERR(CL_INVALID_KERNEL) RVK_CL_ERR(CL_INVALID_ARG_INDEX)
        RVK_CL_ERR(CL_INVALID_ARG_VALUE) RVK_CL_ERR(CL_INVALID_ARG_SIZE) RVK_CL_ERR(CL_INVALID_KERNEL_ARGS)
        RVK_CL_ERR(CL_INVALID_WORK_DIMENSION) RVK_CL_ERR(CL_INVALID_WORK_GROUP_SIZE) RVK_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
        RVK_CL_ERR(CL_INVALID_GLOBAL_OFFSET) RVK_CL_ERR(CL_INVALID_EVENT_WAIT_LIST) RVK_CL_ERR(CL_INVALID_EVENT)
        RVK_CL_ERR(CL_INVALID_OPERATION) RVK_CL_ERR(CL_INVALID_BUFFER_SIZE) RVK_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
        RVK_CL_ERR(CL_INVALID_PROPERTY) RVK_CL_ERR(CL_INVALID_IMAGE_DESCRIPTOR)
#undef RVK_CL_ERR
        case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
        default: return "CL_UNKNOWN_ERROR";
    }
}

void check(cl_int code, const std::string& what) {
    if (code != CL_SUCCESS) throw Error(RVK_ERROR_RUNTIME, what + " failed: " + cl_error_name(code) + " (" + std::to_string(code) + ")");
}

// check() whose text `what()` is made only on an error (the calls of every run: hundreds per token)
template <typename What>
void check_with(cl_int code, What what) {
    if (code != CL_SUCCESS) check(code, what());
}

template <typename T>
T device_info(cl_device_id d, cl_device_info what) {
    T v{};
    check(clGetDeviceInfo(d, what, sizeof v, &v, nullptr), "clGetDeviceInfo");
    return v;
}

std::string device_string(cl_device_id d, cl_device_info what) {
    size_t n = 0;
    check(clGetDeviceInfo(d, what, 0, nullptr, &n), "clGetDeviceInfo");
    std::string s(n, '\0');
    check(clGetDeviceInfo(d, what, n, &s[0], nullptr), "clGetDeviceInfo");
    return strip(s.c_str());
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
    size_t n = 0;
    check(clGetPlatformInfo(p, what, 0, nullptr, &n), "clGetPlatformInfo");
    std::string s(n, '\0');
    check(clGetPlatformInfo(p, what, n, &s[0], nullptr), "clGetPlatformInfo");
    return strip(s.c_str());
}

cl_platform_id platform_of(cl_device_id d) { return device_info<cl_platform_id>(d, CL_DEVICE_PLATFORM); }

// compiler.describe
std::string describe(cl_device_id d) { return device_string(d, CL_DEVICE_NAME) + " (" + platform_string(platform_of(d), CL_PLATFORM_VERSION) + ")"; }

struct Candidate {
    size_t platform, index;
    cl_device_id device;
};

// compiler.all_devices
std::vector<Candidate> all_devices() {
    cl_uint n = 0;
    cl_int err = clGetPlatformIDs(0, nullptr, &n);
    if (err != CL_SUCCESS || n == 0) {
        const std::string& library = opencl_library_error();
        throw Error(RVK_ERROR_DEVICE, "no OpenCL platform: " + (!library.empty() ? library : err != CL_SUCCESS ? cl_error_name(err) : "none installed"));
    }
    std::vector<cl_platform_id> platforms(n);
    check(clGetPlatformIDs(n, platforms.data(), nullptr), "clGetPlatformIDs");
    std::vector<Candidate> out;
    for (size_t p = 0; p < platforms.size(); ++p) {
        cl_uint m = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &m) != CL_SUCCESS || m == 0) continue;
        std::vector<cl_device_id> devices(m);
        check(clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, m, devices.data(), nullptr), "clGetDeviceIDs");
        for (size_t d = 0; d < devices.size(); ++d) out.push_back({p, d, devices[d]});
    }
    return out;
}

std::string build_log(cl_program program, cl_device_id device) {
    size_t n = 0;
    if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS) return "";
    std::string s(n, '\0');
    if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, &s[0], nullptr) != CL_SUCCESS) return "";
    return strip(s.c_str());
}

// Builds `source` for `device` in `context`; throws Error(RVK_ERROR_BUILD) with the log on failure.
cl_program build(cl_context context, cl_device_id device, const std::string& source, const char* options = "") {
    const char* text = source.c_str();
    size_t length = source.size();
    cl_int err;
    cl_program program = clCreateProgramWithSource(context, 1, &text, &length, &err);
    check(err, "clCreateProgramWithSource");
    err = clBuildProgram(program, 1, &device, options, nullptr, nullptr);
    if (err != CL_SUCCESS) {
        std::string log = build_log(program, device);
        clReleaseProgram(program);
        throw Error(RVK_ERROR_BUILD, "OpenCL build failed on " + device_string(device, CL_DEVICE_NAME) + ":\n" + (log.empty() ? cl_error_name(err) : log));
    }
    return program;
}

// The program's kernel names (CL_PROGRAM_KERNEL_NAMES), sorted.
std::vector<std::string> kernel_names(cl_program program) {
    size_t n = 0;
    std::vector<std::string> out;
    if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &n) != CL_SUCCESS || n == 0) return out;
    std::string s(n, '\0');
    if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, n, &s[0], nullptr) != CL_SUCCESS) return out;
    s = s.c_str();
    for (size_t start = 0; start < s.size();) {
        size_t end = s.find(';', start);
        std::string name = strip(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (!name.empty()) out.push_back(name);
        if (end == std::string::npos) break;
        start = end + 1;
    }
    std::sort(out.begin(), out.end());
    return out;
}

// binary_cache.cache_key: what identifies the compiler that built a binary, and the source.
CacheKey program_key(cl_device_id device, const std::string& source, const char* options) {
    cl_platform_id p = device_info<cl_platform_id>(device, CL_DEVICE_PLATFORM);
    return {{"platform", platform_string(p, CL_PLATFORM_NAME) + " " + platform_string(p, CL_PLATFORM_VERSION)},
            {"device", device_string(device, CL_DEVICE_NAME)},
            {"vendor", device_string(device, CL_DEVICE_VENDOR)},
            {"version", device_string(device, CL_DEVICE_VERSION)},
            {"driver", device_string(device, CL_DRIVER_VERSION)},
            {"options", options},
            {"source_sha256", sha256_hex(source)}};
}

// binary_cache.build: the program of `source` from a verified binary of the cache folder that the
// driver loads and that defines every `required` kernel, else built from source and its binary
// stored (binary_cache.hpp). `origin`: "binary", "source" or "source (cache off)"; "driver cache
// at FOLDER" where the driver keeps the programs it builds itself (opencl_driver_cache), which
// relax_vk then leaves to it.
cl_program build_cached(cl_context context, cl_device_id device, const std::string& source, const std::vector<std::string>& required, std::string& origin) {
    const char* options = "";
    std::string folder = cache_folder(CacheApi::OpenCL);
    if (folder.empty()) {
        origin = "source (cache off)";
        return build(context, device, source, options);
    }
    std::string driver = opencl_driver_cache(platform_string(platform_of(device), CL_PLATFORM_NAME));
    if (!driver.empty()) {
        origin = "driver cache at " + driver;
        return build(context, device, source, options);
    }
    CacheKey key = program_key(device, source, options);
    std::string path = cache_path(folder, key), binary, why;
    std::vector<std::string> names;
    if (read_verified(path, key, binary, names, why)) {
        const unsigned char* bytes = reinterpret_cast<const unsigned char*>(binary.data());
        size_t size = binary.size();
        cl_int status = CL_SUCCESS, err;
        cl_program program = clCreateProgramWithBinary(context, 1, &device, &size, &bytes, &status, &err);
        if (err == CL_SUCCESS && status == CL_SUCCESS) err = clBuildProgram(program, 1, &device, options, nullptr, nullptr);
        if (err == CL_SUCCESS && status == CL_SUCCESS) {
            std::vector<std::string> have = kernel_names(program);
            if (std::all_of(required.begin(), required.end(), [&](const std::string& k) { return std::binary_search(have.begin(), have.end(), k); })) {
                origin = "binary";
                return program;
            }
        }
        if (program) clReleaseProgram(program);  // (refused or incomplete: rebuilt from source and replaced)
    }
    cl_program program = build(context, device, source, options);
    origin = "source";
    size_t size = 0;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) == CL_SUCCESS && size) {
        std::string out(size, '\0');
        unsigned char* target = reinterpret_cast<unsigned char*>(&out[0]);
        if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof target, &target, nullptr) == CL_SUCCESS) write_atomic(path, key, out, kernel_names(program));
    }
    return program;
}

const char* kProbe =
    "__kernel void relax_vk_probe(__write_only image2d_array_t img) { write_imagef(img, (int4)(0, 0, 0, 0), (float4)(1.0f)); }";

// The contexts of successful probes, kept for the session that follows: a context costs NVIDIA's
// driver ~0.12 s to make and ~0.06 s to release, and a start used to make two (the probe's, then
// the session's). take_probe_context hands the chosen device's over and releases the others.
std::mutex probe_lock;
std::map<cl_device_id, cl_context> probe_contexts;

void keep_probe_context(cl_device_id device, cl_context context) {
    std::lock_guard<std::mutex> hold(probe_lock);
    cl_context& slot = probe_contexts[device];
    if (slot) clReleaseContext(slot);
    slot = context;
}

cl_context take_probe_context(cl_device_id device) {
    std::lock_guard<std::mutex> hold(probe_lock);
    cl_context mine = nullptr;
    for (auto& [d, c] : probe_contexts) {
        if (d == device)
            mine = c;
        else
            clReleaseContext(c);
    }
    probe_contexts.clear();
    return mine;
}

// compiler.device_works: "" when the device builds an image-writing probe kernel
std::string device_works(cl_device_id device) {
    if (!device_info<cl_bool>(device, CL_DEVICE_IMAGE_SUPPORT)) return "no image support";
    cl_int err;
    cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return std::string("probe build failed: ") + cl_error_name(err);
    std::string problem;
    try {
        std::string origin;  // (through the binary cache: a second start does not compile the probe again)
        clReleaseProgram(build_cached(context, device, kProbe, {"relax_vk_probe"}, origin));
    } catch (const Error& e) {
        std::string text = e.what();
        std::string chosen, line, last;
        for (size_t start = 0; start <= text.size();) {
            size_t end = text.find('\n', start);
            line = strip(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
            if (!line.empty()) last = line;
            if (chosen.empty() && line.find("error") != std::string::npos) chosen = line;
            if (end == std::string::npos) break;
            start = end + 1;
        }
        problem = "probe build failed: " + (chosen.empty() ? last : chosen);
    }
    if (problem.empty())
        keep_probe_context(device, context);
    else
        clReleaseContext(context);
    return problem;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// compiler.find_device (cached per process, as the Python one)
cl_device_id find_device(const std::string& prefer, bool gpu_only) {
    static std::mutex lock;
    static std::map<std::pair<std::string, bool>, cl_device_id> cache;
    std::lock_guard<std::mutex> guard(lock);
    auto key = std::make_pair(prefer, gpu_only);
    if (cache.count(key)) return cache[key];
    std::vector<Candidate> candidates = all_devices();
    std::vector<std::pair<bool, Candidate>> order;
    for (const Candidate& c : candidates) {
        cl_platform_id p = platform_of(c.device);
        std::string text = lower(platform_string(p, CL_PLATFORM_NAME) + platform_string(p, CL_PLATFORM_VERSION));
        order.push_back({text.find(lower(prefer)) == std::string::npos, c});
    }
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return std::make_tuple(a.first, a.second.platform, a.second.index) < std::make_tuple(b.first, b.second.platform, b.second.index);
    });
    std::vector<std::string> reasons;
    for (const auto& entry : order) {
        cl_device_id device = entry.second.device;
        if (gpu_only && !(device_info<cl_device_type>(device, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU)) continue;
        std::string problem = device_works(device);
        if (!problem.empty()) {
            reasons.push_back(describe(device) + ": " + problem);
            continue;
        }
        cache[key] = device;
        return device;
    }
    std::string message = "no OpenCL device can build kernels";
    if (reasons.empty()) message += " (no devices found)";
    for (const std::string& r : reasons) message += "\n  - " + r;
    message += gpu_only ? "\n(only GPU devices were considered)" : "\nOn Debian/Ubuntu: apt-get install pocl-opencl-icd";
    throw Error(RVK_ERROR_DEVICE, message);
}

// devices.select_device
cl_device_id select_device(const char* spec_or_null) {
    if (!spec_or_null || std::string(spec_or_null) == "default") {  // a GPU that works, else pocl
        try {
            return find_device("pocl", true);
        } catch (const Error&) {
            return find_device("pocl", false);
        }
    }
    std::string spec = spec_or_null;
    if (spec == "pocl") return find_device("pocl", false);
    if (spec == "gpu") return find_device("pocl", true);
    size_t colon = spec.find(':');
    std::string platform = spec.substr(0, colon), device = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (!all_digits(platform) || !all_digits(device) || platform.size() > 6 || device.size() > 6)
        throw Error(RVK_ERROR_ARGUMENT, "unknown device " + py_repr(spec) + ": use 'pocl', 'gpu' or PLATFORM:DEVICE (see `relax-vk devices`)");
    for (const Candidate& c : all_devices()) {
        if (c.platform == std::stoul(platform) && c.index == std::stoul(device)) {
            std::string problem = device_works(c.device);
            if (!problem.empty())
                throw Error(RVK_ERROR_DEVICE, "device " + spec + " (" + describe(c.device) + ") cannot run relax_vk kernels: " + problem);
            return c.device;
        }
    }
    throw Error(RVK_ERROR_DEVICE, "no OpenCL device " + spec + "; `relax-vk devices` lists them");
}

// Whether the context's device has RGBA image arrays of channel type `type`; $`force_off`=0 says it
// has not (a driver whose half or snorm images misbehave: textures are then stored as float32)
bool image_format(cl_context context, cl_channel_type type, const char* force_off) {
    const char* force = std::getenv(force_off);
    if (force && std::string(force) == "0") return false;
    cl_uint n = 0;
    if (clGetSupportedImageFormats(context, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D_ARRAY, 0, nullptr, &n) != CL_SUCCESS) return false;
    std::vector<cl_image_format> formats(n);
    if (n && clGetSupportedImageFormats(context, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D_ARRAY, n, formats.data(), nullptr) != CL_SUCCESS) return false;
    for (const cl_image_format& f : formats)
        if (f.image_channel_order == CL_RGBA && f.image_channel_data_type == type) return true;
    return false;
}

// session.texture_limit_problems
std::vector<std::string> texture_limit_problems(const Extents& image, int64_t max_w, int64_t max_h, int64_t max_layers) {
    std::vector<std::string> problems;
    if (image[0] > max_w) problems.push_back("width " + std::to_string(image[0]) + " > image2d max width " + std::to_string(max_w));
    if (image[1] > max_h) problems.push_back("height " + std::to_string(image[1]) + " > image2d max height " + std::to_string(max_h));
    if (image[2] > max_layers) problems.push_back(std::to_string(image[2]) + " layers > max array layers " + std::to_string(max_layers));
    return problems;
}

// A kernel whose code computes in half (a float16 model's ops between float32 edges: TVM enables
// cl_khr_fp16 for it) on a device without half arithmetic: refused by the kernel's name, before
// the driver's compiler fails on it
void half_kernel_problem(const std::string& source, bool has_half, cl_device_id device) {
    if (has_half) return;
    size_t at = source.find("#pragma OPENCL EXTENSION cl_khr_fp16 : enable");
    if (at == std::string::npos) return;
    const std::string mark = "// Function: ";
    size_t named = source.rfind(mark, at);
    std::string kernel = named == std::string::npos ? "a kernel" : "kernel " + source.substr(named + mark.size(), source.find('\n', named) - named - mark.size());
    throw Error(RVK_ERROR_LIMIT, kernel + " computes in float16 and " + describe(device) +
                                     " lacks cl_khr_fp16: build the model in float32 for this device (cast it to float32 before export)");
}

// opencl.session.check_limits (``source``: the OpenCL C the session builds)
void check_limits(const Program& program, const std::string& source, cl_device_id device) {
    std::string extensions = " " + device_string(device, CL_DEVICE_EXTENSIONS) + " ";
    bool khr_fp16 = extensions.find(" cl_khr_fp16 ") != std::string::npos;
    half_arithmetic_problem(program, khr_fp16, describe(device), "cl_khr_fp16");
    half_kernel_problem(source, khr_fp16 || extensions.find(" cl_amd_fp16 ") != std::string::npos, device);
    std::vector<const Tensor*> textures;
    for (const Tensor& t : program.tensors)
        if (t.is_image) textures.push_back(&t);
    // a launch's work items along an axis: kernels index them in 32 bits (and pocl aborts on a grid
    // past what its scheduler divides)
    static const char* const axes = "xyz";
    for (const Kernel& k : program.kernels)
        for (size_t a = 0; a < 3; ++a)
            if (k.global[a] > std::numeric_limits<int32_t>::max())
                throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + ": " + std::to_string(k.global[a]) + " work items along " + axes[a] +
                                                 " > 2147483647, what kernels index in 32 bits");
    bool images = device_info<cl_bool>(device, CL_DEVICE_IMAGE_SUPPORT);
    if (!textures.empty() && !images)
        throw Error(RVK_ERROR_LIMIT, describe(device) + " has no image support; the plan keeps " + textures[0]->name + " in a texture");
    int64_t max_w = images ? static_cast<int64_t>(device_info<size_t>(device, CL_DEVICE_IMAGE2D_MAX_WIDTH)) : 0;
    int64_t max_h = images ? static_cast<int64_t>(device_info<size_t>(device, CL_DEVICE_IMAGE2D_MAX_HEIGHT)) : 0;
    int64_t max_layers = images ? static_cast<int64_t>(device_info<size_t>(device, CL_DEVICE_IMAGE_MAX_ARRAY_SIZE)) : 0;
    for (const Tensor* t : textures) {
        // (a placed texture: the image it sits in reaches at least its origin plus its extents)
        Extents reach = {t->origin[0] + t->image[0], t->origin[1] + t->image[1], t->image[2]};
        std::vector<std::string> problems = texture_limit_problems(reach, max_w, max_h, max_layers);
        if (!problems.empty()) {
            std::string joined;
            for (size_t i = 0; i < problems.size(); ++i) joined += (i ? "; " : "") + problems[i];
            throw Error(RVK_ERROR_LIMIT, "tensor " + t->name + " (" + t->scope + ", image " + std::to_string(t->image[0]) + "x" +
                                             std::to_string(t->image[1]) + "x" + std::to_string(t->image[2]) + ") does not fit " + describe(device) +
                                             ": " + joined);
        }
        if (t->dtype != DType::F32)
            throw Error(RVK_ERROR_LIMIT, "tensor " + t->name + ": " + dtype_name(t->dtype) + " textures are not supported by this runtime (float32 only)");
    }
    int64_t alloc = static_cast<int64_t>(device_info<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    int64_t memory = static_cast<int64_t>(device_info<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE));
    for (const Tensor& t : program.tensors)
        if (!t.is_image && t.bytes > alloc)
            throw Error(RVK_ERROR_LIMIT, "tensor " + t.name + " takes " + std::to_string(t.bytes) + " bytes; " + describe(device) + " allocates at most " +
                                             std::to_string(alloc) + " bytes at once");
    int64_t total = allocated_bytes(program);
    if (total > memory)
        throw Error(RVK_ERROR_LIMIT, "the program needs " + std::to_string(total) + " bytes; " + describe(device) + " has " + std::to_string(memory) +
                                         " bytes of global memory");
    int64_t max_group = static_cast<int64_t>(device_info<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE));
    for (const Kernel& k : program.kernels) {
        int64_t group = k.local[0] * k.local[1] * k.local[2];  // validated positive; a huge product is refused below
        bool huge = k.local[0] > max_group || k.local[1] > max_group || k.local[2] > max_group;
        if (huge || group > max_group)
            throw Error(RVK_ERROR_LIMIT, "kernel " + k.name + " needs work groups of " + (huge ? std::string("more than ") + std::to_string(max_group)
                                                                                               : std::to_string(group)) +
                                             " items; " + describe(device) + " allows " + std::to_string(max_group));
    }
}

class OpenCLSession final : public Session {
public:
    OpenCLSession(std::shared_ptr<const Artifact> artifact, cl_device_id device, bool profile) : Session(std::move(artifact)), device_(device) {
        device_name = device_string(device, CL_DEVICE_NAME);
        cl_int err = CL_SUCCESS;
        context_ = take_probe_context(device_);  // (the probe's, when this process just probed the device)
        if (!context_) context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
        check(err, "clCreateContext");
        bool half = std::any_of(program_.tensors.begin(), program_.tensors.end(), [](const Tensor& t) { return t.texel == "float16"; });
        if (half && !image_format(context_, CL_HALF_FLOAT, "RVK_OPENCL_HALF_IMAGES")) {
            warnings += describe(device) + " has no half-float images: textures stored as float32 instead (twice the memory)";
            program_ = with_float_texels(program_, "float16");
        }
        bool snorm = std::any_of(program_.tensors.begin(), program_.tensors.end(), [](const Tensor& t) { return t.texel == "snorm8"; });
        std::string rewritten;  // the source built, when it is not the artifact's (a decoder's: 68 MB, not copied otherwise)
        if (snorm && !image_format(context_, CL_SNORM_INT8, "RVK_OPENCL_SNORM_IMAGES")) {
            // (integer_weight_reads.hpp: the same bytes in signed 8-bit images, read as integers)
            std::string why = "the device has no signed 8-bit images";
            if (image_format(context_, CL_SIGNED_INT8, "RVK_OPENCL_INT8_IMAGES")) rewritten = with_integer_snorm8_reads(program_, artifact_->source, why);
            if (!rewritten.empty()) {
                snorm_as_int8_ = true;
            } else {
                warnings += describe(device) + " has no signed normalized 8-bit images (and " + why +
                            "): quantized weights stored as float32 texels instead (four times the memory)";
                program_ = with_float_texels(program_, "snorm8");
            }
        }
        check_limits(program_, rewritten.empty() ? artifact_->source : rewritten, device);  // (what is allocated: after the fallback)
        queue_ = clCreateCommandQueue(context_, device_, profile ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
        check(err, "clCreateCommandQueue");
        if (profile) {
            // timed runs go through a queue without profiling (see the Python session)
            timing_queue_ = clCreateCommandQueue(context_, device_, 0, &err);
            check(err, "clCreateCommandQueue");
        }
        can_profile_ = profiling_ = profile;
        std::vector<std::string> required;
        for (const Kernel& k : program_.kernels) required.push_back(k.entry);
        std::sort(required.begin(), required.end());
        required.erase(std::unique(required.begin(), required.end()), required.end());
        program_cl_ = build_cached(context_, device_, rewritten.empty() ? artifact_->source : rewritten, required, program_origin);  // the program-binary cache (the format TVM's VM path shares)
        allocate_storage();
        bind_steps();
        upload_constants();
        reset_states();
        // pocl compiles a kernel's work-group function at its first launch, one for grids under
        // 65,535 work-items wide and another for wider ones: a run-time size that crosses that
        // width would compile at the first run there (PP-OCRv4 rec on pocl: the first run at width
        // 160, after one at 640, took 5.6x a steady run). Both forms are compiled now instead.
        const char* spec = std::getenv("POCL_WORK_GROUP_SPECIALIZATION");
        const char* warm = std::getenv("RVK_POCL_WARM_UP");
        if (is_pocl(platform_string(platform_of(device_), CL_PLATFORM_NAME)) && !(spec && std::string(spec) == "0") && !(warm && std::string(warm) == "0")) {
            warm_up_across(65535);
            warm_up_runs_ = 1;  // (a shape variant's session: its kernels compiled at load, not at a user's first run at its size)
        }
    }

protected:
    void execute(const std::vector<std::vector<uint8_t>>& inputs, std::vector<std::vector<uint8_t>>& outputs) override {
        cl_command_queue q = profiling_ || !timing_queue_ ? queue_ : timing_queue_;
        bool timed = profiling_;
        // Inputs are written and outputs read with blocking calls (measured):
        // on NVIDIA's OpenCL (H100) that takes 0.08 ms off a one-kernel run and 0.08-0.12 ms off
        // mobilenet_v2 and resnet18, against non-blocking transfers and a clFinish.
        for (size_t i = 0; i < inputs.size(); ++i) write(program_.inputs[i], inputs[i].data(), q, true);
        std::vector<cl_event> events;
        cl_int err = CL_SUCCESS;
        try {
            for (const Launch& l : launches_) {
                cl_event first = nullptr, last = nullptr;
                enqueue(l, q, timed ? &first : nullptr, timed ? &last : nullptr);
                if (timed) {
                    events.push_back(first);
                    events.push_back(last);
                }
            }
            for (const StateCopy& c : state_copies_)  // (in order after the steps: one in-order queue)
                if (c.bytes)
                    check_with(clEnqueueCopyBuffer(q, ranges_[static_cast<size_t>(c.src)].first, ranges_[static_cast<size_t>(c.dst)].first,
                                                   ranges_[static_cast<size_t>(c.src)].second, ranges_[static_cast<size_t>(c.dst)].second + static_cast<size_t>(c.dst_offset),
                                                   static_cast<size_t>(c.bytes), 0, nullptr, nullptr),
                               [&] { return "updating state " + program_.tensors[static_cast<size_t>(c.dst)].name; });
            for (size_t i = 0; i < outputs.size(); ++i) read(program_.outputs[i], outputs[i].data(), q, true);
        } catch (...) {
            clFinish(q);
            for (cl_event e : events)
                if (e) clReleaseEvent(e);
            throw;
        }
        err = clFinish(q);
        std::vector<uint64_t> begins, ends;
        std::vector<std::string> names;
        for (size_t i = 0; i < events.size(); i += 2) {
            cl_ulong b = 0, e = 0;
            if (err == CL_SUCCESS) err = clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_START, sizeof b, &b, nullptr);
            if (err == CL_SUCCESS) err = clGetEventProfilingInfo(events[i + 1], CL_PROFILING_COMMAND_END, sizeof e, &e, nullptr);
            begins.push_back(b);
            ends.push_back(e);
            names.push_back(launches_[i / 2].name);
        }
        for (cl_event e : events)
            if (e) clReleaseEvent(e);
        check(err, "running the program (clFinish / profiling)");
        if (timed) {
            step_times(names, begins, ends, profile, device_ms);
        } else if (!can_profile_) {  // a session made without profiling
            profile.clear();
            for (const Launch& l : launches_) profile.push_back({l.name, std::nan("")});
            device_ms = std::nan("");
        }  // else a timing run: keep the last profiled run's times
    }

    void read_device(int tid, void* data) override {
        read(tid, data, profiling_ || !timing_queue_ ? queue_ : timing_queue_, true);
    }

    void zero_tensor(int tid) override {
        std::vector<uint8_t> zeros(static_cast<size_t>(program_.tensors[static_cast<size_t>(tid)].bytes), 0);
        write(tid, zeros.data(), profiling_ || !timing_queue_ ? queue_ : timing_queue_, true);
    }

    // The launches' run-time scalar arguments and grids (launches_[i] is step i's). Only the
    // arguments whose values changed are set again (a decoder's token changes 88 of the 350 of
    // Qwen3-0.6B's step): each clSetKernelArg is host work before the next enqueue
    // (benchmarks/RESULTS.md, "what an OpenCL launch costs NVIDIA's host").
    void shapes_changed() override {
        for (size_t i = 0; i < program_.steps.size(); ++i) {
            const Step& step = program_.steps[i];
            if (step.op != Step::Launch) continue;
            Launch& l = launches_[i];
            l.scalars.resize(step.scalars.size(), kUnset);
            for (size_t a = 0; a < step.scalars.size(); ++a) {
                int64_t v = shapes_.scalars[i][a];
                if (v == l.scalars[a]) continue;
                cl_uint at = static_cast<cl_uint>(step.scalars[a].index);
                if (step.scalars[a].dtype == DType::I64) arg(l.kernel, at, static_cast<cl_long>(v), step.kernel);
                else arg(l.kernel, at, static_cast<cl_int>(v), step.kernel);
                l.scalars[a] = v;
            }
            for (size_t d = 0; d < 3; ++d) l.global[d] = shapes_.global[i][d];
        }
    }

private:
    struct Launch {
        std::string name;
        cl_kernel kernel = nullptr;  // a launch, or a texel-converting copy
        size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
        cl_uint dims = 3;
        int src = -1, dst = -1;  // a copy (kernel == nullptr, or a converting kernel)
        std::vector<int64_t> scalars;  // the run-time scalar arguments as last set (kUnset: not yet)
    };
    static constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();

    // Every OpenCL object the session made, released in reverse order of dependence (a member, so
    // a constructor that throws half-way releases what it made too).
    struct Handles {
        cl_context context = nullptr;
        cl_command_queue queue = nullptr, timing_queue = nullptr;
        cl_program program = nullptr, copies = nullptr;
        std::vector<cl_mem> allocations;  // per allocation of the placement (nullptr: not made whole)
        std::vector<cl_mem> views;  // sub-buffers and own buffers (released before allocations)
        std::vector<void*> svm;  // shared virtual memory under arenas (freed after their buffers)
        std::vector<Launch> launches;
        cl_mem scratch = nullptr;
        Handles() = default;
        Handles(const Handles&) = delete;
        Handles& operator=(const Handles&) = delete;
        ~Handles() {
            if (queue) clFinish(queue);
            if (timing_queue) clFinish(timing_queue);
            for (Launch& l : launches)
                if (l.kernel) clReleaseKernel(l.kernel);
            // (in reverse order of creation: NVIDIA's OpenCL 580 segfaults in clReleaseMemObject when overlapping
            // sub-buffers of one arena are released in creation order after a run, measured on an H200)
            for (auto it = views.rbegin(); it != views.rend(); ++it) clReleaseMemObject(*it);
            for (cl_mem m : allocations)
                if (m) clReleaseMemObject(m);
            for (void* p : svm) clSVMFree(context, p);
            if (scratch) clReleaseMemObject(scratch);
            if (copies) clReleaseProgram(copies);
            if (program) clReleaseProgram(program);
            if (timing_queue) clReleaseCommandQueue(timing_queue);
            if (queue) clReleaseCommandQueue(queue);
            if (context) clReleaseContext(context);
        }
    };

    cl_device_id device_;
    Handles h_;
    cl_context& context_ = h_.context;
    cl_command_queue& queue_ = h_.queue;
    cl_command_queue& timing_queue_ = h_.timing_queue;
    cl_program& program_cl_ = h_.program;
    cl_program& copies_cl_ = h_.copies;
    std::vector<cl_mem>& allocations_ = h_.allocations;
    std::vector<cl_mem>& tensor_views_ = h_.views;
    std::vector<Launch>& launches_ = h_.launches;
    cl_mem& scratch_ = h_.scratch;
    std::vector<cl_mem> memory_;  // per tensor
    std::vector<std::pair<cl_mem, size_t>> ranges_;  // per tensor: (memory object, byte offset) for buffer<->image copies
    std::vector<char*> svm_;  // per tensor: its address in shared virtual memory, bound to kernels as such (nullptr: its cl_mem)
    std::vector<uint8_t> staging_;  // texel conversions of inputs/outputs/constants
    bool snorm_as_int8_ = false;  // snorm8 texels held in CL_SIGNED_INT8 images (integer_weight_reads.hpp)

    cl_mem allocate(const Allocation& a, char** svm = nullptr) {
        cl_int err;
        cl_mem m;
        if (a.is_image) {
            cl_channel_type type = a.dtype == "float16" ? CL_HALF_FLOAT : a.dtype != "snorm8" ? CL_FLOAT : snorm_as_int8_ ? CL_SIGNED_INT8 : CL_SNORM_INT8;
            cl_image_format format = {CL_RGBA, type};
            cl_image_desc desc;
            std::memset(&desc, 0, sizeof desc);
            desc.image_type = CL_MEM_OBJECT_IMAGE2D_ARRAY;
            desc.image_width = static_cast<size_t>(a.image[0]);
            desc.image_height = static_cast<size_t>(a.image[1]);
            desc.image_array_size = static_cast<size_t>(a.image[2]);
            m = clCreateImage(context_, CL_MEM_READ_WRITE, &format, &desc, nullptr, &err);
            ++device_objects;
            check(err, "clCreateImage (" + std::to_string(a.image[0]) + "x" + std::to_string(a.image[1]) + "x" + std::to_string(a.image[2]) + ")");
        } else {
            size_t bytes = static_cast<size_t>(std::max<int64_t>(a.bytes, 4));
            void* shared = svm ? clSVMAlloc(context_, CL_MEM_READ_WRITE, bytes, 0) : nullptr;
            m = nullptr;
            if (shared) {
                // (a buffer made on shared virtual memory has it as its storage: OpenCL 2.0,
                // clCreateBuffer; a driver that refuses one gets a buffer of its own instead)
                m = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, shared, &err);
                if (m) {
                    h_.svm.push_back(shared);
                } else {
                    clSVMFree(context_, shared);
                    shared = nullptr;
                }
            }
            if (!m) m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
            ++device_objects;
            check(err, "clCreateBuffer (" + std::to_string(a.bytes) + " bytes)");
            if (svm) *svm = static_cast<char*>(shared);
        }
        return m;
    }

    // Whether arenas (buffer allocations several tensors share, each at its offset) go in shared
    // virtual memory, their tensors bound to kernels by address (clSetKernelArgSVMPointer) rather
    // than as sub-buffers: where the device has coarse-grained buffer SVM, unless RVK_OPENCL_SVM=0.
    // Copies, reads and writes still name sub-buffers of a buffer made on that memory. Measured on
    // an H200 (benchmarks/RESULTS.md, "arenas in shared virtual memory"): NVIDIA's driver spends
    // several times the host time enqueueing a kernel whose arguments are sub-buffers of a shared
    // arena; bound by address, a Qwen3-0.6B decode step ran 2.4-2.5x the tokens/s and MobileNetV2's
    // shared buffer plan 3x faster. Allocations of one tensor (constants, and every buffer where the
    // plan shares none) stay memory objects: a CNN with every buffer in SVM ran 1.1-1.7x slower there.
    bool use_svm() const {
        const char* env = std::getenv("RVK_OPENCL_SVM");
        if (env && std::string(env) == "0") return false;
        cl_device_svm_capabilities caps = 0;
        if (clGetDeviceInfo(device_, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, nullptr) != CL_SUCCESS) return false;  // OpenCL 1.2
        return (caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0;
    }

    // OpenCLSession._allocate_storage
    void allocate_storage() {
        int64_t align_bits = static_cast<int64_t>(device_info<cl_uint>(device_, CL_DEVICE_MEM_BASE_ADDR_ALIGN));
        int64_t max_alloc = static_cast<int64_t>(device_info<cl_ulong>(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
        Placement placement = device_placement(program_, std::max<int64_t>(align_bits / 8, 1), max_alloc);
        bool svm = use_svm();
        std::vector<char*> allocation_svm;  // per allocation: its shared virtual memory (nullptr: none)
        for (size_t i = 0; i < placement.allocations.size(); ++i) {
            const auto& a = placement.allocations[i];
            allocations_.push_back(nullptr);
            allocation_svm.push_back(nullptr);
            if (a) allocations_.back() = allocate(*a, svm && placement.shared[i] ? &allocation_svm.back() : nullptr);
        }
        buffer_binding = h_.svm.empty() ? "memory objects" : "svm";
        device_bytes = placement.device_bytes;
        for (size_t i = 0; i < program_.tensors.size(); ++i) {
            const Tensor& t = program_.tensors[i];
            const auto& place = placement.places[i];
            if (!place) {
                Allocation own;
                own.bytes = t.bytes;
                cl_mem m = allocate(own);
                tensor_views_.push_back(m);
                memory_.push_back(m);
                ranges_.push_back({m, 0});
            } else if (t.bytes == 0 && !t.is_image) {  // no elements: a word of its own (no empty sub-buffer)
                Allocation own;
                own.bytes = 0;
                cl_mem m = allocate(own);
                tensor_views_.push_back(m);
                memory_.push_back(m);
                ranges_.push_back({m, 0});
            } else if (placement.shared[static_cast<size_t>(place->allocation)] && !t.is_image) {
                cl_mem arena = allocations_[static_cast<size_t>(place->allocation)];
                cl_buffer_region region = {static_cast<size_t>(place->offset), static_cast<size_t>(t.bytes)};
                cl_int err;
                cl_mem m = clCreateSubBuffer(arena, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
                ++device_objects;
                check(err, "clCreateSubBuffer (" + t.name + ")");
                tensor_views_.push_back(m);
                memory_.push_back(m);
                ranges_.push_back({arena, static_cast<size_t>(place->offset)});
            } else {
                cl_mem m = allocations_[static_cast<size_t>(place->allocation)];
                memory_.push_back(m);
                ranges_.push_back({m, 0});
            }
            char* base = place && !t.is_image && t.bytes ? allocation_svm[static_cast<size_t>(place->allocation)] : nullptr;
            svm_.push_back(base ? base + place->offset : nullptr);
        }
    }

    static void region(const Tensor& t, size_t out[3]) {
        for (size_t i = 0; i < 3; ++i) out[i] = static_cast<size_t>(t.image[i]);
    }

    // where the tensor's texels start in its image (a placed texture: its origin)
    static void image_origin(const Tensor& t, size_t out[3]) {
        out[0] = static_cast<size_t>(t.origin[0]);
        out[1] = static_cast<size_t>(t.origin[1]);
        out[2] = 0;
    }

    // whether the tensor's texels are stored in another dtype than its own (half or snorm8 texels)
    bool converted_texels(const Tensor& t) const { return std::string(t.texel_dtype()) != dtype_name(t.dtype); }

    // _write: `data` holds the tensor in its dtype; converted to its texel dtype when they differ
    // (unless `as_texels`: `data` holds the texels). Non-blocking unless `blocking`: `data` (and
    // staging_) must then stay unchanged until the queue finishes.
    void write(int tid, const void* data, cl_command_queue q, bool blocking = false, bool as_texels = false) {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        const void* bytes = data;
        size_t n = static_cast<size_t>(bytes_now(tid));
        if (!as_texels && converted_texels(t)) {
            staging_.resize(static_cast<size_t>(t.elements()) * 2);
            convert(t.dtype, data, dtype_from_name(t.texel_dtype()), staging_.data(), static_cast<size_t>(t.elements()));
            bytes = staging_.data();
            n = staging_.size();
            blocking = true;  // staging_ is reused
        }
        if (n == 0) return;  // a tensor of no elements: nothing to copy
        size_t origin[3] = {0, 0, 0}, r[3];
        if (t.is_image) {
            region(t, r);
            image_origin(t, origin);
            check(clEnqueueWriteImage(q, memory_[static_cast<size_t>(tid)], blocking, origin, r, 0, 0, bytes, 0, nullptr, nullptr), "writing " + t.name);
        } else {
            check(clEnqueueWriteBuffer(q, memory_[static_cast<size_t>(tid)], blocking, 0, n, bytes, 0, nullptr, nullptr), "writing " + t.name);
        }
    }

    // _read: into `data` in the tensor's dtype (when `blocking` returns, the data is there; else after the queue finishes)
    void read(int tid, void* data, cl_command_queue q, bool blocking = false) {
        const Tensor& t = program_.tensors[static_cast<size_t>(tid)];
        bool convert_back = converted_texels(t);
        blocking = blocking || convert_back;
        void* target = data;
        size_t n = static_cast<size_t>(bytes_now(tid));
        if (n == 0) return;  // a tensor of no elements
        if (convert_back) {
            staging_.resize(static_cast<size_t>(t.elements()) * texel_itemsize(t.texel_dtype()));
            target = staging_.data();
            n = staging_.size();
        }
        size_t origin[3] = {0, 0, 0}, r[3];
        if (t.is_image) {
            region(t, r);
            image_origin(t, origin);
            check(clEnqueueReadImage(q, memory_[static_cast<size_t>(tid)], blocking, origin, r, 0, 0, target, 0, nullptr, nullptr), "reading " + t.name);
        } else {
            check(clEnqueueReadBuffer(q, memory_[static_cast<size_t>(tid)], blocking, 0, n, target, 0, nullptr, nullptr), "reading " + t.name);
        }
        if (convert_back) convert_texels(t.texel_dtype(), staging_.data(), t.dtype, data, static_cast<size_t>(t.elements()));
    }

    void upload_constants() {
        for (const Tensor& t : program_.tensors) {
            if (t.kind != "constant") continue;
            const Constant& c = artifact_->constant_table.at("t" + std::to_string(t.id));
            bool as_texels = false;
            const void* data = constant_upload(t, c, artifact_->constants.data() + c.offset, staging_, &as_texels);
            write(t.id, data, queue_, true, as_texels);
        }
        check(clFinish(queue_), "uploading the constants");
    }

    cl_kernel copy_kernel(const char* name) {
        if (!copies_cl_) copies_cl_ = build(context_, device_, kTexelCopiesSource);
        cl_int err;
        cl_kernel k = clCreateKernel(copies_cl_, name, &err);
        check(err, std::string("clCreateKernel ") + name);
        return k;
    }

    // The launch's argument count against the built kernel's (the artifact check read it off the
    // source; this is what the driver compiled).
    void check_signature(cl_kernel kernel, const Step& step) {
        cl_uint n = 0;
        check(clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof n, &n, nullptr), "clGetKernelInfo " + step.kernel);
        if (n != step.args.size() + step.scalars.size())
            throw Error(RVK_ERROR_ARTIFACT, "a launch of kernel " + step.kernel + " passes " + std::to_string(step.args.size()) + " tensors and " +
                                                std::to_string(step.scalars.size()) + " integers; the kernel takes " + std::to_string(n) + " arguments");
    }

    template <typename T>
    static void arg(cl_kernel k, cl_uint i, const T& v, const std::string& what) {
        check_with(clSetKernelArg(k, i, sizeof(T), &v), [&] { return "clSetKernelArg " + std::to_string(i) + " of " + what; });
    }

    // _bind_launches: a kernel object per launch step, its arguments set once
    void bind_steps() {
        size_t scratch = 0;
        for (const Step& step : program_.steps) {
            Launch l;
            if (step.op == Step::Launch) {
                const Kernel* k = program_.kernel(step.kernel);
                l.name = step.kernel;
                cl_int err;
                l.kernel = clCreateKernel(program_cl_, k->entry.c_str(), &err);
                check(err, "clCreateKernel " + k->entry + (k->entry == step.kernel ? std::string() : " (kernel " + step.kernel + ")"));
                launches_.push_back(l);  // owned from here (released by the destructor)
                check_signature(l.kernel, step);
                // the tensors take the parameter positions the scalar arguments (set per run) leave
                std::vector<bool> scalar_at(step.args.size() + step.scalars.size(), false);
                for (const ScalarArg& a : step.scalars) scalar_at[static_cast<size_t>(a.index)] = true;
                for (size_t i = 0, at = 0; i < step.args.size(); ++i, ++at) {
                    while (scalar_at[at]) ++at;
                    size_t tid = static_cast<size_t>(step.args[i]);
                    // (by address; a driver that refuses the pointer gets the tensor's sub-buffer)
                    if (!svm_[tid] || clSetKernelArgSVMPointer(l.kernel, static_cast<cl_uint>(at), svm_[tid]) != CL_SUCCESS)
                        arg(l.kernel, static_cast<cl_uint>(at), memory_[tid], step.kernel);
                }
                for (size_t i = 0; i < 3; ++i) {
                    launches_.back().global[i] = static_cast<size_t>(k->global[i]);
                    launches_.back().local[i] = static_cast<size_t>(k->local[i]);
                }
                continue;
            }
            const Tensor& s = program_.tensors[static_cast<size_t>(step.src)];
            const Tensor& d = program_.tensors[static_cast<size_t>(step.dst)];
            l.name = "copy " + s.name + "->" + d.name;
            l.src = step.src;
            l.dst = step.dst;
            if (std::string(s.texel_dtype()) != d.texel_dtype()) {  // half texels on one side: a converting kernel
                cl_int texels = static_cast<cl_int>(s.bytes / (4 * static_cast<int64_t>(dtype_size(s.dtype))));
                cl_mem src = memory_[static_cast<size_t>(step.src)], dst = memory_[static_cast<size_t>(step.dst)];
                const char* name = s.is_image && d.is_image ? "rvk_image_to_image" : d.is_image ? "rvk_buffer_to_image" : s.is_image ? "rvk_image_to_buffer" : nullptr;
                if (!name) throw Error(RVK_ERROR_ARTIFACT, "copy " + s.name + "->" + d.name + ": a buffer-to-buffer copy converts nothing");
                l.kernel = copy_kernel(name);
                launches_.push_back(l);
                cl_kernel k = l.kernel;
                arg(k, 0, src, name);
                arg(k, 1, dst, name);
                arg(k, 2, texels, name);
                const Tensor& first = s.is_image ? s : d;
                arg(k, 3, static_cast<cl_int>(first.image[0]), name);
                arg(k, 4, static_cast<cl_int>(first.image[1]), name);
                if (s.is_image && d.is_image) {
                    arg(k, 5, static_cast<cl_int>(d.image[0]), name);
                    arg(k, 6, static_cast<cl_int>(d.image[1]), name);
                    arg(k, 7, static_cast<cl_int>(s.origin[0]), name);
                    arg(k, 8, static_cast<cl_int>(s.origin[1]), name);
                    arg(k, 9, static_cast<cl_int>(d.origin[0]), name);
                    arg(k, 10, static_cast<cl_int>(d.origin[1]), name);
                } else {
                    arg(k, 5, static_cast<cl_int>(first.origin[0]), name);
                    arg(k, 6, static_cast<cl_int>(first.origin[1]), name);
                }
                launches_.back().dims = 1;
                launches_.back().local[0] = 64;
                launches_.back().global[0] = static_cast<size_t>((texels + 63) / 64 * 64);
                continue;
            }
            if (s.is_image && d.is_image) scratch = std::max(scratch, static_cast<size_t>(s.bytes));
            launches_.push_back(l);
        }
        if (scratch) {  // between two image mappings: through the dense layout (made now: runs allocate nothing)
            cl_int err;
            scratch_ = clCreateBuffer(context_, CL_MEM_READ_WRITE, scratch, nullptr, &err);
            ++device_objects;
            check(err, "clCreateBuffer (scratch)");
        }
    }

    void enqueue(const Launch& l, cl_command_queue q, cl_event* first, cl_event* last) {
        if (l.kernel) {
            check_with(clEnqueueNDRangeKernel(q, l.kernel, l.dims, nullptr, l.global, l.local, 0, nullptr, first), [&] { return "launching " + l.name; });
            if (first) {
                *last = *first;
                clRetainEvent(*first);
            }
            return;
        }
        const Tensor& s = program_.tensors[static_cast<size_t>(l.src)];
        const Tensor& d = program_.tensors[static_cast<size_t>(l.dst)];
        size_t origin[3] = {0, 0, 0}, r[3];
        cl_mem src = memory_[static_cast<size_t>(l.src)], dst = memory_[static_cast<size_t>(l.dst)];
        if (s.is_image && d.is_image) {
            region(s, r);
            image_origin(s, origin);
            check(clEnqueueCopyImageToBuffer(q, src, scratch_, origin, r, 0, 0, nullptr, first), l.name);
            region(d, r);
            image_origin(d, origin);
            check(clEnqueueCopyBufferToImage(q, scratch_, dst, 0, origin, r, 0, nullptr, last), l.name);
        } else if (d.is_image) {
            // a buffer side that is a sub-buffer of an arena is named by its arena and offset:
            // copying between a sub-buffer and an image crashes pocl
            region(d, r);
            image_origin(d, origin);
            auto [buffer, offset] = ranges_[static_cast<size_t>(l.src)];
            check(clEnqueueCopyBufferToImage(q, buffer, dst, offset, origin, r, 0, nullptr, first), l.name);
        } else if (s.is_image) {
            region(s, r);
            image_origin(s, origin);
            auto [buffer, offset] = ranges_[static_cast<size_t>(l.dst)];
            check(clEnqueueCopyImageToBuffer(q, src, buffer, origin, r, offset, 0, nullptr, first), l.name);
        } else {
            check(clEnqueueCopyBuffer(q, src, dst, 0, 0, static_cast<size_t>(bytes_now(l.src)), 0, nullptr, first), l.name);
        }
        if (first && !(s.is_image && d.is_image)) {
            *last = *first;
            clRetainEvent(*first);
        }
    }
};

// One row of opencl_devices_json
std::string device_row(const Candidate& c) {
    cl_device_id d = c.device;
    DeviceRow r;
    r.index = std::to_string(c.platform) + ":" + std::to_string(c.index);
    r.problem = device_works(d);
    r.images = device_info<cl_bool>(d, CL_DEVICE_IMAGE_SUPPORT) != 0;
    if (r.images) {
        r.image_width = static_cast<int64_t>(device_info<size_t>(d, CL_DEVICE_IMAGE2D_MAX_WIDTH));
        r.image_height = static_cast<int64_t>(device_info<size_t>(d, CL_DEVICE_IMAGE2D_MAX_HEIGHT));
        r.image_layers = static_cast<int64_t>(device_info<size_t>(d, CL_DEVICE_IMAGE_MAX_ARRAY_SIZE));
        cl_int err;
        cl_context context = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
        if (err == CL_SUCCESS) {
            r.half_images = image_format(context, CL_HALF_FLOAT, "RVK_OPENCL_HALF_IMAGES");
            clReleaseContext(context);
        }
    }
    r.max_buffer_bytes = r.max_alloc_bytes = static_cast<int64_t>(device_info<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    r.memory_bytes = std::max(r.max_alloc_bytes, static_cast<int64_t>(device_info<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE)));
    r.max_workgroups = 65535;  // OpenCL has no per-dimension group limit: stay portable
    r.max_workgroup_size = static_cast<int64_t>(device_info<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE));
    r.max_shared_bytes = static_cast<int64_t>(device_info<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE));
    cl_device_type type = device_info<cl_device_type>(d, CL_DEVICE_TYPE);
    r.type = type & CL_DEVICE_TYPE_GPU ? "GPU" : type & CL_DEVICE_TYPE_CPU ? "CPU" : type & CL_DEVICE_TYPE_ACCELERATOR ? "ACCELERATOR" : "DEFAULT";
    r.half_arithmetic = (" " + device_string(d, CL_DEVICE_EXTENSIONS) + " ").find(" cl_khr_fp16 ") != std::string::npos;
    r.device = device_string(d, CL_DEVICE_NAME);
    r.platform = strip(platform_string(platform_of(d), CL_PLATFORM_NAME));
    r.source = "OpenCL device " + r.device + " (" + r.platform + ")";
    return device_row_json(r);
}

}  // namespace

std::string opencl_devices_json(const char* spec) {
    std::vector<Candidate> all = all_devices();
    if (spec) {
        cl_device_id chosen = select_device(spec);
        for (const Candidate& c : all)
            if (c.device == chosen) return "[" + device_row(c) + "]";
        throw Error(RVK_ERROR_DEVICE, "no OpenCL device " + std::string(spec));
    }
    std::string out = "[";
    for (size_t i = 0; i < all.size(); ++i) out += (i ? ", " : "") + device_row(all[i]);
    return out + "]";
}

std::unique_ptr<Session> open_opencl_session(std::shared_ptr<const Artifact> artifact, const char* device, bool profile) {
    cl_device_id d = select_device(device);
    return std::make_unique<OpenCLSession>(std::move(artifact), d, profile);
}

}  // namespace rvk
