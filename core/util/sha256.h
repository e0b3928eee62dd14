// SHA-256 (FIPS 180-4), to check that fetched files are byte for byte the ones Kiln pins. Written
// here rather than taken from OpenSSL so that kiln_base gains no dependency for one checksum.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// The digest of `data` as 64 lowercase hex digits, as sha256sum prints it.
std::string sha256_hex(std::string_view data);

}  // namespace kiln
