// The Vulkan drivers' own shader caches, pointed into relax_vk's cache folder.
//
// wgpu-native (v29) has no pipeline cache in its C API, so relax_vk cannot store compiled
// pipelines itself. NVIDIA's and Mesa's drivers keep disk caches of the pipelines they compile,
// configured by environment variables that they read when they load: the first Vulkan session of
// a process points them at cache_folder(CacheApi::Vulkan) (nvidia/ and mesa/ in it) before
// wgpu-native makes its instance, setting only variables the user has not set, and nothing when
// relax_vk's caching is off. What remains at a second start is wgpu-native translating the WGSL
// (naga) and the driver reading its cache.
#pragma once

#include <cstdint>
#include <string>

namespace rvk {

// Where each driver's cache went when the process's Vulkan instance was made.
struct DriverCaches {
    bool enabled = false;           // relax_vk's caching was on (cache_folder(CacheApi::Vulkan) not "")
    std::string nvidia, mesa;       // the driver's cache folder, or "" when it keeps none
    std::string nvidia_why, mesa_why;  // why it keeps none ("" when it keeps one)
};

// Sets the drivers' variables (see above); call once, before the Vulkan driver is loaded. (setenv:
// a host thread reading the environment at that very moment races with it, as with any setenv.)
DriverCaches point_driver_caches();

// rvk_session_program_origin of a Vulkan session on an adapter of `vendor_id` whose driver
// describes itself as `driver_info` (wgpu's AdapterInfo.description: "Mesa 22.3.6 (LLVM 15.0.6)",
// NVIDIA's version): "driver cache at FOLDER", or "source (...)" saying why there is none.
std::string vulkan_origin(const DriverCaches& caches, uint32_t vendor_id, const std::string& driver_info);

// Whether an OpenCL platform of this name (CL_PLATFORM_NAME) is pocl's, the CPU driver.
bool is_pocl(const std::string& platform_name);

// The folder where an OpenCL driver keeps the programs it compiles, when it keeps them itself:
// pocl ("Portable Computing Language", `platform_name`) caches each program it builds and each
// work-group function it compiles, keyed by source and options, in $POCL_CACHE_DIR, else
// $XDG_CACHE_HOME/pocl/kcache, else $HOME/.cache/pocl/kcache, unless POCL_KERNEL_CACHE is set to
// anything but 1. "" for every other driver, and for pocl with its cache off. A build from source
// through pocl's cache takes 0.06 s where asking it for CL_PROGRAM_BINARIES makes it compile every
// kernel to machine code (8 s for MobileNetV3's 60 kernels), so relax_vk's binary cache leaves
// such programs to the driver.
std::string opencl_driver_cache(const std::string& platform_name);

}  // namespace rvk
