// Where relax_vk keeps what makes a second start fast, for every backend: one rule for the folder
// (rvk_set_cache_dir, $RELAX_VK_CACHE_DIR, $HOME/.cache/relax_vk) and one switch ($RELAX_VK_NO_CACHE).
#pragma once

#include <string>

namespace rvk {

enum class CacheApi { OpenCL, Vulkan };

// The process-wide folder of rvk_set_cache_dir: NULL restores the default rules, "" turns caching off.
void set_cache_folder(const char* folder);

// The folder `api`'s cache lives in, or "" when caching is off. The chosen folder is the one set by
// set_cache_folder, else $RELAX_VK_CACHE_DIR: OpenCL's program binaries lie in it directly (the
// rule of relax_vk/runtime/opencl/binary_cache.py, so TVM's VM path shares the files), Vulkan's driver caches in its "vulkan"
// subfolder. Else $HOME/.cache/relax_vk/opencl and $HOME/.cache/relax_vk/vulkan ("" without $HOME).
// $RELAX_VK_NO_CACHE (not "" or "0") turns caching off whatever was set, as in Python.
std::string cache_folder(CacheApi api);

// Creates `path` and its missing parents; true when it is a folder afterwards.
bool make_dirs(const std::string& path);

}  // namespace rvk
