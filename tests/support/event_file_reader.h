// A reader of TensorBoard event files for the tests, written from the formats' published
// descriptions and sharing no code with Kiln's writer (core/store/tensorboard/event_file.h):
//   - TFRecord framing (tensorflow/core/lib/io/record_writer.cc, "TFRecords format details" in
//     TensorFlow's tf.data guide): uint64 length, uint32 masked CRC-32C of the length, the data,
//     uint32 masked CRC-32C of the data, little-endian; mask ((crc >> 15) | (crc << 17)) +
//     0xa282ead8;
//   - CRC-32C (RFC 3720 appendix B.4: the Castagnoli polynomial, reflected 0x82F63B78), bit by
//     bit here;
//   - protobuf's wire format (protobuf.dev/programming-guides/encoding): varint keys
//     (field << 3 | wire type), varints, fixed64, fixed32, length-delimited;
//   - Event (event.proto: wall_time 1 double, step 2 int64, file_version 3, summary 5), Summary
//     (summary.proto: value 1; Value: tag 1, simple_value 2 float, tensor 8, metadata 9;
//     SummaryMetadata: plugin_data 1 {plugin_name 1}, data_class 4), TensorProto (tensor.proto:
//     dtype 1, tensor_shape 2, string_val 8).
// A malformed file throws std::runtime_error saying where.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::testing {

inline uint32_t crc32c_bitwise(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

inline uint32_t tfrecord_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline uint64_t little_endian(const std::string& bytes, size_t at, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t scalar = 0;  // varint, fixed64 or fixed32 bits
  std::string bytes;    // length-delimited
};

inline std::vector<ProtoField> parse_proto(const std::string& data) {
  size_t at = 0;
  auto varint = [&] {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      if (at >= data.size() || shift > 63) throw std::runtime_error("protobuf: bad varint");
      const auto byte = static_cast<unsigned char>(data[at++]);
      value |= uint64_t{byte & 0x7fu} << shift;
      if (!(byte & 0x80)) return value;
    }
  };
  auto take = [&](uint64_t n) {
    if (n > data.size() - at) throw std::runtime_error("protobuf: field runs past the message");
    std::string out = data.substr(at, n);
    at += n;
    return out;
  };
  std::vector<ProtoField> fields;
  while (at < data.size()) {
    const uint64_t key = varint();
    ProtoField f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.wire == 0) {
      f.scalar = varint();
    } else if (f.wire == 1) {
      f.scalar = little_endian(take(8), 0, 8);
    } else if (f.wire == 5) {
      f.scalar = little_endian(take(4), 0, 4);
    } else if (f.wire == 2) {
      f.bytes = take(varint());
    } else {
      throw std::runtime_error("protobuf: wire type " + std::to_string(f.wire));
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

struct DecodedValue {
  std::string tag;
  std::optional<float> simple_value;
  std::string plugin_name;  // metadata.plugin_data.plugin_name
  uint64_t data_class = 0;
  uint64_t dtype = 0;  // tensor.dtype; 7 = DT_STRING
  bool has_shape = false;
  std::vector<std::string> string_val;
};

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<DecodedValue> values;
};

inline DecodedValue decode_value(const std::string& data) {
  DecodedValue v;
  for (const auto& f : parse_proto(data)) {
    if (f.number == 1 && f.wire == 2) v.tag = f.bytes;
    if (f.number == 2 && f.wire == 5) {
      const auto bits = static_cast<uint32_t>(f.scalar);
      float value;
      std::memcpy(&value, &bits, sizeof value);
      v.simple_value = value;
    }
    if (f.number == 8 && f.wire == 2) {
      for (const auto& t : parse_proto(f.bytes)) {
        if (t.number == 1 && t.wire == 0) v.dtype = t.scalar;
        if (t.number == 2 && t.wire == 2) v.has_shape = parse_proto(t.bytes).empty();  // rank 0
        if (t.number == 8 && t.wire == 2) v.string_val.push_back(t.bytes);
      }
    }
    if (f.number == 9 && f.wire == 2) {
      for (const auto& m : parse_proto(f.bytes)) {
        if (m.number == 4 && m.wire == 0) v.data_class = m.scalar;
        if (m.number != 1 || m.wire != 2) continue;
        for (const auto& p : parse_proto(m.bytes)) {
          if (p.number == 1 && p.wire == 2) v.plugin_name = p.bytes;
        }
      }
    }
  }
  return v;
}

inline DecodedEvent decode_event(const std::string& data) {
  DecodedEvent e;
  for (const auto& f : parse_proto(data)) {
    if (f.number == 1 && f.wire == 1) std::memcpy(&e.wall_time, &f.scalar, sizeof e.wall_time);
    if (f.number == 2 && f.wire == 0) e.step = static_cast<int64_t>(f.scalar);
    if (f.number == 3 && f.wire == 2) e.file_version = f.bytes;
    if (f.number == 5 && f.wire == 2) {
      for (const auto& s : parse_proto(f.bytes)) {
        if (s.number == 1 && s.wire == 2) e.values.push_back(decode_value(s.bytes));
      }
    }
  }
  return e;
}

// Every record of the file at `path`, each checked against both of its CRCs.
inline std::vector<DecodedEvent> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<DecodedEvent> events;
  size_t at = 0;
  while (at < file.size()) {
    if (file.size() - at < 12) throw std::runtime_error("a short record header in " + path);
    const uint64_t length = little_endian(file, at, 8);
    if (little_endian(file, at + 8, 4) != tfrecord_mask(crc32c_bitwise(file.substr(at, 8))))
      throw std::runtime_error("a length CRC fails in " + path);
    if (file.size() - at - 12 < length + 4) throw std::runtime_error("a short record in " + path);
    const std::string data = file.substr(at + 12, length);
    if (little_endian(file, at + 12 + length, 4) != tfrecord_mask(crc32c_bitwise(data)))
      throw std::runtime_error("a data CRC fails in " + path);
    events.push_back(decode_event(data));
    at += 12 + length + 4;
  }
  return events;
}

}  // namespace kiln::testing
