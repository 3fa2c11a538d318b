// The OpenCL program-binary cache's files: relax_vk/runtime/opencl/binary_cache.py's format, byte
// for byte, so that this library and TVM's VM path (relax_vk.load_vm) read each other's binaries from one folder.
//
//   file name   the SHA-256 of json.dumps(key, sort_keys=True) + ".bin"; key: platform (name and
//               version), device, vendor, version, driver, options, source_sha256
//   contents    "relax_vk opencl binary 1\n", a JSON line {"binary_bytes", "binary_sha256",
//               "kernels", "key"}, then the binary
//
// A file is used only when its key equals the wanted key and its binary matches its size and
// SHA-256; writes go to a temporary file renamed over the target, so a reader never sees half a
// file. Failing to write (a read-only or full folder) costs the next load a build, nothing else.
#pragma once

#include "cache_folder.hpp"  // the folder: cache_folder(CacheApi::OpenCL)

#include <map>
#include <string>
#include <vector>

namespace rvk {

using CacheKey = std::map<std::string, std::string>;  // sorted, as json.dumps(sort_keys=True)

// json.dumps(key, sort_keys=True) (ensure_ascii escapes) and the file of `key` in `folder`.
std::string key_json(const CacheKey& key);
std::string cache_path(const std::string& folder, const CacheKey& key);

// The verified binary and kernel names of the file at `path` for `key`; false with `why` ("" when
// there is no file) otherwise.
bool read_verified(const std::string& path, const CacheKey& key, std::string& binary, std::vector<std::string>& kernels, std::string& why);

// Stores `binary` for `key` at `path`, atomically; errors are ignored (see above).
void write_atomic(const std::string& path, const CacheKey& key, const std::string& binary, const std::vector<std::string>& kernels);

}  // namespace rvk
