// SHA-256 (FIPS 180-4), for the OpenCL program-binary cache's file names and checksums: the same
// digests as Python's hashlib, so this library and TVM's VM path (binary_cache.py) share one cache folder.
#pragma once

#include <cstddef>
#include <string>

namespace rvk {

// The lower-case hex SHA-256 of `size` bytes at `data` (hashlib.sha256(...).hexdigest()).
std::string sha256_hex(const void* data, size_t size);

inline std::string sha256_hex(const std::string& s) { return sha256_hex(s.data(), s.size()); }

}  // namespace rvk
