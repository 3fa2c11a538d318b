// The C ABI (include/relax_vk/relax_vk.h): every entry point catches everything, so no C++
// exception crosses it; failures become a status plus the thread's last error message.
#include <cstdio>
#include <fstream>
#include <new>

#include "cache_folder.hpp"
#include "session.hpp"

struct rvk_artifact {
    std::shared_ptr<const rvk::Artifact> artifact;
};

struct rvk_session {
    std::unique_ptr<rvk::Session> session;
    std::vector<std::string> dtypes;  // keeps the strings rvk_tensor_info points at
};

namespace {

thread_local std::string last_error;

template <typename F>
rvk_status guarded(F&& body) {
    try {
        last_error.clear();
        body();
        return RVK_OK;
    } catch (const rvk::Error& e) {
        last_error = e.what();
        return e.status;
    } catch (const std::bad_alloc&) {
        last_error = "out of host memory";
        return RVK_ERROR_RUNTIME;
    } catch (const std::exception& e) {
        last_error = std::string("internal error: ") + e.what();
        return RVK_ERROR_RUNTIME;
    } catch (...) {
        last_error = "internal error";
        return RVK_ERROR_RUNTIME;
    }
}

void require(bool cond, const char* message) {
    if (!cond) throw rvk::Error(RVK_ERROR_ARGUMENT, message);
}

rvk_status info(const rvk_session* s, const std::vector<int>& ids, int32_t index, rvk_tensor_info* out, const char* what) {
    return guarded([&] {
        require(s && out, "NULL session or info");
        if (index < 0 || index >= static_cast<int32_t>(ids.size()))
            throw rvk::Error(RVK_ERROR_ARGUMENT, std::string(what) + " index " + std::to_string(index) + " out of range (" + std::to_string(ids.size()) + ")");
        const rvk::Tensor& t = s->session->program().tensors[static_cast<size_t>(ids[static_cast<size_t>(index)])];
        if (t.shape.size() > RVK_MAX_RANK) throw rvk::Error(RVK_ERROR_UNSUPPORTED, t.name + ": rank " + std::to_string(t.shape.size()) + " > RVK_MAX_RANK");
        out->name = t.name.c_str();
        out->dtype = rvk::dtype_name(t.host_dtype);
        out->device_dtype = rvk::dtype_name(t.dtype);
        std::vector<int64_t> shape = s->session->current_shape(t.id);
        out->rank = static_cast<int32_t>(shape.size());
        out->elements = 1;
        for (size_t i = 0; i < RVK_MAX_RANK; ++i) out->shape[i] = i < shape.size() ? shape[i] : 0;
        for (int64_t v : shape) out->elements = v < 0 || out->elements < 0 ? -1 : out->elements * v;
    });
}

}  // namespace

