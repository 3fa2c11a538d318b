/* relax_vk native runtime: run a .rvk model with no Python (C ABI, callable from C, C++, JNI, Swift).
 *
 * Lifecycle:
 *   rvk_artifact_open_file / rvk_artifact_open_memory   parse + completely validate a .rvk (no device)
 *   rvk_session_create(artifact, "pocl" | "gpu" | "P:D" | NULL, flags)      (OpenCL artifacts)
 *   rvk_session_create(artifact, "lavapipe" | "gpu" | "N" | NULL, flags)    (Vulkan artifacts, through wgpu-native)
 *                                                        pick the device, check its limits, build the
 *                                                        kernels, allocate every planned image/buffer,
 *                                                        upload the constants
 *   rvk_session_set_input(i, data) ... rvk_session_run ... rvk_session_get_output(i, data)
 *   rvk_session_destroy / rvk_artifact_destroy
 *
 * Errors: every function that can fail returns an rvk_status (RVK_OK = 0). The message of the last
 * failure on the calling thread is rvk_last_error() (valid until that thread's next rvk_ call; never
 * NULL, "" after a success). No C++ exception crosses this ABI.
 *
 * Threads: an artifact is immutable after it is opened and may be shared by sessions on any thread.
 * A session is not thread-safe: use it from one thread at a time (one session per thread).
 *
 * Ownership: handles are owned by the caller and freed with their destroy function (NULL is a no-op).
 * Pointer arguments are borrowed for the duration of the call only unless said otherwise; strings the
 * library returns (names, dtypes, messages) belong to the handle they came from and stay valid until
 * it is destroyed (rvk_last_error: until the thread's next call).
 */
#ifndef RELAX_VK_H
#define RELAX_VK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define RVK_API __declspec(dllexport)
#else
#define RVK_API __attribute__((visibility("default")))
#endif

#define RVK_ABI_VERSION 6

typedef enum rvk_status {
    RVK_OK = 0,
    RVK_ERROR_ARTIFACT = 1,    /* truncated, corrupt or inconsistent .rvk (Python: ArtifactError) */
    RVK_ERROR_DEVICE = 2,      /* no such device / no working OpenCL device or Vulkan adapter, no wgpu-native library
                                  (Python: OpenCLUnavailable, VulkanUnavailable) */
    RVK_ERROR_LIMIT = 3,       /* the device cannot hold or run the program (Python: DeviceLimitError) */
    RVK_ERROR_BUILD = 4,       /* clBuildProgram failed / wgpu rejected a shader; the message holds the build log or
                                  wgpu's error and the numbered WGSL (OpenCLBuildError, ShaderError) */
    RVK_ERROR_ARGUMENT = 5,    /* a bad argument: index, shape, dtype, size, NULL (Python: ValueError) */
    RVK_ERROR_RUNTIME = 6,     /* the device API failed while running (an OpenCL error code or wgpu's message) */
    RVK_ERROR_UNSUPPORTED = 7, /* a valid artifact this build cannot run (a Vulkan target in a build without wgpu headers) */
    RVK_ERROR_IO = 8           /* a file could not be read */
} rvk_status;

typedef struct rvk_artifact rvk_artifact; /* a parsed, validated .rvk (immutable) */
typedef struct rvk_session rvk_session;   /* a loaded program on one device */

#define RVK_MAX_RANK 16

/* A tensor's shape. With run-time dims (a model built with a range for a dim, e.g. --dim W=32:1280):
 * an input's is the shape last set, an output's that of the last run; an axis not known yet
 * (a run-time dim before any input or run gives it) is -1, and then elements is -1. */
typedef struct rvk_tensor_info {
    const char* name;          /* owned by the session */
    const char* dtype;         /* the host dtype the caller reads/writes ("float32", "int64", ...) */
    const char* device_dtype;  /* what the device holds (differs from dtype at converted edges) */
    int32_t rank;
    int64_t shape[RVK_MAX_RANK];
    int64_t elements;
} rvk_tensor_info;

/* session flags */
#define RVK_SESSION_PROFILE 1u /* per-step device times (OpenCL profiling events, Vulkan timestamp queries) on every run */
/* Vulkan only: wgpu's runtime checks in the shaders (docs/vulkan.md). By
 * default every shader keeps wgpu's bounds checks; these create the modules with
 * wgpuDeviceCreateShaderModuleTrusted instead: loop bounding only, or no checks at all. */
#define RVK_SESSION_SHADER_CHECKS_LOOPS 2u
#define RVK_SESSION_SHADER_CHECKS_NONE 4u

