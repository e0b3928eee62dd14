// data "shards": token shards in llm.c's format (see core/data/shard.h), read sequentially, each
// window copied with pread (a shard truncated underneath is an error, not SIGBUS). `train` and
// `val` are glob patterns; the shards a pattern matches are read in sorted order.
//
// With data.pack = true the shards are documents that each end with data.separator (GPT-2's
// <|endoftext|>, 50256): a row's positions restart after every separator and attention stays
// inside each document (core/data/packing.h, Batch::positions), and a separator's target, the
// next document's first token, is left out of the loss.
#include <filesystem>

#include <fmt/format.h>

#include <ATen/ATen.h>

#include "core/api/data_source.h"
#include "core/data/batch_buffers.h"
#include "core/data/packing.h"
#include "core/data/token_loader.h"
#include "core/util/error.h"

namespace kiln {
namespace {

class ShardSource : public DataSource {
 public:
  ShardSource(std::string pattern, TokenLoaderOptions options, bool pinned, int64_t separator)
      : pattern_(std::move(pattern)),
        first_file_(options.files.front()),
        buffers_(options.micro_batch, options.seq_len, pinned),
        separator_(separator),
        loader_(std::move(options)) {}

  Batch next() override {
    Batch batch = buffers_.acquire();
    loader_.next(batch.inputs.data_ptr<int64_t>(), batch.targets.data_ptr<int64_t>());
    if (separator_ >= 0) mark_documents(batch);
    return batch;
  }
  bool masks_loss() const override { return separator_ >= 0; }
  void reset() override { loader_.reset(); }
  LoaderPosition position() const override { return loader_.position(); }
  void seek(const LoaderPosition& position) override { loader_.seek(position); }
  int64_t batches_per_pass() const override { return loader_.windows_per_pass(); }
  std::string tokenizer_dir() const override {
    return std::filesystem::path(first_file_).parent_path().string();
  }
  std::string describe() const override {
    return fmt::format("{} tokens in {} shard(s) matching {}{}", loader_.total_tokens(),
                       loader_.shard_count(), pattern_,
                       separator_ >= 0
                           ? fmt::format(", documents packed (each ends with token {})", separator_)
                           : std::string());
  }

 private:
  // Positions and the loss mask of a packed batch (fresh tensors: the reused buffers hold only
  // token ids).
  void mark_documents(Batch& batch) const {
    batch.positions = at::empty_like(batch.inputs);
    const int64_t rows = batch.inputs.size(0), cols = batch.inputs.size(1);
    for (int64_t row = 0; row < rows; ++row) {
      positions_after_separators(batch.inputs.data_ptr<int64_t>() + row * cols, cols, separator_,
                                 batch.positions.data_ptr<int64_t>() + row * cols);
    }
    batch.loss_mask = batch.inputs.ne(separator_);
  }

  std::string pattern_;
  std::string first_file_;
  BatchBuffers buffers_;
  int64_t separator_;  // data.separator when data.pack, else -1
  TokenLoader loader_;
};

std::shared_ptr<DataSource> open_split(const Params& p, const DataRequest& request) {
  const std::optional<SplitFiles> split = split_files(
      p, request,
      "data.train is empty: set it to a shard pattern such as "
      "\"data/kjv_char/train_*.bin\" (made by `kiln prepare`)",
      "run `kiln prepare` (or tools/setup.sh for the default corpus) or fix the pattern");
  if (!split) return nullptr;
  const bool pack = p.flag("pack");
  if (pack && p.integer("separator") < 0) {
    throw UserError(
        "data.pack = true needs data.separator, the token id that ends each document: set it "
        "(50256, <|endoftext|>, for GPT-2's tokenizer), or data.pack = false");
  }
  return std::make_shared<ShardSource>(
      split->pattern,
      TokenLoaderOptions{split->files, request.micro_batch, request.seq_len, request.rank,
                         request.world, request.vocab_limit, parse_shard_format(p.text("format"))},
      request.pinned, pack ? p.integer("separator") : -1);
}

const bool registered = DataRegistry::add(
    {"shards",
     "token shards of uint16 or uint32 ids (llm.c, .npy or raw), read in order, each window "
     "copied with pread",
     {ParamSpec::text("train", "", "glob of training shards, e.g. data/kjv_char/train_*.bin")
          .files(),
      ParamSpec::text("val", "", "glob of validation shards; empty = no validation").files(),
      ParamSpec::text("test", "", "glob of test shards, for `kiln eval --split test`").files(),
      ParamSpec::text("format", "auto",
                      "shard layout: llmc (kiln prepare, llm.c), npy (build-nanogpt), raw "
                      "(nanoGPT's headerless .bin); auto = npy for .npy files, else llmc")
          .one_of({"auto", "llmc", "npy", "raw"}),
      ParamSpec::flag("pack", false,
                      "the shards hold documents that each end with data.separator: positions "
                      "restart after it and attention stays inside each document")
          .added_later(),
      ParamSpec::integer("separator", -1,
                         "the token id ending each document (50256 for GPT-2), for data.pack; "
                         "-1 = none")
          .at_least(-1)
          .added_later()},
     true},
    open_split);

}  // namespace
}  // namespace kiln