extern "C" {

int rvk_abi_version(void) { return RVK_ABI_VERSION; }

const char* rvk_last_error(void) { return last_error.c_str(); }

const char* rvk_status_name(rvk_status status) {
    switch (status) {
        case RVK_OK: return "RVK_OK";
        case RVK_ERROR_ARTIFACT: return "RVK_ERROR_ARTIFACT";
        case RVK_ERROR_DEVICE: return "RVK_ERROR_DEVICE";
        case RVK_ERROR_LIMIT: return "RVK_ERROR_LIMIT";
        case RVK_ERROR_BUILD: return "RVK_ERROR_BUILD";
        case RVK_ERROR_ARGUMENT: return "RVK_ERROR_ARGUMENT";
        case RVK_ERROR_RUNTIME: return "RVK_ERROR_RUNTIME";
        case RVK_ERROR_UNSUPPORTED: return "RVK_ERROR_UNSUPPORTED";
        case RVK_ERROR_IO: return "RVK_ERROR_IO";
    }
    return "RVK_ERROR_UNKNOWN";
}

rvk_status rvk_artifact_open_memory(const void* data, size_t size, const char* what, rvk_artifact** out) {
    if (out) *out = nullptr;
    return guarded([&] {
        require(out && (data || !size), "NULL data or out");
        auto handle = std::make_unique<rvk_artifact>();
        handle->artifact = rvk::parse_artifact(static_cast<const uint8_t*>(data), size, what ? what : "artifact");
        *out = handle.release();
    });
}

rvk_status rvk_artifact_open_file(const char* path, rvk_artifact** out) {
    if (out) *out = nullptr;
    return guarded([&] {
        require(path && out, "NULL path or out");
        std::ifstream f(path, std::ios::binary);
        if (!f) throw rvk::Error(RVK_ERROR_IO, std::string(path) + ": cannot read: no such file or not readable");
        std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        if (f.bad()) throw rvk::Error(RVK_ERROR_IO, std::string(path) + ": cannot read: I/O error");
        auto handle = std::make_unique<rvk_artifact>();
        handle->artifact = rvk::parse_artifact(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
        *out = handle.release();
    });
}

void rvk_artifact_destroy(rvk_artifact* artifact) { delete artifact; }

const char* rvk_artifact_target(const rvk_artifact* artifact) { return artifact ? artifact->artifact->program.target.c_str() : ""; }

rvk_status rvk_session_create(const rvk_artifact* artifact, const char* device, uint32_t flags, rvk_session** out) {
    if (out) *out = nullptr;
    return guarded([&] {
        require(artifact && out, "NULL artifact or out");
        auto handle = std::make_unique<rvk_session>();
        handle->session = rvk::open_session(artifact->artifact, device, flags);
        *out = handle.release();
    });
}

void rvk_session_destroy(rvk_session* session) {
    try {
        delete session;
    } catch (...) {  // destructors release handles only; never let anything escape
    }
}

int32_t rvk_session_input_count(const rvk_session* s) { return s ? static_cast<int32_t>(s->session->program().inputs.size()) : 0; }
int32_t rvk_session_output_count(const rvk_session* s) { return s ? static_cast<int32_t>(s->session->program().outputs.size()) : 0; }

rvk_status rvk_session_input_info(const rvk_session* s, int32_t index, rvk_tensor_info* out) {
    static const std::vector<int> none;
    return info(s, s ? s->session->program().inputs : none, index, out, "input");
}

int32_t rvk_session_dim_count(const rvk_session* s) { return s ? static_cast<int32_t>(s->session->program().dims.size()) : 0; }

rvk_status rvk_session_dim_info(const rvk_session* s, int32_t index, const char** name, int64_t* min, int64_t* max, int64_t* value) {
    return guarded([&] {
        require(s && name && min && max && value, "NULL session or dim info");
        const auto& dims = s->session->program().dims;
        if (index < 0 || index >= static_cast<int32_t>(dims.size()))
            throw rvk::Error(RVK_ERROR_ARGUMENT, "dim index " + std::to_string(index) + " out of range (" + std::to_string(dims.size()) + ")");
        *name = dims[static_cast<size_t>(index)].name.c_str();
        *min = dims[static_cast<size_t>(index)].min;
        *max = dims[static_cast<size_t>(index)].max;
        *value = s->session->dim_value(index);
    });
}

rvk_status rvk_session_output_info(const rvk_session* s, int32_t index, rvk_tensor_info* out) {
    static const std::vector<int> none;
    return info(s, s ? s->session->program().outputs : none, index, out, "output");
}

rvk_status rvk_session_set_input(rvk_session* s, int32_t index, const void* data, size_t size, const char* dtype, const int64_t* shape, int32_t rank) {
    return guarded([&] {
        require(s, "NULL session");
        s->session->set_input(index, data, size, dtype, shape, rank);
    });
}

rvk_status rvk_session_run(rvk_session* s) {
    return guarded([&] {
        require(s, "NULL session");
        s->session->run();
    });
}

rvk_status rvk_session_get_output(const rvk_session* s, int32_t index, void* data, size_t size) {
    return guarded([&] {
        require(s, "NULL session");
        s->session->get_output(index, data, size);
    });
}

rvk_status rvk_session_set_profiling(rvk_session* s, int enabled) {
    return guarded([&] {
        require(s, "NULL session");
        s->session->set_profiling(enabled != 0);
    });
}

int32_t rvk_session_profile_count(const rvk_session* s) { return s ? static_cast<int32_t>(s->session->profile.size()) : 0; }

rvk_status rvk_session_profile_entry(const rvk_session* s, int32_t index, const char** name, double* ms) {
    return guarded([&] {
        require(s && name && ms, "NULL session, name or ms");
        const auto& profile = s->session->profile;
        if (index < 0 || index >= static_cast<int32_t>(profile.size()))
            throw rvk::Error(RVK_ERROR_ARGUMENT, "profile index " + std::to_string(index) + " out of range (" + std::to_string(profile.size()) + ")");
        *name = profile[static_cast<size_t>(index)].name.c_str();
        *ms = profile[static_cast<size_t>(index)].ms;
    });
}

rvk_status rvk_session_profile_start(const rvk_session* s, int32_t index, double* start_ms) {
    return guarded([&] {
        require(s && start_ms, "NULL session or start_ms");
        const auto& profile = s->session->profile;
        if (index < 0 || index >= static_cast<int32_t>(profile.size()))
            throw rvk::Error(RVK_ERROR_ARGUMENT, "profile index " + std::to_string(index) + " out of range (" + std::to_string(profile.size()) + ")");
        *start_ms = profile[static_cast<size_t>(index)].start_ms;
    });
}

double rvk_session_device_ms(const rvk_session* s) { return s ? s->session->device_ms : 0.0; }
int64_t rvk_session_device_bytes(const rvk_session* s) { return s ? s->session->device_bytes : 0; }
int64_t rvk_session_device_objects(const rvk_session* s) { return s ? s->session->device_objects : 0; }
int32_t rvk_session_variant(const rvk_session* s) { return s ? s->session->last_variant() : -1; }
const char* rvk_session_device_name(const rvk_session* s) { return s ? s->session->device_name.c_str() : ""; }
const char* rvk_session_warnings(const rvk_session* s) { return s ? s->session->warnings.c_str() : ""; }
const char* rvk_session_program_origin(const rvk_session* s) { return s ? s->session->program_origin.c_str() : ""; }
const char* rvk_session_buffer_binding(const rvk_session* s) { return s ? s->session->buffer_binding.c_str() : ""; }

void rvk_set_cache_dir(const char* folder) { rvk::set_cache_folder(folder); }

rvk_status rvk_session_tensor_info(const rvk_session* s, int32_t tensor, rvk_tensor_info* out) {
    std::vector<int> ids(s ? s->session->program().tensors.size() : 0);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    return info(s, ids, tensor, out, "tensor");
}

rvk_status rvk_session_reset_states(rvk_session* s) {
    return guarded([&] {
        require(s, "NULL session");
        s->session->reset_states();
    });
}

rvk_status rvk_session_read_tensor(const rvk_session* s, int32_t tensor, void* data, size_t size) {
    return guarded([&] {
        require(s, "NULL session");
        s->session->read_tensor(tensor, data, size);
    });
}

rvk_status rvk_devices(const char* api, const char* spec, const char** json) {
    static thread_local std::string rows;
    if (json) *json = "";
    return guarded([&] {
        require(api && json, "NULL api or json");
        std::string which = api;
        if (which == "opencl")
            rows = rvk::opencl_devices_json(spec);
        else if (which == "vulkan")
            rows = rvk::vulkan_devices_json(spec);
        else
            throw rvk::Error(RVK_ERROR_ARGUMENT, "unknown API " + rvk::py_repr(which) + ": 'opencl' or 'vulkan'");
        *json = rows.c_str();
    });
}

}  // extern "C"