RVK_API int rvk_abi_version(void);
RVK_API const char* rvk_last_error(void);
RVK_API const char* rvk_status_name(rvk_status status);
/* The cache folder for sessions created after the call: OpenCL program binaries in it (the Python
 * runtime's cache format: both runtimes share a folder), the Vulkan drivers' shader caches in its
 * vulkan/ subfolder. NULL: the default, $RELAX_VK_CACHE_DIR, else $HOME/.cache/relax_vk/opencl and
 * .../vulkan (none without $HOME); "": no cache. An Android app passes its getCacheDir() path.
 * $RELAX_VK_NO_CACHE=1 turns the cache off whatever was set. `folder` is copied. Vulkan: the drivers
 * read their cache settings once per process, so the folder in force at the process's first Vulkan
 * session is the one they use (NVIDIA's and Mesa's drivers; variables the user set are kept). */
RVK_API void rvk_set_cache_dir(const char* folder);

/* --- artifacts ------------------------------------------------------------------------------ */
/* Reads the whole file; `path` is borrowed. *out receives a new handle on success, NULL on failure. */
RVK_API rvk_status rvk_artifact_open_file(const char* path, rvk_artifact** out);
/* Copies `size` bytes from `data` (the caller may free them on return). `what` names the artifact in
 * error messages (borrowed; NULL: "artifact"). */
RVK_API rvk_status rvk_artifact_open_memory(const void* data, size_t size, const char* what, rvk_artifact** out);
RVK_API void rvk_artifact_destroy(rvk_artifact* artifact);
/* "opencl" or "vulkan" (owned by the artifact). */
RVK_API const char* rvk_artifact_target(const rvk_artifact* artifact);

/* --- sessions ------------------------------------------------------------------------------- */
/* `artifact` is borrowed: the session keeps what it needs, the artifact may be destroyed after.
 * `device`, OpenCL: NULL (a GPU if one works, else pocl), "pocl", "gpu" or "P:D" (platform:device index);
 * Vulkan: NULL (a GPU adapter if there is one, else a CPU one), "lavapipe" (or "cpu"), "gpu" or "N" (an index
 * of the Vulkan adapters, as `relax-vk devices` lists them). The Vulkan backend opens wgpu-native at its first
 * use: $RVK_WGPU_LIBRARY, else libwgpu_native.so (or libwgpu_native-release.so) beside this library, else on
 * the loader's path. */
RVK_API rvk_status rvk_session_create(const rvk_artifact* artifact, const char* device, uint32_t flags, rvk_session** out);
RVK_API void rvk_session_destroy(rvk_session* session);

RVK_API int32_t rvk_session_input_count(const rvk_session* session);
RVK_API int32_t rvk_session_output_count(const rvk_session* session);
/* Run-time dims: how many, and dim `index`'s name (owned by the session), declared range and value in
 * the last run (-1 before the first). A model of fixed shapes has none. */
RVK_API int32_t rvk_session_dim_count(const rvk_session* session);
RVK_API rvk_status rvk_session_dim_info(const rvk_session* session, int32_t index, const char** name, int64_t* min, int64_t* max,
                                        int64_t* value);
/* Fills *info (caller-owned struct; its strings are owned by the session). */
RVK_API rvk_status rvk_session_input_info(const rvk_session* session, int32_t index, rvk_tensor_info* info);
RVK_API rvk_status rvk_session_output_info(const rvk_session* session, int32_t index, rvk_tensor_info* info);

/* Copies input `index` from `data` (dense C order, `size` bytes). `dtype` names the data's dtype: the
 * input's host dtype or its device dtype (NULL: the host dtype); integers outside the device dtype's
 * range are refused. `shape`/`rank` (borrowed; shape NULL: not checked) must equal the input's shape;
 * an input with run-time dims needs it: each such axis must lie in its dim's declared range (else
 * RVK_ERROR_ARGUMENT naming the input, the dim, the value and the range), and inputs that share a dim
 * must agree at the run. Nothing is compiled or allocated at a new shape: storage is planned at the
 * dims' bounds. The input is uploaded by the next run. */
RVK_API rvk_status rvk_session_set_input(rvk_session* session, int32_t index, const void* data, size_t size, const char* dtype,
                                         const int64_t* shape, int32_t rank);
/* One inference: uploads the inputs, runs every step, downloads the outputs. Every input must be set
 * (inputs stay set between runs). */
RVK_API rvk_status rvk_session_run(rvk_session* session);
/* States (a model that keeps memory between runs, e.g. a language model's key/value cache: built with
 * relax_vk.core.states): inputs the session holds on the device, which the caller never sets, and
 * outputs written into them after each run, which the caller never reads; the counts and indices
 * above leave both out. They start as zeros; this zeroes them again (a new sequence). */
RVK_API rvk_status rvk_session_reset_states(rvk_session* session);
/* Copies output `index` of the last run into `data` (`size` must be its exact byte size in the host dtype;
 * with run-time dims rvk_session_output_info gives the run's shape). */
