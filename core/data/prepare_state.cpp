#include "core/data/prepare_state.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr const char* kState = "state.json";

// A file as a resume must find it again: its size and modification time.
nlohmann::json stamp(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto time = fs::last_write_time(path, ec);
  return {path, ec ? -1 : static_cast<int64_t>(size),
          ec ? 0 : static_cast<int64_t>(time.time_since_epoch().count())};
}

// A stamped file as a reader knows it: "'corpus.txt' (1,204 bytes)".
std::string stamped_file(const nlohmann::json& stamp) {
  if (!stamp.is_array() || stamp.size() != 3) return stamp.dump();
  return fmt::format("'{}' ({} bytes)", stamp[0].get<std::string>(), stamp[1].get<int64_t>());
}

// What changed between a file's stamp then and now, in words.
std::string file_change(const nlohmann::json& then, const nlohmann::json& now) {
  if (then == now) return "";
  if (then.is_null() || now.is_null()) {
    return fmt::format("{} then, {} now", then.is_null() ? "none" : stamped_file(then),
                       now.is_null() ? "none" : stamped_file(now));
  }
  if (!then.is_array() || !now.is_array() || then.size() != 3 || now.size() != 3 ||
      then[0] != now[0]) {
    return fmt::format("{} then, {} now", stamped_file(then), stamped_file(now));
  }
  if (then[1] != now[1]) {
    return fmt::format("'{}' was {} bytes and is {} now", then[0].get<std::string>(),
                       then[1].get<int64_t>(), now[1].get<int64_t>());
  }
  return fmt::format("'{}' was modified since (same size, another modification time)",
                     then[0].get<std::string>());
}

// Why a fingerprint's `key` differs, in words: which input changed and how, or the two values.
std::string fingerprint_change(const std::string& key, const nlohmann::json& then,
                               const nlohmann::json& now) {
  if (key == "tokenizer_file") return "the tokenizer file: " + file_change(then, now);
  if (key != "inputs" || !then.is_array() || !now.is_array()) {
    return fmt::format("{}: {} then, {} now", key, then.dump(), now.dump());
  }
  if (then.size() != now.size()) {
    return fmt::format("{} input file(s) then, {} now", then.size(), now.size());
  }
  for (size_t i = 0; i < then.size(); ++i) {
    const std::string change = file_change(then[i], now[i]);
    if (!change.empty()) return "input " + change;
  }
  return "the inputs";
}

}  // namespace

nlohmann::json prepare_fingerprint(const PrepareOptions& options,
                                   const std::vector<std::string>& files) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& path : files)
    inputs.push_back(stamp(path));
  return {{"inputs", inputs},
          {"field", options.field},
          {"tokenizer", options.tokenizer},
          {"tokenizer_file",
           options.tokenizer_file.empty() ? nlohmann::json() : stamp(options.tokenizer_file)},
          {"piece_bytes", options.piece_bytes}};
}

void save_prepare_state(const std::string& staging, const nlohmann::json& print,
                        const EncodeState& s) {
  const nlohmann::json state = {{"fingerprint", print},  {"file", s.at.file},
                                {"offset", s.at.offset}, {"line", s.at.line},
                                {"tokens", s.tokens},    {"text_bytes", s.text_bytes},
                                {"encoded", s.encoded}};
  write_file_atomic(staging + "/" + kState, state.dump() + "\n");
}

// The state of the interrupted prepare in `staging`, for --resume.
EncodeState load_prepare_state(const std::string& staging, const nlohmann::json& print) {
  const std::string path = staging + "/" + kState;
  const std::string restart = "run without --resume to start over";
  if (!fs::exists(path)) {
    throw UserError(
        fmt::format("--resume: {}/ holds no interrupted prepare (no {}): run without --resume",
                    staging, kState));
  }
  nlohmann::json state;
  try {
    std::ifstream in(path);
    state = nlohmann::json::parse(in);
    for (const auto& [key, value] : print.items()) {
      if (state.at("fingerprint").at(key) != value) {
        throw UserError(fmt::format(
            "--resume: the interrupted prepare in {}/ read other inputs: {}: {}", staging,
            fingerprint_change(key, state.at("fingerprint").at(key), value), restart));
      }
    }
    EncodeState s;
    s.at = {state.at("file").get<int64_t>(), state.at("offset").get<int64_t>(),
            state.at("line").get<int64_t>()};
    s.tokens = state.at("tokens").get<int64_t>();
    s.text_bytes = state.at("text_bytes").get<int64_t>();
    s.encoded = state.at("encoded").get<bool>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(
        fmt::format("--resume: {} is damaged ({}): {}", path, json_reason(e.what()), restart));
  }
}

}  // namespace kiln
