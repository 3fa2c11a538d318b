#include "wgpu_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "program.hpp"

namespace rvk {
namespace {

const char* const kNames[] = {"libwgpu_native.so", "libwgpu_native-release.so"};

// the folder librelax_vk_native was loaded from ("" if unknown)
std::string own_folder() {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&own_folder), &info) || !info.dli_fname) return "";
    std::string path = info.dli_fname;
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

struct Loaded {
    Wgpu table;
    std::string error;  // why no library is usable ("" once one is)
};

Loaded load() {
    Loaded out;
    std::vector<std::string> candidates;
    const char* env = std::getenv("RVK_WGPU_LIBRARY");
    if (env && *env) {
        candidates.push_back(env);  // the user's choice: no other library in its place
    } else {
        std::string here = own_folder();  // (where the build and pip put the wgpu wheel's library)
        if (!here.empty())
            for (const char* name : kNames) candidates.push_back(here + name);
        for (const char* name : kNames) candidates.push_back(name);
    }
    std::string tried;
    void* lib = nullptr;
    for (const std::string& c : candidates) {
        lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
        tried += (tried.empty() ? "" : ", ") + c;
        if (lib) {
            out.table.path = c;
            break;
        }
    }
    if (!lib) {
        out.error = "no wgpu-native library could be loaded (tried " + tried +
                    "; rebuild with the wgpu wheel installed (make setup, pip install .), or set RVK_WGPU_LIBRARY to a wgpu-native library: "
                    "the wgpu wheel's wgpu/resources/libwgpu_native-release.so or a wgpu-native release's libwgpu_native.so)";
        return out;
    }
#define RVK_WGPU_RESOLVE(name)                                                                                             \
    out.table.name = reinterpret_cast<decltype(out.table.name)>(dlsym(lib, "wgpu" #name));                             \
    if (!out.table.name) {                                                                                              \
        out.error = out.table.path + " lacks wgpu" #name " (wgpu-native v29 or newer is needed)";                         \
        return out;                                                                                                     \
    }
    RVK_WGPU_FUNCTIONS(RVK_WGPU_RESOLVE)
#undef RVK_WGPU_RESOLVE
    out.table.DeviceCreateShaderModuleTrusted =
        reinterpret_cast<decltype(out.table.DeviceCreateShaderModuleTrusted)>(dlsym(lib, "wgpuDeviceCreateShaderModuleTrusted"));
    return out;  // (the library stays loaded for the process)
}

}  // namespace

const Wgpu& wgpu() {
    static Loaded loaded;
    static std::once_flag once;
    std::call_once(once, [] { loaded = load(); });
    if (!loaded.error.empty()) throw Error(RVK_ERROR_DEVICE, loaded.error);
    return loaded.table;
}

}  // namespace rvk
