// libFuzzer target: one line of fine-tuning data as the sft data source parses it
// (core/data/chat_records.h: prompt/response/history or messages, as JSON). Built and run by
// tools/fuzz.sh with AddressSanitizer and UBSan. A BadRecord is the expected outcome of a bad
// line, which the reader turns into FILE:LINE: why (or skips); anything else (another exception
// type, nlohmann's own escaping the reader, a crash, a sanitizer report, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/data/chat_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  try {
    kiln::parse_chat_record(line);
  } catch (const kiln::BadRecord&) {
  }
  return 0;
}
