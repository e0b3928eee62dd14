#include "tools/kiln/data_command.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "core/data/prepare.h"
#include "core/data/prepare_input.h"
#include "core/store/runs/output_guard.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// Where a prepare is: on a terminal one line redrawn in place (a bar, bytes, MB/s, tokens/s,
// ETA) at most five times a second; otherwise, for logs, a plain line at each tenth of a pass.
class ProgressView {
 public:
  void line(const std::string& text) {
    end_bar();
    std::cout << "prepare: " << text << std::endl;
  }

  void status(const PrepareStatus& s) {
    // Clamped: a file that grows while it is read has more bytes than it had at the start.
    const double fraction = std::clamp(
        s.bytes_total > 0 ? static_cast<double>(s.bytes_done) / s.bytes_total : 1.0, 0.0, 1.0);
    if (!terminal_) {
      const int tenth = static_cast<int>(fraction * 10);
      if (s.pass != pass_) tenths_ = 0;
      pass_ = s.pass;
      if (tenth <= tenths_) return;
      tenths_ = tenth;
      std::cout << fmt::format("prepare: {} {}% ({})", s.pass, tenth * 10, figures(s)) << std::endl;
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (fraction < 1 && now - drawn_ < std::chrono::milliseconds(200)) return;
    drawn_ = now;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(fraction * kWidth);
    std::cout << fmt::format("\rprepare: {:<6} [{}{}] {:3.0f}% {}\x1b[K", s.pass,
                             std::string(static_cast<size_t>(filled), '#'),
                             std::string(static_cast<size_t>(kWidth - filled), '.'), 100 * fraction,
                             figures(s))
              << std::flush;
    bar_shown_ = true;
  }

  ~ProgressView() { end_bar(); }

 private:
  // "1.2 GiB of 2.5 GiB, 8.4 MB/s, 2.1M tokens/s, ETA 2m35s": rates of this process.
  static std::string figures(const PrepareStatus& s) {
    const double seconds = std::max(s.seconds, 1e-9);
    const double bytes_per_s = static_cast<double>(s.bytes_done - s.bytes_at_start) / seconds;
    std::string text = fmt::format("{} of {}, {:.1f} MB/s", format_bytes(s.bytes_done),
                                   format_bytes(s.bytes_total), bytes_per_s / 1e6);
    if (s.tokens > 0) {
      text += fmt::format(", {:.2f}M tokens/s",
                          static_cast<double>(s.tokens - s.tokens_at_start) / seconds / 1e6);
    }
    if (bytes_per_s > 0 && s.bytes_done < s.bytes_total) {
      text += ", ETA " +
              format_duration(static_cast<double>(s.bytes_total - s.bytes_done) / bytes_per_s);
    }
    return text;
  }

  void end_bar() {
    if (bar_shown_) std::cout << "\n";
    bar_shown_ = false;
  }

  const bool terminal_ = ::isatty(STDOUT_FILENO) == 1;
  bool bar_shown_ = false;
  std::string pass_;
  int tenths_ = 0;
  std::chrono::steady_clock::time_point drawn_{};
};

int prepare_command(const PrepareOptions& options) {
  std::vector<CommandInput> reads = {{options.tokenizer_file, "the --tokenizer-file"}};
  for (const std::string& file : prepare_input_files(options.inputs))
    reads.push_back({file, "an input text"});
  check_output_path(options.out_dir, "", "--out", OutputKind::kFolder, reads);
  ProgressView view;
  PrepareReport report{[&](const std::string& text) { view.line(text); },
                       [&](const PrepareStatus& s) { view.status(s); }};
  const auto summary = prepare_dataset(options, report);
  if (summary.interrupted) {
    view.line(fmt::format(
        "interrupted: nothing published; the same command with --resume goes on from {}/.prepare/",
        options.out_dir));
    return kExitInterrupted;
  }
  view.line(fmt::format(
      "wrote {} train, {} val and {} test tokens ({} + {} + {} shards) to {}/ "
      "(vocabulary {} ids, tokenizer.json)",
      summary.train_tokens, summary.val_tokens, summary.test_tokens, summary.train_shards,
      summary.val_shards, summary.test_shards, options.out_dir, summary.vocab_size));
  return kExitOk;
}

}  // namespace

ChosenCommand add_prepare_command(CLI::App& app) {
  auto prep = std::make_shared<PrepareOptions>();
  CLI::App* prepare = app.add_subcommand("prepare", "tokenize text files into token shards");
  prepare->add_option("text", prep->inputs, "text file(s) or globs (quoted: \"corpus/*.txt\")")
      ->required();
  prepare->add_option("--field", prep->field,
                      "read the inputs as JSON Lines, each line's FIELD (a string) a document");
  prepare->add_option("--tokenizer", prep->tokenizer, "tokenizer plugin")->capture_default_str();
  prepare->add_option("--tokenizer-file", prep->tokenizer_file,
                      "vocabulary file of a tokenizer that reads one (hf: tokenizer.json)");
  prepare->add_option("--out", prep->out_dir, "output directory")->required();
  prepare->add_option("--val-fraction", prep->val_fraction, "share of tokens kept for validation")
      ->capture_default_str();
  prepare->add_option("--test-fraction", prep->test_fraction, "share of tokens kept for test")
      ->capture_default_str();
  prepare->add_option("--shard-tokens", prep->shard_tokens, "tokens per shard file")
      ->capture_default_str();
  prepare
      ->add_option("--threads", prep->threads,
                   "encoding threads, 0 = every core (the shards are the same at any count)")
      ->capture_default_str();
  prepare->add_flag("--resume", prep->resume,
                    "go on with the prepare that was interrupted in --out (same inputs and "
                    "options), from its last saved batch");

  return [prepare, prep]() -> std::optional<int> {
    if (!*prepare) return std::nullopt;
    return prepare_command(*prep);
  };
}

}  // namespace kiln
