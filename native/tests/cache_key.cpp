// rvk-cache-key: the program-binary cache's key JSON and SHA-256 for strings read from stdin (one
// hex-encoded UTF-8 string per line), printed as "key_json<TAB>sha256" lines, so that the tests can
// hold them to Python's json.dumps(sort_keys=True) and hashlib (tests/runtime/native/test_binary_cache.py).
#include <iostream>
#include <string>

#include "binary_cache.hpp"
#include "sha256.hpp"

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::string s;
        for (size_t i = 0; i + 1 < line.size(); i += 2) s += static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16));
        std::cout << rvk::key_json({{"device", s}, {"options", ""}}) << "\t" << rvk::sha256_hex(s) << "\n";
    }
    return 0;
}
