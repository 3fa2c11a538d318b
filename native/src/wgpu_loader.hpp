// wgpu-native (webgpu.h + wgpu.h) through dlopen, not a link-time dependency, as the OpenCL backend
// opens the ICD loader: librelax_vk_native links no libwgpu_native, so it builds (and cross-builds)
// with the headers alone and a program that never opens a Vulkan artifact needs no wgpu library.
#pragma once

#include <webgpu.h>
#include <wgpu.h>

#include <string>

namespace rvk {

// The entry points the Vulkan backend calls (resolved together; one missing is a clear error).
#define RVK_WGPU_FUNCTIONS(X)                                                                                          \
    X(GetVersion) X(CreateInstance) X(InstanceEnumerateAdapters) X(InstanceProcessEvents)                            \
    X(AdapterGetInfo) X(AdapterInfoFreeMembers) X(AdapterGetLimits) X(AdapterHasFeature) X(AdapterRequestDevice)     \
    X(AdapterRelease) X(DeviceRelease) X(DeviceGetQueue) X(DevicePoll) X(QueueRelease) X(QueueSubmit)                \
    X(QueueWriteBuffer) X(QueueWriteTexture) X(DeviceCreateBuffer) X(BufferRelease) X(BufferMapAsync) \
    X(BufferGetConstMappedRange) X(BufferUnmap) X(DeviceCreateTexture) X(TextureRelease)           \
    X(TextureCreateView) X(TextureViewRelease) X(DeviceCreateShaderModule) X(ShaderModuleRelease)                    \
    X(DeviceCreateBindGroupLayout) X(BindGroupLayoutRelease) X(DeviceCreatePipelineLayout) X(PipelineLayoutRelease)  \
    X(DeviceCreateComputePipeline) X(ComputePipelineRelease) X(DeviceCreateBindGroup) X(BindGroupRelease)            \
    X(DeviceCreateQuerySet) X(QuerySetRelease) X(DeviceCreateCommandEncoder)                      \
    X(CommandEncoderRelease) X(CommandEncoderBeginComputePass) X(CommandEncoderResolveQuerySet)                      \
    X(CommandEncoderCopyBufferToBuffer) X(CommandEncoderCopyTextureToBuffer) X(CommandEncoderFinish)                 \
    X(CommandBufferRelease) X(ComputePassEncoderSetPipeline) X(ComputePassEncoderSetBindGroup)                       \
    X(ComputePassEncoderDispatchWorkgroups) X(ComputePassEncoderDispatchWorkgroupsIndirect) X(ComputePassEncoderEnd) X(ComputePassEncoderRelease)

struct Wgpu {
#define RVK_WGPU_POINTER(name) decltype(&::wgpu##name) name = nullptr;
    RVK_WGPU_FUNCTIONS(RVK_WGPU_POINTER)
#undef RVK_WGPU_POINTER
    // wgpu-native >= v29.0.1.1 only (NULL before): shader modules without runtime checks
    decltype(&::wgpuDeviceCreateShaderModuleTrusted) DeviceCreateShaderModuleTrusted = nullptr;
    std::string path;  // the library that was loaded
};

// The loaded library, opened at the first call: the first of $RVK_WGPU_LIBRARY, libwgpu_native.so
// (and the wgpu wheel's libwgpu_native-release.so) beside librelax_vk_native, then on the loader's path.
// Throws Error(RVK_ERROR_DEVICE) naming what was tried when none loads or an entry point is missing.
const Wgpu& wgpu();

}  // namespace rvk
