// See driver_caches.hpp.
#include "driver_caches.hpp"

#include <strings.h>

#include <cstdlib>
#include <cstring>

#include "cache_folder.hpp"

namespace rvk {

namespace {

constexpr uint32_t kNvidia = 0x10de;

const char* variable(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}

// Mesa's env_var_as_boolean: "1", "true", "y", "yes" (any case) are true
bool mesa_true(const char* v) {
    return v && (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "y") || !strcasecmp(v, "yes"));
}

void set_if_unset(const char* name, const std::string& value) { setenv(name, value.c_str(), 0); }

}  // namespace

DriverCaches point_driver_caches() {
    DriverCaches out;
    std::string folder = cache_folder(CacheApi::Vulkan);
    out.enabled = !folder.empty();

    // NVIDIA (OpenGL and Vulkan): __GL_SHADER_DISK_CACHE (0/1), _PATH, _SKIP_CLEANUP (no size cap)
    if (const char* on = variable("__GL_SHADER_DISK_CACHE"); on && !std::strcmp(on, "0")) {
        out.nvidia_why = "driver cache off: __GL_SHADER_DISK_CACHE=0";
    } else if (const char* path = variable("__GL_SHADER_DISK_CACHE_PATH")) {
        out.nvidia = path;  // the user's folder
    } else if (out.enabled) {
        std::string mine = folder + "/nvidia";
        if (make_dirs(mine)) {  // (the driver does not make missing parents)
            setenv("__GL_SHADER_DISK_CACHE_PATH", mine.c_str(), 1);
            set_if_unset("__GL_SHADER_DISK_CACHE", "1");
            set_if_unset("__GL_SHADER_DISK_CACHE_SKIP_CLEANUP", "1");
            out.nvidia = mine;
        } else {
            out.nvidia_why = "cache folder " + mine + " cannot be made";
        }
    }

    // Mesa (RADV, ANV, turnip, lavapipe, ...): MESA_SHADER_CACHE_DIR and _DISABLE (older names: MESA_GLSL_*)
    const char* mesa_off = variable("MESA_SHADER_CACHE_DISABLE");
    if (!mesa_off) mesa_off = variable("MESA_GLSL_CACHE_DISABLE");
    const char* mesa_dir = variable("MESA_SHADER_CACHE_DIR");
    if (!mesa_dir) mesa_dir = variable("MESA_GLSL_CACHE_DIR");
    if (mesa_true(mesa_off)) {
        out.mesa_why = "driver cache off: MESA_SHADER_CACHE_DISABLE";
    } else if (mesa_dir) {
        out.mesa = mesa_dir;
    } else if (out.enabled) {
        std::string mine = folder + "/mesa";
        if (make_dirs(mine)) {
            setenv("MESA_SHADER_CACHE_DIR", mine.c_str(), 1);
            if (!mesa_off) setenv("MESA_SHADER_CACHE_DISABLE", "false", 1);  // (on where a build makes it off by default)
            out.mesa = mine;
        } else {
            out.mesa_why = "cache folder " + mine + " cannot be made";
        }
    }
    return out;
}

std::string vulkan_origin(const DriverCaches& caches, uint32_t vendor_id, const std::string& driver_info) {
    if (!caches.enabled) return "source (cache off)";
    bool nvidia = vendor_id == kNvidia, mesa = driver_info.compare(0, 5, "Mesa ") == 0;
    if (!nvidia && !mesa) return "source (no driver cache known for " + (driver_info.empty() ? std::string("this driver") : driver_info) + ")";
    const std::string& folder = nvidia ? caches.nvidia : caches.mesa;
    const std::string& why = nvidia ? caches.nvidia_why : caches.mesa_why;
    if (folder.empty()) return "source (" + why + ")";
    return "driver cache at " + folder;
}

bool is_pocl(const std::string& platform_name) { return platform_name.find("Portable Computing Language") != std::string::npos; }

std::string opencl_driver_cache(const std::string& platform_name) {
    if (!is_pocl(platform_name)) return "";
    const char* on = variable("POCL_KERNEL_CACHE");
    if (on && on[0] != '1') return "";  // (off, or a value relax_vk cannot read as on: its own cache then)
    if (const char* dir = variable("POCL_CACHE_DIR")) return dir;
    if (const char* xdg = variable("XDG_CACHE_HOME")) return std::string(xdg) + "/pocl/kcache";
    if (const char* home = variable("HOME")) return std::string(home) + "/.cache/pocl/kcache";
    return "/tmp/pocl/kcache";
}

}  // namespace rvk
