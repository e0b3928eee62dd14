// `kiln prepare`: text files -> token shards plus their tokenizer (core/data/prepare.h).
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/data/prepare.h"
#include "core/util/error.h"
#include "tools/kiln/commands.h"

namespace kiln {

namespace {

int prepare_command(const PrepareOptions& options) {
  auto summary = prepare_dataset(
      options, [](const std::string& line) { std::cout << "prepare: " << line << std::endl; });
  std::cout << fmt::format(
      "prepare: wrote {} train, {} val and {} test tokens ({} + {} + {} shards) to {}/ "
      "(vocabulary {} ids, tokenizer.json)\n",
      summary.train_tokens, summary.val_tokens, summary.test_tokens, summary.train_shards,
      summary.val_shards, summary.test_shards, options.out_dir, summary.vocab_size);
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

  return [prepare, prep]() -> std::optional<int> {
    if (!*prepare) return std::nullopt;
    return prepare_command(*prep);
  };
}

}  // namespace kiln
