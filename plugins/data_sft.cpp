// data "sft": fine-tuning on prompt/response records (JSON Lines, read and tokenized by
// core/data/chat_records.h), with a loss that counts only the response tokens.
//
// Padded, not packed: each row of a batch holds one record from its first token, padded to
// train.seq_len (padding targets are never counted). Attention is causal, so a record's tokens
// see only themselves and what came before them in the record: nothing crosses from one record
// to another, with no attention mask the models would have to learn to take. The cost is the
// padding's compute; records of similar length waste least.
//
// Order: the records in file order (shuffle the file to mix them), rank r taking the rows r
// micro-batches further in each global batch. Training reads one endless stream: row g is record
// g mod n, whatever the world size, so a step's rows are the same on any number of ranks and a
// resume at another one continues with the rows it would have read. An evaluation reads passes:
// the records once, the last global batch filled up with empty rows (nothing counted), so an
// evaluation over batches_per_pass() counts every record exactly once. The position is the next
// global batch's first row (its record and epoch).
#include <fmt/format.h>

#include <ATen/ATen.h>

#include "core/api/data_source.h"
#include "core/api/tokenizer.h"
#include "core/data/chat_records.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

class SftSource : public DataSource {
 public:
  SftSource(std::string pattern, ChatRecords records, std::string tokenizer_dir,
            const DataRequest& request)
      : pattern_(std::move(pattern)),
        records_(std::move(records)),
        tokenizer_dir_(std::move(tokenizer_dir)),
        rows_(request.micro_batch),
        cols_(request.seq_len),
        rank_(request.rank),
        global_rows_(request.micro_batch * request.world),
        endless_(request.endless),
        pinned_(request.pinned) {
    const int64_t n = records_.size();
    rows_per_pass_ = (n + global_rows_ - 1) / global_rows_ * global_rows_;
  }

  Batch next() override {
    auto options = at::TensorOptions().pinned_memory(pinned_);
    Batch batch{at::zeros({rows_, cols_}, options.dtype(at::kLong)),
                at::zeros({rows_, cols_}, options.dtype(at::kLong)),
                at::zeros({rows_, cols_}, options.dtype(at::kBool))};
    const int64_t n = records_.size();
    for (int64_t row = 0; row < rows_; ++row) {
      const int64_t record = next_row_ + rank_ * rows_ + row;
      if (endless_) {
        fill_row(batch, row, record % n);
      } else if (record < n) {
        fill_row(batch, row, record);
      }
    }
    next_row_ += global_rows_;
    const int64_t pass = endless_ ? n : rows_per_pass_;
    epoch_ += next_row_ / pass;
    next_row_ %= pass;
    return batch;
  }
  void reset() override { next_row_ = epoch_ = 0; }
  LoaderPosition position() const override { return {0, next_row_, epoch_}; }
  void seek(const LoaderPosition& position) override {
    // A position saved at another world size may fall past this pass's last global batch (and
    // one saved by an older Kiln, whose training padded its passes, past the last record).
    const bool inside =
        position.offset >= 0 && position.offset < (endless_ ? records_.size() : rows_per_pass_);
    next_row_ = inside ? position.offset : 0;
    epoch_ = position.epoch + (inside ? 0 : 1);
  }
  int64_t batches_per_pass() const override { return rows_per_pass_ / global_rows_; }
  std::string tokenizer_dir() const override { return tokenizer_dir_; }
  bool masks_loss() const override { return true; }
  std::string describe() const override {
    int64_t counted = 0;
    for (int64_t r = 0; r < records_.size(); ++r)
      counted += counted_targets(r);
    std::string skipped;
    if (records_.skipped > 0) {
      skipped = fmt::format(" | skipped {} bad record(s), the first {}", records_.skipped,
                            records_.first_skipped);
    }
    return fmt::format(
        "{} records ({} tokens, {} of them counted by the loss) from {}, one a row padded to "
        "{} tokens{}",
        records_.size(), records_.tokens.size(), counted, pattern_, cols_, skipped);
  }

 private:
  // Row `row` of the batch: record `record`'s tokens as inputs, the same shifted by one as
  // targets, and which of those targets are response tokens.
  void fill_row(Batch& batch, int64_t row, int64_t record) const {
    const int64_t begin = records_.starts[static_cast<size_t>(record)];
    const int64_t length = records_.starts[static_cast<size_t>(record) + 1] - begin;
    auto inputs = batch.inputs.accessor<int64_t, 2>()[row];
    auto targets = batch.targets.accessor<int64_t, 2>()[row];
    auto mask = batch.loss_mask.accessor<bool, 2>()[row];
    for (int64_t i = 0; i + 1 < length; ++i) {
      const size_t at = static_cast<size_t>(begin + i);
      inputs[i] = records_.tokens[at];
      targets[i] = records_.tokens[at + 1];
      mask[i] = records_.counted[at + 1] != 0;
    }
  }

