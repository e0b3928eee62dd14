#include "core/data/prepare.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/data/shard.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

constexpr size_t kChunkBytes = 1 << 20;

// The documents of a JSON Lines file: each line's `field`, a string (blank lines are skipped).
void read_json_lines(std::ifstream& in, const std::string& path, const std::string& field,
                     std::vector<std::string>& documents) {
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, number);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw UserError(fmt::format(
          "{}: not JSON (a syntax error at byte {}): fix the line, or leave out --field to read "
          "the file as text",
          where, e.byte));
    } catch (const nlohmann::json::exception& e) {
      throw UserError(where + ": not readable JSON: " + json_reason(e.what()));
    }
    if (!record.is_object() || !record.contains(field) || !record[field].is_string()) {
      throw UserError(fmt::format(
          "{}: no string field \"{}\": with --field {} every line is a JSON object holding its "
          "document's text there",
          where, field, field));
    }
    documents.push_back(record[field].get<std::string>());
  }
}

// The inputs' files: each as given, or a glob's matches in sorted order.
std::vector<std::string> input_files(const std::vector<std::string>& inputs) {
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
  return files;
}

std::vector<std::string> read_documents(const std::vector<std::string>& inputs,
                                        const std::string& field) {
  std::vector<std::string> documents;
  size_t total = 0;
  for (const auto& path : input_files(inputs)) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      throw UserError(fmt::format("'{}' is a directory: give the text files in it (e.g. {}/*.txt)",
                                  path, path));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      throw UserError(fmt::format("cannot read text file '{}': {}: check the path", path,
                                  std::strerror(errno)));
    }
    const size_t before = documents.size();
    if (field.empty()) {
      std::stringstream text;
      text << in.rdbuf();
      documents.push_back(text.str());
    } else {
      read_json_lines(in, path, field, documents);
    }
    for (size_t d = before; d < documents.size(); ++d)
      total += documents[d].size();
  }
  if (total == 0) throw UserError("the input text is empty: nothing to tokenize");
  return documents;
}

// Cuts a document into pieces of about kChunkBytes that encode independently: each cut falls
// right after a newline and before a non-space character, where no byte-level BPE pre-token
// (nor any character token) can span the cut.
std::vector<std::string_view> chunks_of(const std::string& text) {
  std::vector<std::string_view> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t cut = std::min(text.size(), begin + kChunkBytes);
    while (cut < text.size() &&
           !(text[cut - 1] == '\n' && !std::isspace(static_cast<unsigned char>(text[cut])))) {
      ++cut;
    }
    out.emplace_back(text.data() + begin, cut - begin);
    begin = cut;
  }
  return out;
}

// Encodes every chunk on all cores; the result keeps the chunks' order.
std::vector<std::vector<uint32_t>> encode_parallel(
    const Tokenizer& tokenizer, const std::vector<std::string_view>& chunks,
    const std::function<void(const std::string&)>& progress) {
  std::vector<std::vector<uint32_t>> encoded(chunks.size());
  std::atomic<size_t> next{0}, done{0};
  std::exception_ptr failure;
  std::mutex mutex;
  auto work = [&] {
    for (size_t i = next++; i < chunks.size(); i = next++) {
      try {
        encoded[i] = tokenizer.encode(std::string(chunks[i]));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next = chunks.size();
      }
      const size_t finished = ++done;
      if (chunks.size() >= 10 && finished % (chunks.size() / 10) == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        progress(fmt::format("encoded {}% ({} of {} chunks)", 100 * finished / chunks.size(),
                             finished, chunks.size()));
      }
    }
  };
  const size_t threads =
      std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), chunks.size()));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back(work);
  for (auto& t : pool)
    t.join();
  if (failure) std::rethrow_exception(failure);
  return encoded;
}

