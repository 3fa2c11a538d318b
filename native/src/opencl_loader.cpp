// OpenCL through dlopen, not a link-time dependency (as MNN and TVM load it): the runtime links no
// libOpenCL, so it cross-builds without one and runs on phones whose vendor ships the library under
// its own name. The first call opens the first library of kCandidates that loads ($RVK_OPENCL_LIBRARY
// first) and resolves every entry point the runtime uses; this file defines those entry points
// (hidden: they bind inside librelax_vk_native only) as forwarders. Without a library every call
// fails with CL_INVALID_PLATFORM (object creators: NULL and that error), which the runtime reports as
// "no OpenCL platform: ..." with the names it tried (rvk::opencl_library_error).
#include <CL/cl.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace rvk {
namespace {

const char* const kCandidates[] = {
    "libOpenCL.so.1", "libOpenCL.so",
    "/vendor/lib64/libOpenCL.so", "/system/vendor/lib64/libOpenCL.so", "/system/lib64/libOpenCL.so",  // Android (Adreno, ...)
    "libGLES_mali.so", "/vendor/lib64/egl/libGLES_mali.so",                                         // Mali
    "libOpenCL-pixel.so", "libPVROCL.so",                                                           // Pixel, PowerVR
};

struct Table {
    cl_int(CL_API_CALL* clGetPlatformIDs)(cl_uint a, cl_platform_id* b, cl_uint* c) = nullptr;
    cl_int(CL_API_CALL* clGetPlatformInfo)(cl_platform_id a, cl_platform_info b, size_t c, void* d, size_t* e) = nullptr;
    cl_int(CL_API_CALL* clGetDeviceIDs)(cl_platform_id a, cl_device_type b, cl_uint c, cl_device_id* d, cl_uint* e) = nullptr;
    cl_int(CL_API_CALL* clGetDeviceInfo)(cl_device_id a, cl_device_info b, size_t c, void* d, size_t* e) = nullptr;
    cl_context(CL_API_CALL* clCreateContext)(const cl_context_properties* a, cl_uint b, const cl_device_id* c, void(CL_CALLBACK* d)(const char*, const void*, size_t, void*), void* e, cl_int* f) = nullptr;
    cl_int(CL_API_CALL* clReleaseContext)(cl_context a) = nullptr;
    cl_int(CL_API_CALL* clGetSupportedImageFormats)(cl_context a, cl_mem_flags b, cl_mem_object_type c, cl_uint d, cl_image_format* e, cl_uint* f) = nullptr;
    cl_command_queue(CL_API_CALL* clCreateCommandQueue)(cl_context a, cl_device_id b, cl_command_queue_properties c, cl_int* d) = nullptr;
    cl_int(CL_API_CALL* clReleaseCommandQueue)(cl_command_queue a) = nullptr;
    cl_int(CL_API_CALL* clFinish)(cl_command_queue a) = nullptr;
    cl_program(CL_API_CALL* clCreateProgramWithSource)(cl_context a, cl_uint b, const char** c, const size_t* d, cl_int* e) = nullptr;
    cl_int(CL_API_CALL* clBuildProgram)(cl_program a, cl_uint b, const cl_device_id* c, const char* d, void(CL_CALLBACK* e)(cl_program, void*), void* f) = nullptr;
    cl_int(CL_API_CALL* clGetProgramBuildInfo)(cl_program a, cl_device_id b, cl_program_build_info c, size_t d, void* e, size_t* f) = nullptr;
    cl_program(CL_API_CALL* clCreateProgramWithBinary)(cl_context a, cl_uint b, const cl_device_id* c, const size_t* d, const unsigned char** e, cl_int* f, cl_int* g) = nullptr;
    cl_int(CL_API_CALL* clGetProgramInfo)(cl_program a, cl_program_info b, size_t c, void* d, size_t* e) = nullptr;
    cl_int(CL_API_CALL* clReleaseProgram)(cl_program a) = nullptr;
    cl_kernel(CL_API_CALL* clCreateKernel)(cl_program a, const char* b, cl_int* c) = nullptr;
    cl_int(CL_API_CALL* clReleaseKernel)(cl_kernel a) = nullptr;
    cl_int(CL_API_CALL* clSetKernelArg)(cl_kernel a, cl_uint b, size_t c, const void* d) = nullptr;
    cl_int(CL_API_CALL* clGetKernelInfo)(cl_kernel a, cl_kernel_info b, size_t c, void* d, size_t* e) = nullptr;
    cl_int(CL_API_CALL* clGetKernelArgInfo)(cl_kernel a, cl_uint b, cl_kernel_arg_info c, size_t d, void* e, size_t* f) = nullptr;
    cl_mem(CL_API_CALL* clCreateBuffer)(cl_context a, cl_mem_flags b, size_t c, void* d, cl_int* e) = nullptr;
    cl_mem(CL_API_CALL* clCreateSubBuffer)(cl_mem a, cl_mem_flags b, cl_buffer_create_type c, const void* d, cl_int* e) = nullptr;
    cl_mem(CL_API_CALL* clCreateImage)(cl_context a, cl_mem_flags b, const cl_image_format* c, const cl_image_desc* d, void* e, cl_int* f) = nullptr;
    cl_int(CL_API_CALL* clReleaseMemObject)(cl_mem a) = nullptr;
    cl_int(CL_API_CALL* clEnqueueWriteBuffer)(cl_command_queue a, cl_mem b, cl_bool c, size_t d, size_t e, const void* f, cl_uint g, const cl_event* h, cl_event* i) = nullptr;
    cl_int(CL_API_CALL* clEnqueueReadBuffer)(cl_command_queue a, cl_mem b, cl_bool c, size_t d, size_t e, void* f, cl_uint g, const cl_event* h, cl_event* i) = nullptr;
    cl_int(CL_API_CALL* clEnqueueWriteImage)(cl_command_queue a, cl_mem b, cl_bool c, const size_t* d, const size_t* e, size_t f, size_t g, const void* h, cl_uint i, const cl_event* j, cl_event* k) = nullptr;
    cl_int(CL_API_CALL* clEnqueueReadImage)(cl_command_queue a, cl_mem b, cl_bool c, const size_t* d, const size_t* e, size_t f, size_t g, void* h, cl_uint i, const cl_event* j, cl_event* k) = nullptr;
    cl_int(CL_API_CALL* clEnqueueCopyBuffer)(cl_command_queue a, cl_mem b, cl_mem c, size_t d, size_t e, size_t f, cl_uint g, const cl_event* h, cl_event* i) = nullptr;
    cl_int(CL_API_CALL* clEnqueueCopyImageToBuffer)(cl_command_queue a, cl_mem b, cl_mem c, const size_t* d, const size_t* e, size_t f, cl_uint g, const cl_event* h, cl_event* i) = nullptr;
    cl_int(CL_API_CALL* clEnqueueCopyBufferToImage)(cl_command_queue a, cl_mem b, cl_mem c, size_t d, const size_t* e, const size_t* f, cl_uint g, const cl_event* h, cl_event* i) = nullptr;
    cl_int(CL_API_CALL* clEnqueueNDRangeKernel)(cl_command_queue a, cl_kernel b, cl_uint c, const size_t* d, const size_t* e, const size_t* f, cl_uint g, const cl_event* h, cl_event* i) = nullptr;
    cl_int(CL_API_CALL* clGetEventProfilingInfo)(cl_event a, cl_profiling_info b, size_t c, void* d, size_t* e) = nullptr;
    cl_int(CL_API_CALL* clRetainEvent)(cl_event a) = nullptr;
    cl_int(CL_API_CALL* clReleaseEvent)(cl_event a) = nullptr;
    // OpenCL 2.0's shared virtual memory: optional (a 1.2 library lacks them; the calls then fail
    // with CL_INVALID_OPERATION and the session binds buffers)
    void*(CL_API_CALL* clSVMAlloc)(cl_context a, cl_svm_mem_flags b, size_t c, cl_uint d) = nullptr;
    void(CL_API_CALL* clSVMFree)(cl_context a, void* b) = nullptr;
    cl_int(CL_API_CALL* clSetKernelArgSVMPointer)(cl_kernel a, cl_uint b, const void* c) = nullptr;
    std::string error;  // why no library is loaded ("" once one is)
};

Table& table() {
    static Table t;
    static std::once_flag once;
    std::call_once(once, [] {
        std::string tried;
        void* lib = nullptr;
        const char* env = std::getenv("RVK_OPENCL_LIBRARY");
        if (env && *env) {
            lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
            tried += env;
        }
        for (const char* name : kCandidates) {
            if (lib) break;
            lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            tried += std::string(tried.empty() ? "" : ", ") + name;
        }
        if (!lib) {
            t.error = "no OpenCL library could be loaded (tried " + tried + "; set RVK_OPENCL_LIBRARY)";
            return;
        }
        t.clGetPlatformIDs = reinterpret_cast<decltype(t.clGetPlatformIDs)>(dlsym(lib, "clGetPlatformIDs"));
        t.clGetPlatformInfo = reinterpret_cast<decltype(t.clGetPlatformInfo)>(dlsym(lib, "clGetPlatformInfo"));
        t.clGetDeviceIDs = reinterpret_cast<decltype(t.clGetDeviceIDs)>(dlsym(lib, "clGetDeviceIDs"));
        t.clGetDeviceInfo = reinterpret_cast<decltype(t.clGetDeviceInfo)>(dlsym(lib, "clGetDeviceInfo"));
        t.clCreateContext = reinterpret_cast<decltype(t.clCreateContext)>(dlsym(lib, "clCreateContext"));
        t.clReleaseContext = reinterpret_cast<decltype(t.clReleaseContext)>(dlsym(lib, "clReleaseContext"));
        t.clGetSupportedImageFormats = reinterpret_cast<decltype(t.clGetSupportedImageFormats)>(dlsym(lib, "clGetSupportedImageFormats"));
        t.clCreateCommandQueue = reinterpret_cast<decltype(t.clCreateCommandQueue)>(dlsym(lib, "clCreateCommandQueue"));
        t.clReleaseCommandQueue = reinterpret_cast<decltype(t.clReleaseCommandQueue)>(dlsym(lib, "clReleaseCommandQueue"));
        t.clFinish = reinterpret_cast<decltype(t.clFinish)>(dlsym(lib, "clFinish"));
        t.clCreateProgramWithSource = reinterpret_cast<decltype(t.clCreateProgramWithSource)>(dlsym(lib, "clCreateProgramWithSource"));
        t.clBuildProgram = reinterpret_cast<decltype(t.clBuildProgram)>(dlsym(lib, "clBuildProgram"));
        t.clGetProgramBuildInfo = reinterpret_cast<decltype(t.clGetProgramBuildInfo)>(dlsym(lib, "clGetProgramBuildInfo"));
        t.clCreateProgramWithBinary = reinterpret_cast<decltype(t.clCreateProgramWithBinary)>(dlsym(lib, "clCreateProgramWithBinary"));
        t.clGetProgramInfo = reinterpret_cast<decltype(t.clGetProgramInfo)>(dlsym(lib, "clGetProgramInfo"));
        t.clReleaseProgram = reinterpret_cast<decltype(t.clReleaseProgram)>(dlsym(lib, "clReleaseProgram"));
        t.clCreateKernel = reinterpret_cast<decltype(t.clCreateKernel)>(dlsym(lib, "clCreateKernel"));
        t.clReleaseKernel = reinterpret_cast<decltype(t.clReleaseKernel)>(dlsym(lib, "clReleaseKernel"));
        t.clSetKernelArg = reinterpret_cast<decltype(t.clSetKernelArg)>(dlsym(lib, "clSetKernelArg"));
        t.clGetKernelInfo = reinterpret_cast<decltype(t.clGetKernelInfo)>(dlsym(lib, "clGetKernelInfo"));
        t.clGetKernelArgInfo = reinterpret_cast<decltype(t.clGetKernelArgInfo)>(dlsym(lib, "clGetKernelArgInfo"));
        t.clCreateBuffer = reinterpret_cast<decltype(t.clCreateBuffer)>(dlsym(lib, "clCreateBuffer"));
        t.clCreateSubBuffer = reinterpret_cast<decltype(t.clCreateSubBuffer)>(dlsym(lib, "clCreateSubBuffer"));
        t.clCreateImage = reinterpret_cast<decltype(t.clCreateImage)>(dlsym(lib, "clCreateImage"));
        t.clReleaseMemObject = reinterpret_cast<decltype(t.clReleaseMemObject)>(dlsym(lib, "clReleaseMemObject"));
        t.clEnqueueWriteBuffer = reinterpret_cast<decltype(t.clEnqueueWriteBuffer)>(dlsym(lib, "clEnqueueWriteBuffer"));
        t.clEnqueueReadBuffer = reinterpret_cast<decltype(t.clEnqueueReadBuffer)>(dlsym(lib, "clEnqueueReadBuffer"));
        t.clEnqueueWriteImage = reinterpret_cast<decltype(t.clEnqueueWriteImage)>(dlsym(lib, "clEnqueueWriteImage"));
        t.clEnqueueReadImage = reinterpret_cast<decltype(t.clEnqueueReadImage)>(dlsym(lib, "clEnqueueReadImage"));
        t.clEnqueueCopyBuffer = reinterpret_cast<decltype(t.clEnqueueCopyBuffer)>(dlsym(lib, "clEnqueueCopyBuffer"));
        t.clEnqueueCopyImageToBuffer = reinterpret_cast<decltype(t.clEnqueueCopyImageToBuffer)>(dlsym(lib, "clEnqueueCopyImageToBuffer"));
        t.clEnqueueCopyBufferToImage = reinterpret_cast<decltype(t.clEnqueueCopyBufferToImage)>(dlsym(lib, "clEnqueueCopyBufferToImage"));
        t.clEnqueueNDRangeKernel = reinterpret_cast<decltype(t.clEnqueueNDRangeKernel)>(dlsym(lib, "clEnqueueNDRangeKernel"));
        t.clGetEventProfilingInfo = reinterpret_cast<decltype(t.clGetEventProfilingInfo)>(dlsym(lib, "clGetEventProfilingInfo"));
        t.clRetainEvent = reinterpret_cast<decltype(t.clRetainEvent)>(dlsym(lib, "clRetainEvent"));
        t.clReleaseEvent = reinterpret_cast<decltype(t.clReleaseEvent)>(dlsym(lib, "clReleaseEvent"));
        t.clSVMAlloc = reinterpret_cast<decltype(t.clSVMAlloc)>(dlsym(lib, "clSVMAlloc"));
        t.clSVMFree = reinterpret_cast<decltype(t.clSVMFree)>(dlsym(lib, "clSVMFree"));
        t.clSetKernelArgSVMPointer = reinterpret_cast<decltype(t.clSetKernelArgSVMPointer)>(dlsym(lib, "clSetKernelArgSVMPointer"));
        if (!t.clSVMAlloc || !t.clSVMFree || !t.clSetKernelArgSVMPointer) t.clSVMAlloc = nullptr;  // all three or none
        const char* missing = nullptr;
        if (!t.clGetPlatformIDs && !missing) missing = "clGetPlatformIDs";
        if (!t.clGetPlatformInfo && !missing) missing = "clGetPlatformInfo";
        if (!t.clGetDeviceIDs && !missing) missing = "clGetDeviceIDs";
        if (!t.clGetDeviceInfo && !missing) missing = "clGetDeviceInfo";
        if (!t.clCreateContext && !missing) missing = "clCreateContext";
        if (!t.clReleaseContext && !missing) missing = "clReleaseContext";
        if (!t.clGetSupportedImageFormats && !missing) missing = "clGetSupportedImageFormats";
        if (!t.clCreateCommandQueue && !missing) missing = "clCreateCommandQueue";
        if (!t.clReleaseCommandQueue && !missing) missing = "clReleaseCommandQueue";
        if (!t.clFinish && !missing) missing = "clFinish";
        if (!t.clCreateProgramWithSource && !missing) missing = "clCreateProgramWithSource";
        if (!t.clBuildProgram && !missing) missing = "clBuildProgram";
        if (!t.clGetProgramBuildInfo && !missing) missing = "clGetProgramBuildInfo";
        if (!t.clCreateProgramWithBinary && !missing) missing = "clCreateProgramWithBinary";
        if (!t.clGetProgramInfo && !missing) missing = "clGetProgramInfo";
        if (!t.clReleaseProgram && !missing) missing = "clReleaseProgram";
        if (!t.clCreateKernel && !missing) missing = "clCreateKernel";
        if (!t.clReleaseKernel && !missing) missing = "clReleaseKernel";
        if (!t.clSetKernelArg && !missing) missing = "clSetKernelArg";
        if (!t.clGetKernelInfo && !missing) missing = "clGetKernelInfo";
        if (!t.clCreateBuffer && !missing) missing = "clCreateBuffer";
        if (!t.clCreateSubBuffer && !missing) missing = "clCreateSubBuffer";
        if (!t.clCreateImage && !missing) missing = "clCreateImage";
        if (!t.clReleaseMemObject && !missing) missing = "clReleaseMemObject";
        if (!t.clEnqueueWriteBuffer && !missing) missing = "clEnqueueWriteBuffer";
        if (!t.clEnqueueReadBuffer && !missing) missing = "clEnqueueReadBuffer";
        if (!t.clEnqueueWriteImage && !missing) missing = "clEnqueueWriteImage";
        if (!t.clEnqueueReadImage && !missing) missing = "clEnqueueReadImage";
        if (!t.clEnqueueCopyBuffer && !missing) missing = "clEnqueueCopyBuffer";
        if (!t.clEnqueueCopyImageToBuffer && !missing) missing = "clEnqueueCopyImageToBuffer";
        if (!t.clEnqueueCopyBufferToImage && !missing) missing = "clEnqueueCopyBufferToImage";
        if (!t.clEnqueueNDRangeKernel && !missing) missing = "clEnqueueNDRangeKernel";
        if (!t.clGetEventProfilingInfo && !missing) missing = "clGetEventProfilingInfo";
        if (!t.clRetainEvent && !missing) missing = "clRetainEvent";
        if (!t.clReleaseEvent && !missing) missing = "clReleaseEvent";
        if (missing) {
            t.error = std::string("the OpenCL library lacks ") + missing;
            t.clGetPlatformIDs = nullptr;
        }
    });
    return t;
}

template <typename R>
R fail(cl_int* err) {
    if (err) *err = CL_INVALID_PLATFORM;
    return nullptr;
}

}  // namespace

