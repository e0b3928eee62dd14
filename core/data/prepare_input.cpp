#include "core/data/prepare_input.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

constexpr size_t kReadBytes = 1 << 20;
// Past this many piece_bytes without a line start, a piece may end before a space instead.
constexpr size_t kLineStartReach = 4;

bool space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// A cut before text[at] that no token can span: right after a newline and before a non-space
// character, where neither a byte-level BPE pre-token nor a character token continues.
bool line_start(const std::string& text, size_t at) {
  return text[at - 1] == '\n' && !space(text[at]);
}

// Before a single space between two non-spaces: a byte-level BPE pre-token (GPT-2's, Llama 3's,
// Qwen's) starts at such a space, so this cut is as safe; for text with few line starts (text8).
bool word_start(const std::string& text, size_t at) {
  return text[at] == ' ' && at + 1 < text.size() && !space(text[at - 1]) && !space(text[at + 1]);
}

// A JSON Lines record's document: its `field`, a string.
std::string document_of(const std::string& line, const std::string& where,
                        const std::string& field) {
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(
        fmt::format("{}: {}: fix the line, or leave out --field to read the file as text", where,
                    json_line_problem(line, e.byte)));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where + ": not readable JSON: " + json_reason(e.what()));
  }
  if (!record.is_object() || !record.contains(field) || !record[field].is_string()) {
    throw UserError(fmt::format(
        "{}: no string field \"{}\": with --field {} every line is a JSON object holding its "
        "document's text there",
        where, field, field));
  }
  return record[field].get<std::string>();
}

UserError unreadable(const std::string& path, int error) {
  return UserError(
      fmt::format("cannot read text file '{}': {}: check the path", path, std::strerror(error)));
}

}  // namespace

std::vector<std::string> prepare_input_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& input : inputs) {
    if (input.find_first_of("*?[") == std::string::npos) {
      files.push_back(input);
      continue;
    }
    const std::vector<std::string> matched = glob_files(input);
    if (matched.empty()) {
      throw UserError(fmt::format("'{}' matches no file: fix the pattern", input));
    }
    files.insert(files.end(), matched.begin(), matched.end());
  }
  for (const auto& path : files) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      throw UserError(fmt::format("'{}' is a directory: give the text files in it (e.g. {}/*.txt)",
                                  path, path));
    }
  }
  return files;
}

PrepareInput::PrepareInput(std::vector<std::string> files, std::string field, InputPosition start,
                           int64_t piece_bytes)
    : files_(std::move(files)), field_(std::move(field)), at_(start), piece_bytes_(piece_bytes) {
  for (const auto& path : files_) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw unreadable(path, ec.value());
    sizes_.push_back(static_cast<int64_t>(size));
    total_ += static_cast<int64_t>(size);
  }
}

int64_t PrepareInput::bytes_done() const {
  int64_t done = at_.offset;
  for (int64_t f = 0; f < std::min<int64_t>(at_.file, static_cast<int64_t>(sizes_.size())); ++f)
    done += sizes_[static_cast<size_t>(f)];
  return done;
}

bool PrepareInput::open_file() {
  if (at_.file >= static_cast<int64_t>(files_.size())) return false;
  const std::string& path = files_[static_cast<size_t>(at_.file)];
  in_ = std::ifstream(path, std::ios::binary);
  if (!in_) throw unreadable(path, errno);
  in_.seekg(at_.offset);
  pending_.clear();
  open_ = true;
  return true;
}

bool PrepareInput::next(EncodeUnit& unit) {
  unit.pieces.clear();
  unit.starts_document.clear();
  for (;;) {
    if (!open_ && !open_file()) return false;
    unit.origin = fmt::format("{}, line {}", files_[static_cast<size_t>(at_.file)], at_.line);
    if (field_.empty() ? next_text(unit) : next_json_lines(unit)) return true;
    in_.close();
    open_ = false;
    at_ = InputPosition{at_.file + 1, 0, 1};
  }
}

bool PrepareInput::fill(size_t wanted) {
  while (pending_.size() < wanted) {
    const size_t had = pending_.size();
    pending_.resize(std::max(wanted, had + kReadBytes));
    in_.read(pending_.data() + had, static_cast<std::streamsize>(pending_.size() - had));
    pending_.resize(had + static_cast<size_t>(in_.gcount()));
    if (in_.bad()) throw unreadable(files_[static_cast<size_t>(at_.file)], errno);
    if (pending_.size() == had) return false;
  }
  return true;
}

bool PrepareInput::next_text(EncodeUnit& unit) {
  const auto target = static_cast<size_t>(piece_bytes_);
  bool more = fill(target + 1);
  if (pending_.empty()) return false;
  // The first line start from `target` on, or past kLineStartReach x target, the first of either.
  auto cut_at = [&](size_t at) {
    return line_start(pending_, at) || (at >= kLineStartReach * target && word_start(pending_, at));
  };
  size_t cut = std::min(pending_.size(), target);
  for (;;) {
    while (cut < pending_.size() && !cut_at(cut))
      ++cut;
    if (cut < pending_.size() || !more) break;
    // No cut yet: read on, and look at the last byte again (a word start needs the byte after).
    more = fill(pending_.size() + kReadBytes);
    cut = std::max(target, cut - 1);
  }
  unit.pieces.push_back(pending_.substr(0, cut));
  unit.starts_document.push_back(at_.offset == 0);
  at_.line +=
      std::count(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(cut), '\n');
  at_.offset += static_cast<int64_t>(cut);
  pending_.erase(0, cut);
  return true;
}

bool PrepareInput::next_json_lines(EncodeUnit& unit) {
  const std::string& path = files_[static_cast<size_t>(at_.file)];
  std::string line;
  int64_t bytes = 0;
  while (bytes < piece_bytes_ && std::getline(in_, line)) {
    const int64_t number = at_.line++;
    at_.offset += static_cast<int64_t>(line.size()) + (in_.eof() ? 0 : 1);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    unit.pieces.push_back(document_of(line, fmt::format("{}:{}", path, number), field_));
    unit.starts_document.push_back(true);
    bytes += static_cast<int64_t>(unit.pieces.back().size());
  }
  if (in_.bad()) throw unreadable(path, errno);
  return !unit.pieces.empty();
}

}  // namespace kiln
