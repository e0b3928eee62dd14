// The loss of fine-tuning data (data "sft") counts only response tokens: checked against a
// cross-entropy computed here over the response positions the test finds itself; gradient
// accumulation over micro-batches that count different numbers of tokens equals one batch; and
// the source's rows (one record each, padded, an epoch's last batch filled with empty rows).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <fmt/format.h>

#include "core/api/tokenizer.h"
#include "core/config/config.h"
#include "core/train/assemble.h"
#include "core/train/trainer.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::write_text;

struct Record {
  std::string prompt, response;
  // The plain template, spelled out here rather than asked of Kiln.
  std::string context() const { return "User: " + prompt + "\nAssistant: "; }
  std::string text() const { return context() + response + "\n\n"; }
};

// Four records whose responses differ in length, so that two micro-batches of two count
// different numbers of tokens.
const std::vector<Record> kRecords = {
    {"What is the first?", "It is the one before all the others, Q."},
    {"And the second?", "The one after the first, which is long."},
    {"Third?", "Short."},
    {"Fourth one, please, in full detail?", "No."},
};

constexpr int64_t kSeqLen = 96;

class MaskedLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string alphabet = "\n";
    for (char c = 0x20; c < 0x7f; ++c)
      alphabet += c;
    auto tokenizer = new_tokenizer("char");
    tokenizer->fit(alphabet);
    save_tokenizer(*tokenizer, "char", dir_.str());
    std::string jsonl;
    for (const Record& r : kRecords) {
      jsonl += fmt::format(R"({{"prompt": "{}", "response": "{}"}})", r.prompt, r.response) + "\n";
    }
    write_text(dir_ / "records.jsonl", jsonl);
    write_text(dir_ / "sft.toml", fmt::format(R"([run]
seed = 7
threads = 1
device = "cpu"
[model]
type = "gpt"
n_layer = 1
n_head = 2
n_embd = 16
block_size = {1}
vocab_size = 128
dropout = 0.0
[data]
type = "sft"
train = "{0}/records.jsonl"
val = "{0}/records.jsonl"
tokenizer = "{0}"
[train]
steps = 1
micro_batch = 4
seq_len = {1}
grad_clip = 0.0
[eval]
every = 0
)",
                                              dir_.str(), kSeqLen));
  }

  AssembledRun assemble_with(const std::vector<std::string>& overrides) {
    return assemble(load_config(dir_ / "sft.toml", overrides));
  }

  testing::TempDir dir_;
};

// Mean cross-entropy of `logits` [rows, seq, vocab] against the record tokens, over the targets
// whose token lies in [from, to) of each record's text (token i + 1 is target i).
double direct_loss(const torch::Tensor& logits, size_t rows,
                   const std::function<std::pair<size_t, size_t>(const Record&)>& range,
                   int64_t* count) {
  auto logp = torch::log_softmax(logits.to(torch::kDouble), -1);
  double sum = 0;
  *count = 0;
  for (size_t row = 0; row < rows; ++row) {
    const Record& r = kRecords[row];
    const std::string text = r.text();
    const auto [from, to] = range(r);
    for (size_t token = std::max<size_t>(from, 1); token < to; ++token) {
      // Char tokenizer fitted on sorted bytes: "\n" is id 0, byte b >= 0x20 is id b - 0x20 + 1.
      const int64_t id = text[token] == '\n' ? 0 : text[token] - 0x20 + 1;
      sum -= logp[static_cast<int64_t>(row)][static_cast<int64_t>(token - 1)][id].item<double>();
      ++*count;
    }
  }
  return sum / static_cast<double>(*count);
}

