#include "core/store/tensorboard/event_file.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace kiln {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEventFilePrefix = "events.out.tfevents.";

// Protobuf's wire format (protobuf.dev/programming-guides/encoding): each field a key
// (field number << 3 | wire type), then its value.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_little_endian(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out += static_cast<char>((bits >> (8 * i)) & 0xff);
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (uint64_t{field} << 3) | type);
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits, 4);
}

void put_int(std::string& out, uint32_t field, int64_t value) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(value));
}

// Field numbers of the messages written here.
namespace event {
constexpr uint32_t kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
}
namespace summary {
constexpr uint32_t kValue = 1;
}
namespace value {
constexpr uint32_t kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9;
}
namespace metadata {
constexpr uint32_t kPluginData = 1, kDataClass = 4;
constexpr int64_t kDataClassTensor = 2;
}  // namespace metadata
namespace plugin_data {
constexpr uint32_t kPluginName = 1;
}
namespace tensor {
constexpr uint32_t kDtype = 1, kTensorShape = 2, kStringVal = 8;
constexpr int64_t kDtString = 7;
}  // namespace tensor

// An Event with its time and step (left out at 0, as proto3 writes a default) and `payload`,
// the fields that follow them.
std::string event_with(double wall_time, int64_t step, const std::string& payload) {
  std::string out;
  put_double(out, event::kWallTime, wall_time);
  if (step != 0) put_int(out, event::kStep, step);
  return out + payload;
}

std::string summary_field(const std::vector<std::string>& values) {
  std::string summary;
  for (const auto& v : values)
    put_bytes(summary, summary::kValue, v);
  std::string out;
  put_bytes(out, event::kSummary, summary);
  return out;
}

const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit)
        crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
      t[i] = crc;
    }
    return t;
  }();
  return table;
}

// The seconds of an event file name Kiln or TensorFlow wrote, 0 for any other name.
int64_t seconds_in_name(const std::string& name) {
  if (name.rfind(kEventFilePrefix, 0) != 0) return 0;
  int64_t seconds = 0;
  for (size_t i = kEventFilePrefix.size(); i < name.size() && name[i] >= '0' && name[i] <= '9';
       ++i) {
    if (seconds > (int64_t{1} << 40)) return 0;  // not a time
    seconds = seconds * 10 + (name[i] - '0');
  }
  return seconds;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  const auto& table = crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes)
    crc = (crc >> 8) ^ table[(crc ^ c) & 0xff];
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string length;
  put_little_endian(length, data.size(), 8);
  std::string out = length;
  put_little_endian(out, masked_crc32c(length), 4);
  out.append(data);
  put_little_endian(out, masked_crc32c(data), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string version;
  put_bytes(version, event::kFileVersion, "brain.Event:2");
  return event_with(wall_time, 0, version);
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<ScalarValue>& values) {
  std::vector<std::string> encoded;
  for (const auto& v : values) {
    std::string one;
    put_bytes(one, value::kTag, v.tag);
    put_float(one, value::kSimpleValue, static_cast<float>(v.value));
    encoded.push_back(std::move(one));
  }
  return event_with(wall_time, step, summary_field(encoded));
}

// As TensorBoard's own text summary writes it: a scalar string tensor, marked for the text plugin.
std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text) {
  std::string plugin;
  put_bytes(plugin, plugin_data::kPluginName, "text");
  std::string meta;
  put_bytes(meta, metadata::kPluginData, plugin);
  put_int(meta, metadata::kDataClass, metadata::kDataClassTensor);
  std::string tensor_proto;
  put_int(tensor_proto, tensor::kDtype, tensor::kDtString);
  put_bytes(tensor_proto, tensor::kTensorShape, "");  // rank 0
  put_bytes(tensor_proto, tensor::kStringVal, text);
  std::string one;
  put_bytes(one, value::kTag, tag);
  put_bytes(one, value::kTensor, tensor_proto);
  put_bytes(one, value::kMetadata, meta);
  return event_with(wall_time, step, summary_field({one}));
}

std::string event_file_name(int64_t unix_seconds, const std::string& host) {
  return fmt::format("{}{}.{}.kiln", kEventFilePrefix, unix_seconds, host);
}

std::string new_event_file_path(const std::string& folder, const std::string& host) {
  int64_t seconds = static_cast<int64_t>(std::time(nullptr));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    seconds = std::max(seconds, seconds_in_name(entry.path().filename().string()) + 1);
  }
  return (fs::path(folder) / event_file_name(seconds, host)).string();
}

bool holds_event_files(const std::string& folder) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (entry.path().filename().string().find("tfevents") != std::string::npos) return true;
  }
  return false;
}

}  // namespace kiln
