#include "core/checkpoint/safetensors.h"

#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

size_t element_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

}  // namespace

std::string safetensors_header(const std::vector<TensorBlob>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned, as HF does
  const uint64_t length = text.size();
  return std::string(reinterpret_cast<const char*>(&length), 8) + text;
}

void write_safetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string out = safetensors_header(tensors, metadata);
  size_t bytes = 0;
  for (const auto& t : tensors)
    bytes += t.bytes;
  out.reserve(out.size() + bytes);
  for (const auto& t : tensors)
    out.append(static_cast<const char*>(t.data), t.bytes);
  write_file_atomic(path, out);
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : map_(path, {"weights", "check model.init_from"}) {
  if (map_.size() < 8) {
    throw UserError(fmt::format(
        "'{}' is not a usable safetensors file: shorter than its 8-byte header length", path));
  }
  parse(path);
}

void SafetensorsFile::parse(const std::string& path) {
  auto fail = [&](const std::string& why) {
    throw UserError(fmt::format("'{}' is not a usable safetensors file: {}", path, why));
  };
  const char* base = map_.data();
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, base, 8);
  if (header_bytes > map_.size() - 8)
    fail(fmt::format("header length {} exceeds the file", header_bytes));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(base + 8, base + 8 + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("bad JSON header: ") + e.what());
  }
  if (!header.is_object()) fail("the header is not a JSON object");
  const char* data = base + 8 + header_bytes;
  const size_t data_bytes = map_.size() - 8 - header_bytes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.items()) {
        if (v.is_string()) metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    try {
      TensorBlob blob{name, entry.at("dtype").get<std::string>(),
                      entry.at("shape").get<std::vector<int64_t>>(), nullptr, 0};
      auto offsets = entry.at("data_offsets").get<std::vector<size_t>>();
      const size_t size = element_size(blob.dtype);
      if (size == 0) fail(fmt::format("tensor '{}' has unknown dtype {}", name, blob.dtype));
      // Counted against what the file can hold at each step, so that no shape can overflow.
      size_t count = 1;
      for (int64_t d : blob.shape) {
        if (d < 0 || (d > 0 && count > data_bytes / size / static_cast<size_t>(d))) {
          fail(fmt::format("tensor '{}' has shape {}, more than the file holds", name,
                           entry.at("shape").dump()));
        }
        count *= static_cast<size_t>(d);
      }
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_bytes ||
          offsets[1] - offsets[0] != count * size) {
        fail(fmt::format("tensor '{}' has data offsets that do not fit its shape or the file",
                         name));
      }
      blob.data = data + offsets[0];
      blob.bytes = offsets[1] - offsets[0];
      tensors_.push_back(std::move(blob));
    } catch (const nlohmann::json::exception& e) {
      fail(fmt::format("tensor '{}' has a malformed entry ({})", name, e.what()));
    }
  }
}

}  // namespace kiln
