#include "core/data/prepare.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/data/prepare_input.h"
#include "core/data/prepare_state.h"
#include "core/data/shard.h"
#include "core/data/token_spool.h"
#include "core/util/error.h"
#include "core/util/fault.h"
#include "core/util/fs.h"
#include "core/util/stop_signal.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// OUT/.prepare/: the work of a prepare not yet published. state.json (prepare_state.h) says
// where the inputs stopped and how many tokens tokens.bin holds then (bytes past them are a batch
// cut short); shards/ holds the finished shards and tokenizer.json until they are renamed into OUT.
constexpr const char* kStaging = ".prepare";
constexpr const char* kTokens = "tokens.bin";
constexpr const char* kShards = "shards";
const char* const kSplits[] = {"train", "val", "test"};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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
  if (options.threads < 0) throw UserError("--threads must be 0 (every core) or more");
}

// Each unit's ids, on `threads` threads; the end-of-text id goes before each document.
std::vector<std::vector<uint32_t>> encode_batch(const Tokenizer& tokenizer,
                                                const std::vector<EncodeUnit>& units, int threads) {
  std::vector<std::vector<uint32_t>> encoded(units.size());
  const auto separator = tokenizer.end_of_text();
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex mutex;
  auto work = [&] {
    for (size_t i = next++; i < units.size(); i = next++) {
      try {
        for (size_t p = 0; p < units[i].pieces.size(); ++p) {
          if (separator && units[i].starts_document[p]) encoded[i].push_back(*separator);
          const auto ids = tokenizer.encode(units[i].pieces[p]);
          encoded[i].insert(encoded[i].end(), ids.begin(), ids.end());
        }
      } catch (const UserError& e) {
        // The tokenizer sees a piece of text; the user needs to know which file it came from.
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) {
          failure = std::make_exception_ptr(
              UserError(fmt::format("{} (the part from there on): {}", units[i].origin, e.what())));
        }
        next = units.size();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next = units.size();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(units.size())); ++t)
    pool.emplace_back(work);
  work();
  for (auto& t : pool)
    t.join();
  if (failure) std::rethrow_exception(failure);
  return encoded;
}

// Reads the inputs from `state` on and appends their tokens to the spool, a batch of units at a
// time, saving the state after each batch.
void encode_pass(const Tokenizer& tokenizer, const std::vector<std::string>& files,
                 const PrepareOptions& options, int threads, const std::string& staging,
                 const nlohmann::json& print, TokenSpool& spool, EncodeState& state,
                 const PrepareReport& report) {
  PrepareInput input(files, options.field, state.at, options.piece_bytes);
  const auto start = Clock::now();
  const int64_t bytes_at_start = input.bytes_done(), tokens_at_start = state.tokens;
  std::vector<EncodeUnit> batch(static_cast<size_t>(2 * threads));
  for (bool more = true; more && !StopSignal::requested();) {
    size_t filled = 0;
    while (filled < batch.size() && input.next(batch[filled]))
      ++filled;
    more = filled == batch.size();
    batch.resize(filled);
    for (const auto& ids : encode_batch(tokenizer, batch, threads))
      spool.append(ids);
    for (const auto& unit : batch) {
      for (const auto& piece : unit.pieces)
        state.text_bytes += static_cast<int64_t>(piece.size());
    }
    batch.resize(static_cast<size_t>(2 * threads));
    spool.sync();
    fault_point("prepare.unrecorded");
    state.at = input.position();
    state.tokens = spool.tokens();
    state.encoded = !more;
    save_prepare_state(staging, print, state);
    if (report.status) {
      report.status({"encode", input.bytes_done(), input.bytes_total(), bytes_at_start,
                     state.tokens, tokens_at_start, seconds_since(start)});
    }
  }
}

// The tokenizer's vocabulary from every document (tokenizers that learn one: char).
void fit_pass(Tokenizer& tokenizer, const std::vector<std::string>& files,
              const PrepareOptions& options, const PrepareReport& report) {
  PrepareInput input(files, options.field, {}, options.piece_bytes);
  const auto start = Clock::now();
  EncodeUnit unit;
  for (int64_t units = 1; !StopSignal::requested() && input.next(unit); ++units) {
    for (const auto& piece : unit.pieces)
      tokenizer.fit(piece);
    if (report.status && units % 16 == 0) {
      report.status(
          {"fit", input.bytes_done(), input.bytes_total(), 0, 0, 0, seconds_since(start)});
    }
  }
}

// Writes tokens [begin, end) of the spool as shards <split>_NNNNNN.bin in `dir`; their count.
int64_t write_split(const TokenSpool& spool, int64_t begin, int64_t end, const std::string& dir,
                    const std::string& split, int64_t shard_tokens) {
  int64_t index = 0;
  for (int64_t at = begin; at < end; at += shard_tokens, ++index) {
    const int64_t stop = std::min(end, at + shard_tokens);
    write_shard_from(fmt::format("{}/{}_{:06}.bin", dir, split, index), spool.wide(), stop - at,
                     [&](int64_t from, int64_t count, std::string& bytes) {
                       spool.read(at + from, count, bytes);
                     });
  }
  return index;
}

