// data "blend": pretraining token shards from several sources mixed by weight, as Megatron's
// weighted data blends and the data mixtures of OLMo and nanotron do:
//
//   [data]
//   type = "blend"
//   [data.sources.web]
//   train = "data/web/train_*.bin"
//   weight = 0.7
//   [data.sources.code]
//   train = "data/code/train_*.bin"
//   weight = 0.3
//   epochs = 2            # at most two passes over code's shards (0 = no limit)
//
// Every row of a step (train.seq_len tokens) comes whole from one source. Row g of the run's
// stream (the step's rows in the trainer's reading order: rank r of W reads rows (m W + r) B ...
// of micro-step m) is drawn from a source by core/data/blend_order.h, a pure function of
// (run.seed, g, the weights); the n-th row drawn from a source is that source's n-th window of
// seq_len tokens, its shards read in order epoch after epoch as the shards plugin reads them. So
// a step's rows are the same at any world size, and a resume at another one continues them. The
// sources are taken in name order. Each step logs the tokens it took from each source
// (DataSource::source_tokens; `kiln runs show` sets them against the weights).
//
// Validation: the sources that give `val` shards, blended by the same weights, read from row 0 at
// each evaluation; a pass is as many rows as their shards hold windows.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "core/api/data_source.h"
#include "core/data/batch_buffers.h"
#include "core/data/blend_order.h"
#include "core/data/token_loader.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

struct Source {
  std::string name;
  double weight = 1;
  int64_t epochs = 0;  // passes over its shards a run may take; 0 = no limit
  std::string pattern;
  std::shared_ptr<TokenLoader> loader;  // one process's view: a window is one row
};

class BlendSource : public DataSource {
 public:
  BlendSource(std::vector<Source> sources, const DataRequest& request)
      : sources_(std::move(sources)),
        order_(weights(sources_), request.seed, request.split),
        buffers_(request.micro_batch, request.seq_len, request.pinned),
        rows_(request.micro_batch),
        cols_(request.seq_len),
        rank_(request.rank),
        global_rows_(request.micro_batch * request.world),
        endless_(request.endless),
        picks_(sources_.size(), 0) {
    int64_t windows = 0;
    for (const auto& s : sources_)
      windows += s.loader->windows_in_all();
    batches_per_pass_ = std::max<int64_t>(1, windows / global_rows_);
    if (endless_) check_supply(request);
  }

  Batch next() override {
    Batch batch = buffers_.acquire();
    int64_t* inputs = batch.inputs.data_ptr<int64_t>();
    int64_t* targets = batch.targets.data_ptr<int64_t>();
    // Every rank draws the whole global batch, so that each knows how far every source has got.
    for (int64_t j = 0; j < global_rows_; ++j) {
      const size_t k = order_.source_of(next_row_ + j);
      const int64_t mine = j - rank_ * rows_;
      if (mine >= 0 && mine < rows_)
        sources_[k].loader->read_window(picks_[k], inputs + mine * cols_, targets + mine * cols_);
      ++picks_[k];
    }
    next_row_ += global_rows_;
    if (!endless_ && next_row_ >= batches_per_pass_ * global_rows_) reset();
    return batch;
  }
  void reset() override { seek(LoaderPosition{}); }
  LoaderPosition position() const override { return {0, next_row_, 0}; }
  void seek(const LoaderPosition& position) override {
    if (position.offset < 0 || position.offset % global_rows_ != 0) {
      throw UserError(fmt::format(
          "data position (row {}) is not the start of a global batch of {} rows: the blend's "
          "rows per step changed since the position was saved",
          position.offset, global_rows_));
    }
    std::fill(picks_.begin(), picks_.end(), 0);
    for (int64_t g = 0; g < position.offset; ++g)
      ++picks_[order_.source_of(g)];
    next_row_ = position.offset;
  }
  int64_t batches_per_pass() const override { return batches_per_pass_; }
  std::string tokenizer_dir() const override {
    return std::filesystem::path(sources_.front().pattern).parent_path().string();
  }
  std::vector<std::string> source_names() const override {
    std::vector<std::string> names;
    for (const auto& s : sources_)
      names.push_back(s.name);
    return names;
  }
  std::vector<int64_t> source_tokens() const override {
    std::vector<int64_t> tokens;
    for (int64_t picks : picks_)
      tokens.push_back(picks * cols_);
    return tokens;
  }
  std::string describe() const override {
    std::string parts;
    for (size_t k = 0; k < sources_.size(); ++k) {
      const Source& s = sources_[k];
      parts += fmt::format("{}{} {:.3f} ({} tokens, {}){}", k ? ", " : "", s.name, order_.share(k),
                           s.loader->total_tokens(), s.pattern,
                           s.epochs > 0 ? fmt::format(" at most {} epoch(s)", s.epochs) : "");
    }
    return fmt::format("a blend of {} sources, rows drawn by share: {}", sources_.size(), parts);
  }

 private:
  static std::vector<double> weights(const std::vector<Source>& sources) {
    std::vector<double> w;
    for (const auto& s : sources)
      w.push_back(s.weight);
    return w;
  }

