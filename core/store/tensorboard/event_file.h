// TensorBoard's event files, written without TensorFlow or a protobuf library: the records
// TensorBoard reads (tensorflow/core/util/event.proto, framework/summary.proto and tensor.proto),
// encoded by hand, in TFRecord framing. No LibTorch.
//
// A file is a sequence of records, each
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked
//   CRC-32C of data
// where the mask is ((crc >> 15) | (crc << 17)) + 0xa282ead8 and CRC-32C is the Castagnoli CRC
// (reflected polynomial 0x82F63B78). Each record's data is one serialized Event: the first holds
// file_version "brain.Event:2", the others a Summary of scalars (simple_value) or a text summary
// (the text plugin's tensor of one string).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// CRC-32C of `bytes`, and the masked form TFRecord stores.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// `data` framed as one TFRecord.
std::string tfrecord(std::string_view data);

struct ScalarValue {
  std::string tag;
  double value = 0;  // written as float32, the width of Summary.Value.simple_value
};

// Serialized Events (wall_time in seconds since the Unix epoch).
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const std::vector<ScalarValue>& values);
std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const std::string& text);

// "events.out.tfevents.<unix seconds>.<host>.kiln": TensorBoard reads the files of a run's folder
// in name order, so a later file (a resumed run's) sorts after an earlier one.
std::string event_file_name(int64_t unix_seconds, const std::string& host);
// A path in `folder` for a new event file written now, named with the current time, or with one
// second past the latest event file already there when that is later: two files never share a
// name, and the newer one sorts last even when both were made within one second.
std::string new_event_file_path(const std::string& folder, const std::string& host);
// Whether `folder` holds event files already (files whose name contains "tfevents", as
// TensorBoard recognises them).
bool holds_event_files(const std::string& folder);

}  // namespace kiln