TEST_F(MaskedLoss, CountsExactlyTheResponseTokens) {
  AssembledRun run = assemble_with({});
  {  // Larger weights spread the tokens' losses apart: a wrong subset cannot average the same.
    torch::NoGradGuard no_grad;
    for (auto& p : run.model->parameters())
      p.mul_(3.0);
  }
  Trainer trainer(run);
  const EvalResult kiln = trainer.evaluate(*run.val_data, 1);

  run.val_data->reset();
  Batch batch = run.val_data->next();
  for (size_t row = 0; row < kRecords.size(); ++row) {  // the rows are the records, in order
    const std::string text = kRecords[row].text();
    for (size_t i = 0; i + 1 < text.size(); ++i) {
      const char c = text[i];
      ASSERT_EQ(batch.inputs[row][i].item<int64_t>(), c == '\n' ? 0 : c - 0x20 + 1) << row;
    }
  }
  torch::NoGradGuard no_grad;
  run.model->eval();
  const int64_t vocab = run.model->vocab_size();
  const torch::Tensor logits = run.model->forward(batch.inputs).narrow(-1, 0, vocab);
  int64_t counted = 0, all = 0;
  const double response = direct_loss(
      logits, kRecords.size(),
      [](const Record& r) {
        return std::pair{r.context().size(), r.text().size()};
      },
      &counted);
  const double every_token = direct_loss(
      logits, kRecords.size(),
      [](const Record& r) {
        return std::pair{size_t{0}, r.text().size()};
      },
      &all);
  EXPECT_EQ(kiln.tokens, counted);
  EXPECT_NEAR(kiln.loss, response, 1e-5);
  EXPECT_GT(std::abs(kiln.loss - every_token), 1e-2) << "prompt tokens would pass unnoticed";
  // Every target of the rows, the padding's too (id 0 after each record).
  auto padded =
      torch::nn::functional::cross_entropy(logits.reshape({-1, vocab}), batch.targets.reshape(-1));
  EXPECT_GT(std::abs(kiln.loss - padded.item<double>()), 1e-2) << "padding would pass unnoticed";
}

TEST_F(MaskedLoss, TwoMicroBatchesOfUnequalCountsEqualOneBatch) {
  AssembledRun one = assemble_with({});
  AssembledRun two =
      assemble_with({"train.micro_batch=2", fmt::format("train.batch_tokens={}", 4 * kSeqLen)});
  ASSERT_EQ(one.grad_accum, 1);
  ASSERT_EQ(two.grad_accum, 2);
  auto a = one.model->parameters(), b = two.model->parameters();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_TRUE(torch::equal(a[i], b[i])) << "not the same initial weights";
  Trainer first(one), second(two);
  const StepStats whole = first.train_step(1), halves = second.train_step(1);
  // Records 0 and 1 count 41 targets each, records 2 and 3 count 8 and 5 (response + "\n\n"):
  // a mean of the two micro-batches' means would weigh a token of the second 82 / 13 times more.
  int64_t expected = 0;
  for (const Record& r : kRecords)
    expected += static_cast<int64_t>(r.response.size()) + 2;
  EXPECT_EQ(whole.counted_tokens, expected);
  EXPECT_EQ(halves.counted_tokens, expected);
  EXPECT_NEAR(whole.loss, halves.loss, 1e-6);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].grad().defined());
    EXPECT_LT((a[i].grad() - b[i].grad()).abs().max().item<double>(), 1e-6) << "parameter " << i;
  }
}

// 4 records in rows of 3. An evaluation reads passes: the second batch holds record 3 and 2
// empty rows. Training reads one stream: the second batch holds records 3, 0 and 1 (the next
// epoch's first), so no row is wasted and a step's rows do not depend on the world size.
TEST_F(MaskedLoss, RowsHoldOneRecordEachTrainingStreamsOnAndAnEvaluationPassEndsInEmptyRows) {
  AssembledRun run = assemble_with({"train.micro_batch=3"});
  std::shared_ptr<DataSource> pass = open_split(run, "train");
  EXPECT_TRUE(pass->masks_loss());
  EXPECT_EQ(pass->batches_per_pass(), 2);
  pass->next();
  Batch second = pass->next();
  const std::string last = kRecords[3].text();
  EXPECT_EQ(second.loss_mask[0].sum().item<int64_t>(),
            static_cast<int64_t>(kRecords[3].response.size()) + 2);
  EXPECT_EQ(second.loss_mask[0][static_cast<int64_t>(last.size()) - 2].item<bool>(), true);
  EXPECT_EQ(second.loss_mask[0][static_cast<int64_t>(last.size()) - 1].item<bool>(), false);
  EXPECT_FALSE(second.loss_mask[1].any().item<bool>());
  EXPECT_FALSE(second.loss_mask[2].any().item<bool>());
  EXPECT_EQ(pass->position().offset, 0);  // the next pass starts
  EXPECT_EQ(pass->position().epoch, 1);

  DataSource& stream = *run.train_data;
  Batch first = stream.next();
  Batch streamed = stream.next();
  EXPECT_TRUE(torch::equal(streamed.inputs[0], second.inputs[0]));  // record 3
  EXPECT_TRUE(torch::equal(streamed.inputs[1], first.inputs[0]));   // record 0 again
  EXPECT_TRUE(torch::equal(streamed.inputs[2], first.inputs[1]));   // record 1
  EXPECT_EQ(stream.position().offset, 2);  // the next batch starts at record 2 of epoch 1
  EXPECT_EQ(stream.position().epoch, 1);
}

}  // namespace
}  // namespace kiln