  // A source capped at `epochs` passes must last the run: the draws of every row the run will
  // read are counted now, and the step that would take a row past a cap is named.
  void check_supply(const DataRequest& request) const {
    std::vector<int64_t> supply, picks(sources_.size(), 0);
    bool capped = false;
    for (const auto& s : sources_) {
      supply.push_back(s.epochs * s.loader->windows_in_all());
      capped = capped || s.epochs > 0;
    }
    if (!capped || request.rows_per_step <= 0) return;
    const int64_t rows = request.steps * request.rows_per_step;
    for (int64_t g = 0; g < rows; ++g) {
      const size_t k = order_.source_of(g);
      if (sources_[k].epochs == 0 || ++picks[k] <= supply[k]) continue;
      const Source& s = sources_[k];
      throw UserError(fmt::format(
          "data.sources.{}.epochs = {} runs out at step {} of train.steps = {}: its {} "
          "pass(es) hold {} rows of {} tokens, and the blend draws it for about {:.1f}% of "
          "{} rows a step: raise its epochs (0 = no limit), lower its weight, or lower "
          "train.steps",
          s.name, s.epochs, g / request.rows_per_step + 1, request.steps, s.epochs, supply[k],
          cols_, 100.0 * order_.share(k), request.rows_per_step));
    }
  }

  std::vector<Source> sources_;
  BlendOrder order_;
  BatchBuffers buffers_;
  int64_t rows_, cols_, rank_;
  int64_t global_rows_;  // rows of one global batch: micro_batch x readers
  bool endless_;         // DataRequest::endless: the trainer's stream
  int64_t batches_per_pass_ = 1;
  int64_t next_row_ = 0;        // the next global batch's first row in the stream
  std::vector<int64_t> picks_;  // rows drawn from each source before next_row_
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The sources' tokenizers must be one: token id 17 has to mean the same in every source.
void check_same_tokenizer(const std::vector<Source>& sources) {
  std::string first_path, first_text;
  for (const auto& s : sources) {
    const std::string path =
        (std::filesystem::path(s.pattern).parent_path() / "tokenizer.json").string();
    if (!std::filesystem::exists(path)) continue;
    std::string text = read_all(path);
    if (first_path.empty()) {
      first_path = path, first_text = std::move(text);
    } else if (text != first_text) {
      throw UserError(fmt::format(
          "data.sources.{}'s tokenizer ({}) differs from the first source's ({}): a blend's "
          "sources must be prepared with one tokenizer, so that each token id means one thing",
          s.name, path, first_path));
    }
  }
}

std::shared_ptr<DataSource> open_split(const Params& p, const DataRequest& request) {
  if (!request.files.empty()) {
    throw UserError(
        "--data reads one set of files; a blend's splits are its sources' (data.sources."
        "NAME.train or .val): evaluate a source with a shards experiment instead");
  }
  const std::vector<std::string> names = p.entries("sources");
  if (names.empty()) {
    throw UserError(
        "data.type = \"blend\" has no sources: add a [data.sources.NAME] table for each, with "
        "train = \"SHARD GLOB\" and weight = W (docs/data.md)");
  }
  if (request.split == "test") return nullptr;  // a blend has no test split
  const std::string split = request.split == "train" ? "train" : "val";
  std::vector<Source> sources;
  for (const std::string& name : names) {
    const std::string key = "sources." + name + ".";
    const std::string pattern = p.path(key + split);
    if (pattern.empty()) {
      if (split == "val") continue;
      throw UserError(
          fmt::format("data.sources.{}.train is empty: set it to the source's shard glob, e.g. "
                      "\"data/{}/train_*.bin\" (made by `kiln prepare`)",
                      name, name));
    }
    std::vector<std::string> files = glob_files(pattern);
    if (files.empty()) {
      throw UserError(fmt::format(
          "data.sources.{}.{} = \"{}\" matches no file: run `kiln prepare` or fix the pattern",
          name, split, p.text(key + split)));
    }
    TokenLoaderOptions options{
        files, 1, request.seq_len, 0, 1, request.vocab_limit, parse_shard_format(p.text("format"))};
    sources.push_back({name, p.real(key + "weight"), p.integer(key + "epochs"), pattern,
                       std::make_shared<TokenLoader>(std::move(options))});
  }
  if (sources.empty()) return nullptr;  // no source has validation shards
  check_same_tokenizer(sources);
  return std::make_shared<BlendSource>(std::move(sources), request);
}

const bool registered = DataRegistry::add(
    {"blend",
     "token shards of several sources, each row drawn from one by weight (Megatron's data "
     "blends); every step logs the tokens it took from each",
     {ParamSpec::family(
          "sources", "the sources blended, one [data.sources.NAME] table each",
          {ParamSpec::text("train", "", "glob of the source's training shards").files(),
           ParamSpec::text("val", "", "glob of its validation shards; empty = none").files(),
           ParamSpec::real("weight", 1.0, "its share of the rows: weight / the sum of weights")
               .above(0),
           ParamSpec::integer("epochs", 0,
                              "passes over its shards a run may take; 0 = no limit (a run "
                              "that would need more is refused before its first step)")
               .at_least(0)}),
      ParamSpec::text("format", "auto",
                      "every source's shard layout: llmc, npy, raw, or auto (npy for .npy "
                      "files, else llmc)")
          .one_of({"auto", "llmc", "npy", "raw"})}},
    open_split);

}  // namespace
}  // namespace kiln
