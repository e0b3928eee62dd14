// SHA-256, to check that fetched files are byte for byte the ones Kiln pins and to fingerprint the
// files a run reads: OpenSSL's libcrypto computes it.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// The digest of `data` as 64 lowercase hex digits, as sha256sum prints it.
std::string sha256_hex(std::string_view data);

}  // namespace kiln