const std::string& opencl_library_error() { return table().error; }

}  // namespace rvk

using rvk::table;

extern "C" {
CL_API_ENTRY cl_int CL_API_CALL clGetPlatformIDs(cl_uint a, cl_platform_id* b, cl_uint* c) {
    return table().clGetPlatformIDs && table().clGetPlatformIDs ? table().clGetPlatformIDs(a, b, c) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetPlatformInfo(cl_platform_id a, cl_platform_info b, size_t c, void* d, size_t* e) {
    return table().clGetPlatformInfo && table().clGetPlatformIDs ? table().clGetPlatformInfo(a, b, c, d, e) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetDeviceIDs(cl_platform_id a, cl_device_type b, cl_uint c, cl_device_id* d, cl_uint* e) {
    return table().clGetDeviceIDs && table().clGetPlatformIDs ? table().clGetDeviceIDs(a, b, c, d, e) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetDeviceInfo(cl_device_id a, cl_device_info b, size_t c, void* d, size_t* e) {
    return table().clGetDeviceInfo && table().clGetPlatformIDs ? table().clGetDeviceInfo(a, b, c, d, e) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_context CL_API_CALL clCreateContext(const cl_context_properties* a, cl_uint b, const cl_device_id* c, void(CL_CALLBACK* d)(const char*, const void*, size_t, void*), void* e, cl_int* f) {
    return table().clCreateContext && table().clGetPlatformIDs ? table().clCreateContext(a, b, c, d, e, f) : rvk::fail<cl_context>(f);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseContext(cl_context a) {
    return table().clReleaseContext && table().clGetPlatformIDs ? table().clReleaseContext(a) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetSupportedImageFormats(cl_context a, cl_mem_flags b, cl_mem_object_type c, cl_uint d, cl_image_format* e, cl_uint* f) {
    return table().clGetSupportedImageFormats && table().clGetPlatformIDs ? table().clGetSupportedImageFormats(a, b, c, d, e, f) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueue(cl_context a, cl_device_id b, cl_command_queue_properties c, cl_int* d) {
    return table().clCreateCommandQueue && table().clGetPlatformIDs ? table().clCreateCommandQueue(a, b, c, d) : rvk::fail<cl_command_queue>(d);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseCommandQueue(cl_command_queue a) {
    return table().clReleaseCommandQueue && table().clGetPlatformIDs ? table().clReleaseCommandQueue(a) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue a) {
    return table().clFinish && table().clGetPlatformIDs ? table().clFinish(a) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context a, cl_uint b, const char** c, const size_t* d, cl_int* e) {
    return table().clCreateProgramWithSource && table().clGetPlatformIDs ? table().clCreateProgramWithSource(a, b, c, d, e) : rvk::fail<cl_program>(e);
}

CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program a, cl_uint b, const cl_device_id* c, const char* d, void(CL_CALLBACK* e)(cl_program, void*), void* f) {
    return table().clBuildProgram && table().clGetPlatformIDs ? table().clBuildProgram(a, b, c, d, e, f) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetProgramBuildInfo(cl_program a, cl_device_id b, cl_program_build_info c, size_t d, void* e, size_t* f) {
    return table().clGetProgramBuildInfo && table().clGetPlatformIDs ? table().clGetProgramBuildInfo(a, b, c, d, e, f) : CL_INVALID_PLATFORM;
}
CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithBinary(cl_context a, cl_uint b, const cl_device_id* c, const size_t* d, const unsigned char** e, cl_int* f,
                                                              cl_int* g) {
    return table().clCreateProgramWithBinary && table().clGetPlatformIDs ? table().clCreateProgramWithBinary(a, b, c, d, e, f, g) : rvk::fail<cl_program>(g);
}
CL_API_ENTRY cl_int CL_API_CALL clGetProgramInfo(cl_program a, cl_program_info b, size_t c, void* d, size_t* e) {
    return table().clGetProgramInfo && table().clGetPlatformIDs ? table().clGetProgramInfo(a, b, c, d, e) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseProgram(cl_program a) {
    return table().clReleaseProgram && table().clGetPlatformIDs ? table().clReleaseProgram(a) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program a, const char* b, cl_int* c) {
    return table().clCreateKernel && table().clGetPlatformIDs ? table().clCreateKernel(a, b, c) : rvk::fail<cl_kernel>(c);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseKernel(cl_kernel a) {
    return table().clReleaseKernel && table().clGetPlatformIDs ? table().clReleaseKernel(a) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clSetKernelArg(cl_kernel a, cl_uint b, size_t c, const void* d) {
    return table().clSetKernelArg && table().clGetPlatformIDs ? table().clSetKernelArg(a, b, c, d) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetKernelInfo(cl_kernel a, cl_kernel_info b, size_t c, void* d, size_t* e) {
    return table().clGetKernelInfo && table().clGetPlatformIDs ? table().clGetKernelInfo(a, b, c, d, e) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetKernelArgInfo(cl_kernel a, cl_uint b, cl_kernel_arg_info c, size_t d, void* e, size_t* f) {
    return table().clGetKernelArgInfo && table().clGetPlatformIDs ? table().clGetKernelArgInfo(a, b, c, d, e, f) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context a, cl_mem_flags b, size_t c, void* d, cl_int* e) {
    return table().clCreateBuffer && table().clGetPlatformIDs ? table().clCreateBuffer(a, b, c, d, e) : rvk::fail<cl_mem>(e);
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateSubBuffer(cl_mem a, cl_mem_flags b, cl_buffer_create_type c, const void* d, cl_int* e) {
    return table().clCreateSubBuffer && table().clGetPlatformIDs ? table().clCreateSubBuffer(a, b, c, d, e) : rvk::fail<cl_mem>(e);
}

CL_API_ENTRY cl_mem CL_API_CALL clCreateImage(cl_context a, cl_mem_flags b, const cl_image_format* c, const cl_image_desc* d, void* e, cl_int* f) {
    return table().clCreateImage && table().clGetPlatformIDs ? table().clCreateImage(a, b, c, d, e, f) : rvk::fail<cl_mem>(f);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseMemObject(cl_mem a) {
    return table().clReleaseMemObject && table().clGetPlatformIDs ? table().clReleaseMemObject(a) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue a, cl_mem b, cl_bool c, size_t d, size_t e, const void* f, cl_uint g, const cl_event* h, cl_event* i) {
    return table().clEnqueueWriteBuffer && table().clGetPlatformIDs ? table().clEnqueueWriteBuffer(a, b, c, d, e, f, g, h, i) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue a, cl_mem b, cl_bool c, size_t d, size_t e, void* f, cl_uint g, const cl_event* h, cl_event* i) {
    return table().clEnqueueReadBuffer && table().clGetPlatformIDs ? table().clEnqueueReadBuffer(a, b, c, d, e, f, g, h, i) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteImage(cl_command_queue a, cl_mem b, cl_bool c, const size_t* d, const size_t* e, size_t f, size_t g, const void* h, cl_uint i, const cl_event* j, cl_event* k) {
    return table().clEnqueueWriteImage && table().clGetPlatformIDs ? table().clEnqueueWriteImage(a, b, c, d, e, f, g, h, i, j, k) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadImage(cl_command_queue a, cl_mem b, cl_bool c, const size_t* d, const size_t* e, size_t f, size_t g, void* h, cl_uint i, const cl_event* j, cl_event* k) {
    return table().clEnqueueReadImage && table().clGetPlatformIDs ? table().clEnqueueReadImage(a, b, c, d, e, f, g, h, i, j, k) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue a, cl_mem b, cl_mem c, size_t d, size_t e, size_t f, cl_uint g, const cl_event* h, cl_event* i) {
    return table().clEnqueueCopyBuffer && table().clGetPlatformIDs ? table().clEnqueueCopyBuffer(a, b, c, d, e, f, g, h, i) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyImageToBuffer(cl_command_queue a, cl_mem b, cl_mem c, const size_t* d, const size_t* e, size_t f, cl_uint g, const cl_event* h, cl_event* i) {
    return table().clEnqueueCopyImageToBuffer && table().clGetPlatformIDs ? table().clEnqueueCopyImageToBuffer(a, b, c, d, e, f, g, h, i) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBufferToImage(cl_command_queue a, cl_mem b, cl_mem c, size_t d, const size_t* e, const size_t* f, cl_uint g, const cl_event* h, cl_event* i) {
    return table().clEnqueueCopyBufferToImage && table().clGetPlatformIDs ? table().clEnqueueCopyBufferToImage(a, b, c, d, e, f, g, h, i) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue a, cl_kernel b, cl_uint c, const size_t* d, const size_t* e, const size_t* f, cl_uint g, const cl_event* h, cl_event* i) {
    return table().clEnqueueNDRangeKernel && table().clGetPlatformIDs ? table().clEnqueueNDRangeKernel(a, b, c, d, e, f, g, h, i) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clGetEventProfilingInfo(cl_event a, cl_profiling_info b, size_t c, void* d, size_t* e) {
    return table().clGetEventProfilingInfo && table().clGetPlatformIDs ? table().clGetEventProfilingInfo(a, b, c, d, e) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY cl_int CL_API_CALL clRetainEvent(cl_event a) {
    return table().clRetainEvent && table().clGetPlatformIDs ? table().clRetainEvent(a) : CL_INVALID_PLATFORM;
}

CL_API_ENTRY void* CL_API_CALL clSVMAlloc(cl_context a, cl_svm_mem_flags b, size_t c, cl_uint d) {
    return table().clSVMAlloc && table().clGetPlatformIDs ? table().clSVMAlloc(a, b, c, d) : nullptr;
}

CL_API_ENTRY void CL_API_CALL clSVMFree(cl_context a, void* b) {
    if (table().clSVMAlloc && table().clGetPlatformIDs) table().clSVMFree(a, b);
}

CL_API_ENTRY cl_int CL_API_CALL clSetKernelArgSVMPointer(cl_kernel a, cl_uint b, const void* c) {
    return table().clSVMAlloc && table().clGetPlatformIDs ? table().clSetKernelArgSVMPointer(a, b, c) : CL_INVALID_OPERATION;
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseEvent(cl_event a) {
    return table().clReleaseEvent && table().clGetPlatformIDs ? table().clReleaseEvent(a) : CL_INVALID_PLATFORM;
}

}  // extern "C"