  int64_t counted_targets(int64_t record) const {
    int64_t counted = 0;
    for (int64_t at = records_.starts[static_cast<size_t>(record)] + 1;
         at < records_.starts[static_cast<size_t>(record) + 1]; ++at) {
      counted += records_.counted[static_cast<size_t>(at)];
    }
    return counted;
  }

  std::string pattern_;
  ChatRecords records_;
  std::string tokenizer_dir_;
  int64_t rows_, cols_, rank_;
  int64_t global_rows_;    // rows of one global batch: micro_batch x readers
  int64_t rows_per_pass_;  // the records, rounded up to whole global batches
  bool endless_;           // DataRequest::endless: the trainer's stream
  bool pinned_;
  int64_t next_row_ = 0, epoch_ = 0;
};

std::shared_ptr<Tokenizer> open_tokenizer(const Params& p, const DataRequest& request) {
  const std::string dir = p.path("tokenizer");
  if (dir.empty()) {
    throw UserError(
        "data.tokenizer is empty: set it to a folder holding the tokenizer.json of `kiln "
        "prepare`, e.g. \"data/kjv_char\"");
  }
  std::shared_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  if (request.vocab_limit > 0 && tokenizer->vocab_size() > request.vocab_limit) {
    throw UserError(
        fmt::format("the tokenizer in '{}' has {} ids but the model's vocabulary only {}: raise "
                    "model.vocab_size to at least {}",
                    dir, tokenizer->vocab_size(), request.vocab_limit, tokenizer->vocab_size()));
  }
  return tokenizer;
}

std::shared_ptr<DataSource> open_split(const Params& p, const DataRequest& request) {
  const std::string& key = request.split;
  const std::string pattern = request.files.empty() ? p.path(key) : request.files;
  if (pattern.empty()) {
    if (key != "train") return nullptr;
    throw UserError(
        "data.train is empty: set it to a JSON Lines file of records such as "
        "\"experiments/data/kjv_sft_train.jsonl\"");
  }
  std::vector<std::string> files = glob_files(pattern);
  if (files.empty()) {
    throw UserError(fmt::format("{} matches no file: fix the path or pattern",
                                named_pattern(p, request, pattern)));
  }
  std::shared_ptr<Tokenizer> tokenizer = open_tokenizer(p, request);
  ChatRecordOptions options{chat_template(p.text("template")), tokenizer.get(), request.seq_len + 1,
                            p.text("on_bad_record") == "skip"};
  return std::make_shared<SftSource>(pattern, read_chat_records(files, options),
                                     p.path("tokenizer"), request);
}

const bool registered = DataRegistry::add(
    {"sft",
     "prompt/response records (JSON Lines) under a chat template, one a row padded to seq_len; "
     "the loss counts only the response tokens",
     {ParamSpec::text("train", "",
                      "glob of JSON Lines files, a record a line: {\"prompt\", \"response\", "
                      "\"history\": [[prompt, response], ...]} or {\"messages\": [{\"role\": "
                      "system|user|assistant, \"content\"}, ...]}")
          .files(),
      ParamSpec::text("val", "", "glob of validation records; empty = no validation").files(),
      ParamSpec::text("test", "", "glob of test records, for `kiln eval --split test`").files(),
      ParamSpec::text("tokenizer", "",
                      "folder holding the tokenizer.json of `kiln prepare` that encodes the "
                      "records (e.g. data/kjv_char)")
          .files(),
      ParamSpec::text("template", "plain",
                      "chat template: plain (\"User: \"/\"Assistant: \"/\"System: \" lines, a "
                      "blank line after each response) or chatml (<|im_start|>role ... "
                      "<|im_end|>); a response counts with its end-of-turn suffix")
          .one_of(chat_template_names()),
      ParamSpec::text("on_bad_record", "refuse",
                      "a record that is not JSON, lacks a field, names an unknown role or is "
                      "longer than train.seq_len + 1 tokens: refuse (stop with its file:line) "
                      "or skip (count it; the data line of the run's header says how many)")
          .one_of({"refuse", "skip"})}},
    open_split);

}  // namespace
}  // namespace kiln