// Moves the finished shards and tokenizer.json from `from` into `out`, and removes the shards of
// an older prepare that the new ones do not replace (higher-numbered), so a glob of a split
// sees only this dataset.
void publish(const std::string& from, const std::string& out, const int64_t (&shards)[3]) {
  // Shards in name order, tokenizer.json last: the folder holds the old tokenizer until every
  // new shard is in place. (Cut short, it is a mix of old and new that --resume finishes.)
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(from))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return std::make_pair(a == "tokenizer.json", a) < std::make_pair(b == "tokenizer.json", b);
  });
  for (size_t i = 0; i < names.size(); ++i) {
    fs::rename(fs::path(from) / names[i], fs::path(out) / names[i]);
    if (i == 0) fault_point("prepare.publishing");
  }
  for (int s = 0; s < 3; ++s) {
    const std::string split = kSplits[s];
    for (const auto& stale : glob_files(fmt::format("{}/{}_*.bin", out, split))) {
      const std::string digits = fs::path(stale).stem().string().substr(split.size() + 1);
      if (digits.empty() || digits.size() > 12 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        continue;  // not a name this scheme writes
      }
      if (std::stoll(digits) >= shards[s]) fs::remove(stale);
    }
  }
  sync_dir(out);
}

// A fresh staging folder, or the interrupted prepare's state in it (--resume).
EncodeState open_staging(const PrepareOptions& options, const std::string& staging,
                         const nlohmann::json& print, const PrepareReport& report) {
  if (options.resume) return load_prepare_state(staging, print);
  if (fs::exists(staging)) {
    if (report.line) {
      report.line(
          fmt::format("an interrupted prepare's work in {}/ is discarded (--resume goes "
                      "on with it instead)",
                      staging));
    }
    fs::remove_all(staging);
  }
  fs::create_directories(staging);
  save_prepare_state(staging, print, {});  // a kill in the first batch resumes from the start
  return {};
}

PrepareSummary prepare_staged(const PrepareOptions& options, const std::string& staging,
                              const PrepareReport& report) {
  const std::vector<std::string> files = prepare_input_files(options.inputs);
  auto tokenizer = new_tokenizer(options.tokenizer, options.tokenizer_file);
  const nlohmann::json print = prepare_fingerprint(options, files);
  // A SIGINT or SIGTERM while the inputs are read stops after a saved batch (or the fit, which
  // a resume redoes); later, while the shards are cut and renamed, it ends the process, and the
  // staging folder resumes as well. Caught from before the staging folder's first state.
  std::optional<StopSignal> stop(std::in_place);
  EncodeState state = open_staging(options, staging, print, report);
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (tokenizer->learns_from_corpus()) fit_pass(*tokenizer, files, options, report);
  const bool wide = tokenizer->vocab_size() > 65536;  // ids that uint16 shards cannot hold
  TokenSpool spool(staging + "/" + kTokens, wide, state.tokens);
  if (options.resume && report.line) {
    report.line(fmt::format("resuming with {} tokens encoded, at {}:{}", state.tokens,
                            state.at.file < static_cast<int64_t>(files.size())
                                ? files[static_cast<size_t>(state.at.file)]
                                : "the end",
                            state.at.line));
  }
  const auto start = Clock::now();
  if (!state.encoded && !StopSignal::requested()) {
    encode_pass(*tokenizer, files, options, threads, staging, print, spool, state, report);
  }
  if (StopSignal::requested()) {
    PrepareSummary stopped;
    stopped.interrupted = true;
    return stopped;
  }
  stop.reset();
  if (state.text_bytes == 0) throw UserError("the input text is empty: nothing to tokenize");
  if (report.line) {
    report.line(
        fmt::format("encoded {} tokens with tokenizer '{}' ({} ids, {}-bit shards) on {} "
                    "thread{} in {:.1f} s",
                    spool.tokens(), options.tokenizer, tokenizer->vocab_size(), wide ? 32 : 16,
                    threads, threads == 1 ? "" : "s", seconds_since(start)));
  }

  const int64_t total = spool.tokens();
  auto share = [&](double fraction) {
    return static_cast<int64_t>(std::llround(static_cast<double>(total) * fraction));
  };
  const int64_t test_at = total - share(options.test_fraction);
  const int64_t val_at = test_at - share(options.val_fraction);
  const int64_t bounds[4] = {0, val_at, test_at, total};
  const std::string shards_dir = staging + "/" + kShards;
  fs::remove_all(shards_dir);  // a publish cut short writes them again
  fs::create_directories(shards_dir);
  int64_t shards[3];
  for (int s = 0; s < 3; ++s) {
    shards[s] =
        write_split(spool, bounds[s], bounds[s + 1], shards_dir, kSplits[s], options.shard_tokens);
  }
  save_tokenizer(*tokenizer, options.tokenizer, shards_dir);
  publish(shards_dir, options.out_dir, shards);
  PrepareSummary summary{val_at,    test_at - val_at, total - test_at,        shards[0],
                         shards[1], shards[2],        tokenizer->vocab_size()};
  return summary;
}

}  // namespace

PrepareSummary prepare_dataset(const PrepareOptions& options, const PrepareReport& report) {
  check_options(options);
  const std::string staging = options.out_dir + "/" + kStaging;
  std::error_code ec;
  const bool made_out_dir = !fs::exists(options.out_dir, ec);
  ensure_parent_dir(staging);
  try {
    PrepareSummary summary = prepare_staged(options, staging, report);
    if (!summary.interrupted) fs::remove_all(staging);
    return summary;
  } catch (const UserError&) {
    // A mistake in the inputs or options, or a write that failed (a full disk): what was
    // encoded is removed, not left behind half done. A resume refused keeps it for a resume
    // with the right options; only a kill leaves it otherwise.
    if (!options.resume) fs::remove_all(staging);
    if (made_out_dir && fs::is_empty(options.out_dir, ec)) fs::remove(options.out_dir, ec);
    throw;
  }
}

}  // namespace kiln
