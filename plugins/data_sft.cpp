// data "sft": fine-tuning on prompt/response records (JSON Lines, read and tokenized by
// core/data/chat_records.h), with a loss that counts only the response tokens.
//
// Rows: padded by default, each row one record from its first token, padded to train.seq_len
// (padding targets are never counted). Attention is causal, so a record's tokens see only
// themselves and what came before them in the record. With data.pack = true, records are packed
// in file order into rows of seq_len inputs (core/data/packing.h): each record keeps its own
// positions from 0 and attention stays inside it (Batch::positions), its last token predicts
// nothing of the next record, and a row wastes only the places no whole record fits into.
//
// Order: the rows in file order (shuffle the file to mix them), rank r taking the rows r
// micro-batches further in each global batch. Training reads one endless stream: global row g is
// row g mod n, whatever the world size, so a step's rows are the same on any number of ranks and
// a resume at another one continues with the rows it would have read. An evaluation reads
// passes: the rows once, the last global batch filled up with empty rows (nothing counted), so an
// evaluation over batches_per_pass() counts every record exactly once. The position is the next
// global batch's first row (its row and epoch).
#include <algorithm>

#include <fmt/format.h>

#include <ATen/ATen.h>

#include "core/api/data_source.h"
#include "core/api/tokenizer.h"
#include "core/data/chat_records.h"
#include "core/data/packing.h"
#include "core/util/error.h"

namespace kiln {
namespace {

// Records as rows: row i holds records [starts[i], starts[i + 1]), one each unless packed.
std::vector<int64_t> rows_of(const ChatRecords& records, int64_t seq_len, bool pack) {
  std::vector<int64_t> inputs;  // a record of L tokens fills L - 1 input places
  for (int64_t r = 0; r < records.size(); ++r) {
    inputs.push_back(records.starts[static_cast<size_t>(r) + 1] -
                     records.starts[static_cast<size_t>(r)] - 1);
  }
  if (pack) return pack_in_order(inputs, seq_len);
  std::vector<int64_t> one_each(inputs.size() + 1);
  for (size_t i = 0; i < one_each.size(); ++i)
    one_each[i] = static_cast<int64_t>(i);
  return one_each;
}

class SftSource : public DataSource {
 public:
  SftSource(std::string pattern, ChatRecords records, std::string tokenizer_dir,
            const DataRequest& request, bool pack)
      : pattern_(std::move(pattern)),
        records_(std::move(records)),
        tokenizer_dir_(std::move(tokenizer_dir)),
        row_starts_(rows_of(records_, request.seq_len, pack)),
        rows_(request.micro_batch),
        cols_(request.seq_len),
        rank_(request.rank),
        global_rows_(request.micro_batch * request.world),
        endless_(request.endless),
        pack_(pack),
        pinned_(request.pinned) {
    rows_per_pass_ = (row_count() + global_rows_ - 1) / global_rows_ * global_rows_;
  }

