// See binary_cache.hpp; the Python side is relax_vk/runtime/opencl/binary_cache.py.
#include "binary_cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cache_folder.hpp"
#include "json.hpp"
#include "sha256.hpp"

namespace rvk {

namespace {

const char kMagic[] = "relax_vk opencl binary 1\n";

// Python's json string encoding with ensure_ascii=True: \" \\ \n \r \t \b \f, other bytes outside
// ' '..'~' as \u00xx / \uxxxx (UTF-16 surrogate pairs past the BMP); an invalid UTF-8 byte as U+FFFD.
std::string json_string(const std::string& s) {
    std::string out = "\"";
    char buf[16];
    auto unit = [&](unsigned u) {
        std::snprintf(buf, sizeof buf, "\\u%04x", u);
        out += buf;
    };
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
            out += '\\', out += static_cast<char>(c), ++i;
        } else if (c == '\n') {
            out += "\\n", ++i;
        } else if (c == '\r') {
            out += "\\r", ++i;
        } else if (c == '\t') {
            out += "\\t", ++i;
        } else if (c == '\b') {
            out += "\\b", ++i;
        } else if (c == '\f') {
            out += "\\f", ++i;
        } else if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c), ++i;
        } else if (c < 0x80) {
            unit(c), ++i;
        } else {  // a UTF-8 sequence
            int n = c >= 0xf0 && c < 0xf5 ? 3 : c >= 0xe0 && c < 0xf0 ? 2 : c >= 0xc2 && c < 0xe0 ? 1 : -1;
            unsigned cp = n == 3 ? c & 0x07u : n == 2 ? c & 0x0fu : c & 0x1fu;
            bool ok = n > 0;
            for (int k = 1; ok && k <= n; ++k) {
                if (i + static_cast<size_t>(k) >= s.size()) {
                    ok = false;
                    break;
                }
                unsigned char d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
                if ((d & 0xc0) != 0x80) ok = false;
                cp = (cp << 6) | (d & 0x3fu);
            }
            if (!ok || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)) {
                unit(0xfffd), ++i;
                continue;
            }
            if (cp >= 0x10000) {
                cp -= 0x10000;
                unit(0xd800 + (cp >> 10)), unit(0xdc00 + (cp & 0x3ff));
            } else {
                unit(cp);
            }
            i += static_cast<size_t>(n) + 1;
        }
    }
    return out + "\"";
}

}  // namespace

std::string key_json(const CacheKey& key) {
    std::string out = "{";
    for (const auto& [k, v] : key) out += (out.size() > 1 ? ", " : "") + json_string(k) + ": " + json_string(v);
    return out + "}";
}

std::string cache_path(const std::string& folder, const CacheKey& key) { return folder + "/" + sha256_hex(key_json(key)) + ".bin"; }

bool read_verified(const std::string& path, const CacheKey& key, std::string& binary, std::vector<std::string>& kernels, std::string& why) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        why = "";
        return false;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    std::string data = ss.str();
    size_t magic = sizeof kMagic - 1;
    if (data.compare(0, magic, kMagic) != 0) {
        why = "not a relax_vk binary file";
        return false;
    }
    size_t eol = data.find('\n', magic);
    Json record;
    try {
        if (eol != std::string::npos) record = Json::parse(data.substr(magic, eol - magic));
    } catch (const JsonError&) {
    }
    if (!record.is_object()) {
        why = "malformed header";
        return false;
    }
    const Json* k = record.get("key");
    bool same = k && k->is_object() && k->members().size() == key.size();
    for (const auto& [name, value] : key) {
        const Json* v = same ? k->get(name) : nullptr;
        same = v && v->is_string() && v->as_string() == value;
    }
    if (!same) {
        why = "key differs (another source, device or driver)";
        return false;
    }
    binary = data.substr(eol + 1);
    const Json* sha = record.get("binary_sha256");
    const Json* bytes = record.get("binary_bytes");
    if (!sha || !sha->is_string() || sha->as_string() != sha256_hex(binary) || !bytes || !bytes->is_int() ||
        bytes->as_int() != static_cast<int64_t>(binary.size())) {
        why = "binary does not match its checksum";
        binary.clear();
        return false;
    }
    kernels.clear();
    if (const Json* names = record.get("kernels"); names && names->is_array())
        for (const Json& n : names->items())
            if (n.is_string()) kernels.push_back(n.as_string());
    return true;
}

void write_atomic(const std::string& path, const CacheKey& key, const std::string& binary, const std::vector<std::string>& kernels) {
    size_t slash = path.find_last_of('/');
    std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
    if (!make_dirs(folder)) return;
    std::string names = "[";
    for (const std::string& n : kernels) names += (names.size() > 1 ? ", " : "") + json_string(n);
    names += "]";
    std::string header = "{\"binary_bytes\": " + std::to_string(binary.size()) + ", \"binary_sha256\": " + json_string(sha256_hex(binary)) +
                         ", \"kernels\": " + names + ", \"key\": " + key_json(key) + "}\n";
    std::string tmp = folder + "/.tmp-XXXXXX";
    int fd = mkstemp(&tmp[0]);
    if (fd < 0) return;
    bool ok = true;
    const std::string magic = kMagic;
    const std::string* parts[] = {&magic, &header, &binary};
    for (const std::string* part : parts) {
        const char* p = part->data();
        size_t n = part->size();
        while (ok && n) {
            ssize_t w = ::write(fd, p, n);
            if (w < 0 && errno == EINTR) continue;
            ok = w > 0;
            if (ok) p += w, n -= static_cast<size_t>(w);
        }
    }
    ok = ::close(fd) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace rvk
