#include "core/util/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

#include <fmt/format.h>

namespace kiln {

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // EVP_Digest fails only when libcrypto cannot allocate or has no SHA-256 (a broken install).
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("libcrypto could not compute a SHA-256 digest");
  }
  std::string hex;
  hex.reserve(2 * size);
  for (unsigned int i = 0; i < size; ++i)
    hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace kiln