// Writes tokens[begin, end) as shards named <split>_NNNNNN.bin, of uint32 ids when `wide` and
// of uint16 otherwise (llm.c's GPT-2 shards, half the size); removes older, higher-numbered
// shards of the split left by a previous prepare, so the glob sees only this dataset.
int64_t write_split(const std::vector<uint32_t>& tokens, size_t begin, size_t end, bool wide,
                    const std::string& dir, const std::string& split, int64_t shard_tokens) {
  int64_t index = 0;
  for (size_t at = begin; at < end; at += static_cast<size_t>(shard_tokens), ++index) {
    const size_t stop = std::min(end, at + static_cast<size_t>(shard_tokens));
    const std::string path = fmt::format("{}/{}_{:06}.bin", dir, split, index);
    if (wide) {
      write_shard(path, std::vector<uint32_t>(tokens.begin() + at, tokens.begin() + stop));
    } else {
      write_shard(path, std::vector<uint16_t>(tokens.begin() + at, tokens.begin() + stop));
    }
  }
  for (const auto& stale : glob_files(fmt::format("{}/{}_*.bin", dir, split))) {
    // Only the files this naming scheme writes: <split>_<digits>.bin.
    const std::string digits =
        std::filesystem::path(stale).stem().string().substr(split.size() + 1);
    if (digits.empty() || digits.size() > 12 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    if (std::stoll(digits) >= index) std::filesystem::remove(stale);
  }
  return index;
}

void check_options(const PrepareOptions& options) {
  if (options.inputs.empty()) throw UserError("kiln prepare needs at least one text file");
  auto fraction_ok = [](double f) { return f >= 0 && f < 1; };
  if (!fraction_ok(options.val_fraction) || !fraction_ok(options.test_fraction) ||
      options.val_fraction + options.test_fraction >= 1) {
    throw UserError(
        fmt::format("--val-fraction {} and --test-fraction {} must each be in [0, 1) "
                    "and leave some tokens for training",
                    options.val_fraction, options.test_fraction));
  }
  if (options.shard_tokens < 1) throw UserError("--shard-tokens must be at least 1");
}

}  // namespace

PrepareSummary prepare_dataset(const PrepareOptions& options,
                               const std::function<void(const std::string&)>& progress) {
  check_options(options);
  auto tokenizer = new_tokenizer(options.tokenizer, options.tokenizer_file);
  const std::vector<std::string> documents = read_documents(options.inputs, options.field);
  size_t bytes = 0;
  for (const auto& d : documents)
    bytes += d.size();
  progress(fmt::format("read {} bytes: {} document(s)", bytes, documents.size()));
  std::string corpus;
  for (const auto& d : documents)
    corpus += d;
  tokenizer->fit(corpus);
  const bool wide = tokenizer->vocab_size() > 65536;  // ids that uint16 shards cannot hold

  // Each document is preceded by the end-of-text token where the tokenizer has one, as GPT-2's
  // training data is (and llm.c's shards are).
  std::vector<uint32_t> tokens;
  const auto separator = tokenizer->end_of_text();
  for (const auto& document : documents) {
    if (separator) tokens.push_back(*separator);
    for (const auto& ids : encode_parallel(*tokenizer, chunks_of(document), progress)) {
      tokens.insert(tokens.end(), ids.begin(), ids.end());
    }
  }
  progress(
      fmt::format("encoded {} tokens with tokenizer '{}' ({} ids, {}-bit shards) on {} "
                  "threads",
                  tokens.size(), options.tokenizer, tokenizer->vocab_size(), wide ? 32 : 16,
                  std::thread::hardware_concurrency()));

  auto share = [&](double fraction) {
    return static_cast<size_t>(std::llround(static_cast<double>(tokens.size()) * fraction));
  };
  const size_t test_at = tokens.size() - share(options.test_fraction);
  const size_t val_at = test_at - share(options.val_fraction);
  ensure_parent_dir(options.out_dir + "/tokenizer.json");
  PrepareSummary summary;
  summary.train_shards =
      write_split(tokens, 0, val_at, wide, options.out_dir, "train", options.shard_tokens);
  summary.val_shards =
      write_split(tokens, val_at, test_at, wide, options.out_dir, "val", options.shard_tokens);
  summary.test_shards = write_split(tokens, test_at, tokens.size(), wide, options.out_dir, "test",
                                    options.shard_tokens);
  save_tokenizer(*tokenizer, options.tokenizer, options.out_dir);
  summary.train_tokens = static_cast<int64_t>(val_at);
  summary.val_tokens = static_cast<int64_t>(test_at - val_at);
  summary.test_tokens = static_cast<int64_t>(tokens.size() - test_at);
  summary.vocab_size = tokenizer->vocab_size();
  return summary;
}

}  // namespace kiln