RVK_API rvk_status rvk_session_get_output(const rvk_session* session, int32_t index, void* data, size_t size);

/* Profiling: turn per-step times on or off for the following runs (a session created without
 * RVK_SESSION_PROFILE has no profiling queue and refuses to turn it on). */
RVK_API rvk_status rvk_session_set_profiling(rvk_session* session, int enabled);
/* Steps of the last profiled run: name (owned by the session) and milliseconds (NaN when the session
 * does not profile). */
RVK_API int32_t rvk_session_profile_count(const rvk_session* session);
RVK_API rvk_status rvk_session_profile_entry(const rvk_session* session, int32_t index, const char** name, double* ms);
/* Where step `index` of the last profiled run began, in ms from the first step's start: what lies
 * between one step's end and the next one's start is device idle time (NaN when the session does not profile). */
RVK_API rvk_status rvk_session_profile_start(const rvk_session* session, int32_t index, double* start_ms);
/* The last profiled run's device span in ms (NaN when none). */
RVK_API double rvk_session_device_ms(const rvk_session* session);
/* Device memory the tensors' allocations take (shared allocations counted once). */
RVK_API int64_t rvk_session_device_bytes(const rvk_session* session);
/* Device memory objects (buffers, images, sub-buffers, textures, readback buffers) the session has
 * created since it was made: every one is made at load, so runs leave this unchanged (a
 * rvk_session_read_tensor makes and frees one). */
RVK_API int64_t rvk_session_device_objects(const rvk_session* session);
/* The shape variant the last run ran (an artifact built with --specialize carries builds fixed to
 * some sizes of its run-time dims): its index in the program's "variants", or -1 when the last run
 * ran the program itself (or no run yet). The variants' memory is in rvk_session_device_bytes. */
RVK_API int32_t rvk_session_variant(const rvk_session* session);
/* The device's name (owned by the session). */
RVK_API const char* rvk_session_device_name(const rvk_session* session);
/* Warnings raised while loading ("" when none; owned by the session), e.g. half texels stored as float. */
RVK_API const char* rvk_session_warnings(const rvk_session* session);
/* How the device program was made. OpenCL: "binary" (the program-binary cache's, verified), "source"
 * (built, binary stored), "source (cache off)". Vulkan (wgpu-native translates the WGSL at every
 * start; the driver compiles it): "driver cache at FOLDER" (the driver keeps the pipelines it compiles
 * in FOLDER and reads them from there at a later start), "source (cache off)", or "source (WHY)" when
 * the driver keeps no cache relax_vk knows of or it is turned off. Owned by the session. */
RVK_API const char* rvk_session_program_origin(const rvk_session* session);
/* How kernels are given the session's buffers. OpenCL: "svm" (arenas, the buffers several tensors
 * share, allocated in coarse-grained shared virtual memory and their tensors passed by address, where
 * the device has it and RVK_OPENCL_SVM is not 0: NVIDIA's driver spends far less host time per launch
 * on them than on sub-buffers) or "memory objects" (no arena, or no SVM); Vulkan: "bind groups".
 * Owned by the session. */
RVK_API const char* rvk_session_buffer_binding(const rvk_session* session);

/* Tensor `tensor` (an id of the program's tensor table) as the device holds it now, in its device
 * dtype (half texels read back as the tensor's dtype; `size` its exact byte size). After a run an
 * intermediate holds its value only in an artifact built without storage reuse (what `relax-vk bisect`
 * reads). A tool's call: it allocates, waits for the device and frees on every call. */
RVK_API rvk_status rvk_session_read_tensor(const rvk_session* session, int32_t tensor, void* data, size_t size);
/* Tensor `tensor` of the program's table as rvk_session_output_info describes an output: its shape
 * in the last run (what rvk_session_read_tensor's `size` follows with run-time dims). */
RVK_API rvk_status rvk_session_tensor_info(const rvk_session* session, int32_t tensor, rvk_tensor_info* info);

/* --- devices -------------------------------------------------------------------------------- */
/* The devices of `api` ("opencl" or "vulkan") as a JSON array of rows: index (the device spec that
 * names it), platform, device, type, image_support, image2d_max, image_max_array_size, usable,
 * problem, limits (image_width, image_height, image_layers, max_buffer_bytes, max_alloc_bytes,
 * max_workgroups, max_workgroup_size, max_shared_bytes, memory_bytes, source) and fp16 {half_images,
 * half_arithmetic}. `spec` NULL: every device; else the one row of the device rvk_session_create
 * would open for that spec (or its error); "default" is the device it opens for a NULL spec (a GPU
 * that works, else the CPU device). *json stays valid until the thread's next rvk_devices. */
RVK_API rvk_status rvk_devices(const char* api, const char* spec, const char** json);

#ifdef __cplusplus
}
#endif

#endif /* RELAX_VK_H */