  Batch next() override {
    auto options = at::TensorOptions().pinned_memory(pinned_);
    Batch batch{at::zeros({rows_, cols_}, options.dtype(at::kLong)),
                at::zeros({rows_, cols_}, options.dtype(at::kLong)),
                at::zeros({rows_, cols_}, options.dtype(at::kBool)),
                pack_ ? at::empty({rows_, cols_}, options.dtype(at::kLong)) : at::Tensor()};
    const int64_t n = row_count();
    for (int64_t row = 0; row < rows_; ++row) {
      const int64_t global = next_row_ + rank_ * rows_ + row;
      if (endless_) {
        fill_row(batch, row, global % n);
      } else {
        fill_row(batch, row, global < n ? global : -1);
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
        position.offset >= 0 && position.offset < (endless_ ? row_count() : rows_per_pass_);
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
    const int64_t inputs = static_cast<int64_t>(records_.tokens.size()) - records_.size();
    std::string notes;
    if (records_.split > 0) notes += fmt::format(" | {} long record(s) split", records_.split);
    if (records_.skipped > 0) {
      notes += fmt::format(" | skipped {} bad record(s), the first {}", records_.skipped,
                           records_.first_skipped);
    }
    return fmt::format(
        "{} records ({} tokens, {} of them counted by the loss) from {}, {} {} rows of {} "
        "inputs, {:.1f}% of their places tokens{}",
        records_.size(), records_.tokens.size(), counted, pattern_,
        pack_ ? "packed into" : "padded, one a row:", row_count(), cols_,
        100.0 * static_cast<double>(inputs) / static_cast<double>(row_count() * cols_), notes);
  }

 private:
  int64_t row_count() const { return static_cast<int64_t>(row_starts_.size()) - 1; }

  // Row `row` of the batch from row `packed` of the data (-1: an empty row): each record's tokens
  // as inputs, the same shifted by one as targets, which of those targets are response tokens,
  // and (packed) each input's position in its record; the places after the last record are a
  // document of padding, counted by nothing.
  void fill_row(Batch& batch, int64_t row, int64_t packed) const {
    auto inputs = batch.inputs.accessor<int64_t, 2>()[row];
    auto targets = batch.targets.accessor<int64_t, 2>()[row];
    auto mask = batch.loss_mask.accessor<bool, 2>()[row];
    int64_t* positions = pack_ ? batch.positions.data_ptr<int64_t>() + row * cols_ : nullptr;
    int64_t place = 0;
    for (int64_t record = packed < 0 ? 0 : row_starts_[static_cast<size_t>(packed)];
         packed >= 0 && record < row_starts_[static_cast<size_t>(packed) + 1]; ++record) {
      const int64_t begin = records_.starts[static_cast<size_t>(record)];
      const int64_t length = records_.starts[static_cast<size_t>(record) + 1] - begin;
      for (int64_t i = 0; i + 1 < length; ++i, ++place) {
        const size_t at = static_cast<size_t>(begin + i);
        inputs[place] = records_.tokens[at];
        targets[place] = records_.tokens[at + 1];
        mask[place] = records_.counted[at + 1] != 0;
        if (positions) positions[place] = i;
      }
    }
    for (int64_t i = 0; positions && place + i < cols_; ++i)
      positions[place + i] = i;
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
  std::vector<int64_t> row_starts_;  // row i holds records [row_starts_[i], row_starts_[i + 1])
  int64_t rows_, cols_, rank_;
  int64_t global_rows_;    // rows of one global batch: micro_batch x readers
  int64_t rows_per_pass_;  // the rows, rounded up to whole global batches
  bool endless_;           // DataRequest::endless: the trainer's stream
  bool pack_;              // data.pack
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
  const std::optional<SplitFiles> split =
      split_files(p, request,
                  "data.train is empty: set it to a JSON Lines file of records such as "
                  "\"experiments/data/kjv_sft_train.jsonl\"",
                  "fix the path or pattern");
  if (!split) return nullptr;
  std::shared_ptr<Tokenizer> tokenizer = open_tokenizer(p, request);
  ChatRecordOptions options{chat_template(p.text("template")), tokenizer.get(), request.seq_len + 1,
                            p.text("on_bad_record") == "skip", p.text("on_long_record") == "split"};
  return std::make_shared<SftSource>(split->pattern, read_chat_records(split->files, options),
                                     p.path("tokenizer"), request, p.flag("pack"));
}

const bool registered = DataRegistry::add(
    {"sft",
     "prompt/response records (JSON Lines) under a chat template, one a row padded to seq_len or "
     "packed; the loss counts only the response tokens",
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
          .one_of({"refuse", "skip"}),
      ParamSpec::flag("pack", false,
                      "pack records in file order into rows of train.seq_len, each record with "
                      "its own positions and attention kept inside it; false = one record a row, "
                      "padded")
          .added_later(),
      ParamSpec::text("on_long_record", "refuse",
                      "a record longer than train.seq_len + 1 tokens: refuse (a bad record, as "
                      "data.on_bad_record says) or split (pieces of seq_len + 1 tokens, each a "
                      "record, the last token of one the first of the next)")
          .one_of({"refuse", "split"})
          .added_later()}},
    open_split);

}  // namespace
}  // namespace kiln
