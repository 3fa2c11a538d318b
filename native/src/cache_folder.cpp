// See cache_folder.hpp; the Python side of the OpenCL rule is relax_vk/runtime/opencl/binary_cache.py's cache_folder.
#include "cache_folder.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace rvk {

namespace {

std::mutex configured_lock;
std::unique_ptr<std::string> configured;  // set_cache_folder's folder (null: the default rules)

}  // namespace

void set_cache_folder(const char* folder) {
    std::lock_guard<std::mutex> hold(configured_lock);
    configured.reset(folder ? new std::string(folder) : nullptr);
}

std::string cache_folder(CacheApi api) {
    const char* off = std::getenv("RELAX_VK_NO_CACHE");
    if (off && *off && std::string(off) != "0") return "";
    const char* sub = api == CacheApi::OpenCL ? "opencl" : "vulkan";
    auto within = [&](const std::string& chosen) { return chosen.empty() || api == CacheApi::OpenCL ? chosen : chosen + "/" + sub; };
    {
        std::lock_guard<std::mutex> hold(configured_lock);
        if (configured) return within(*configured);
    }
    const char* dir = std::getenv("RELAX_VK_CACHE_DIR");
    if (dir && *dir) return within(dir);
    const char* home = std::getenv("HOME");
    if (!home || !*home) return "";  // (an Android app: rvk_set_cache_dir with its cache directory)
    return std::string(home) + "/.cache/relax_vk/" + sub;
}

bool make_dirs(const std::string& path) {
    if (path.empty()) return false;
    struct stat st;
    if (stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
    size_t slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0 && !make_dirs(path.substr(0, slash))) return false;
    return mkdir(path.c_str(), 0777) == 0 || errno == EEXIST;
}

}  // namespace rvk
