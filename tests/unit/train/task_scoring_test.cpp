// Task scoring (core/train/task_scoring.h) against the same quantities computed here one request
// at a time, without batches or padding: each choice's log-likelihood by lm-evaluation-harness's
// recipe spelled out (trailing spaces of the context moved to the choice, the sequence cut from
// the left to the model's context), acc and acc_norm from those, the standard error by the
// binomial formula, and greedy generation with stop strings. The batch size changes nothing.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/api/tokenizer.h"
#include "core/config/config.h"
#include "core/data/prepare.h"
#include "core/train/assemble.h"
#include "core/train/task_suite.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::write_text;

constexpr int64_t kBlock = 16;

// The char tokenizer fitted on "\n" and printable ASCII (sorted bytes): "\n" is 0, byte
// b >= 0x20 is b - 0x1f.
std::vector<int64_t> ids_of(const std::string& text) {
  std::vector<int64_t> ids;
  for (char c : text)
    ids.push_back(c == '\n' ? 0 : c - 0x20 + 1);
  return ids;
}

class TaskScoring : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string corpus;
    for (int i = 0; i < 40; ++i) {
      corpus += "\n";
      for (char c = 0x20; c < 0x7f; ++c)
        corpus += c;
    }
    write_text(dir_ / "corpus.txt", corpus);
    PrepareOptions prepare;
    prepare.inputs = {dir_ / "corpus.txt"};
    prepare.out_dir = dir_ / "data";
    prepare_dataset(prepare);
    tokenizer_ = load_tokenizer(dir_ / "data");
    write_text(dir_ / "run.toml", fmt::format(R"([run]
seed = 11
threads = 1
device = "cpu"
[model]
type = "gpt"
n_layer = 2
n_head = 2
n_embd = 16
block_size = {1}
vocab_size = 128
[data]
train = "{0}/data/train_*.bin"
[train]
steps = 1
micro_batch = 1
seq_len = {1}
)",
                                              dir_.str(), kBlock));
    run_ = std::make_unique<AssembledRun>(assemble(load_config(dir_ / "run.toml", {})));
    torch::NoGradGuard no_grad;
    for (auto& p : run_->model->parameters())  // spread the choices' likelihoods apart
      p.mul_(4.0);
  }

  PreparedTask task(const std::string& keys, const std::string& items) {
    write_text(dir_ / "items.jsonl", items);
    write_text(dir_ / "task.toml", keys + "items = \"items.jsonl\"\n");
    return prepare_task(load_task(read_task_spec(dir_ / "task.toml")), *tokenizer_, kBlock,
                        run_->model->vocab_size());
  }

  // log p(continuation | context) for one unpadded row.
  double loglik(const std::string& context_text, const std::string& choice) {
    std::string context = context_text;
    std::string continuation = choice;
    while (!context.empty() && context.back() == ' ') {
      continuation.insert(continuation.begin(), ' ');
      context.pop_back();
    }
    std::vector<int64_t> seq = ids_of(context);
    const std::vector<int64_t> cont = ids_of(continuation);
    seq.insert(seq.end(), cont.begin(), cont.end());
    seq.pop_back();
    if (static_cast<int64_t>(seq.size()) > kBlock) seq.erase(seq.begin(), seq.end() - kBlock);
    torch::NoGradGuard no_grad;
    run_->model->eval();
    const torch::Tensor logp =
        torch::log_softmax(run_->model->forward(torch::tensor(seq).unsqueeze(0))[0]
                               .narrow(-1, 0, run_->model->vocab_size())
                               .to(torch::kDouble),
                           -1);
    double sum = 0;
    const size_t first = seq.size() - cont.size();
    for (size_t j = 0; j < cont.size(); ++j)
      sum += logp[static_cast<int64_t>(first + j)][cont[j]].item<double>();
    return sum;
  }

  // Greedy generation for one row: the prompt cut to leave `max_tokens` of room.
  std::string greedy(const std::string& prompt, int64_t max_tokens, const std::string& stop) {
    std::vector<int64_t> ids = ids_of(prompt);
    if (static_cast<int64_t>(ids.size()) > kBlock - max_tokens)
      ids.erase(ids.begin(), ids.end() - (kBlock - max_tokens));
    std::vector<uint32_t> out;
    torch::NoGradGuard no_grad;
    run_->model->eval();
    for (int64_t t = 0; t < max_tokens; ++t) {
      const torch::Tensor logits = run_->model->forward(torch::tensor(ids).unsqueeze(0))[0];
      const int64_t next = logits[static_cast<int64_t>(ids.size()) - 1]
                               .narrow(0, 0, run_->model->vocab_size())
                               .argmax()
                               .item<int64_t>();
      ids.push_back(next);
      out.push_back(static_cast<uint32_t>(next));
      const std::string text = tokenizer_->decode(out);
      if (text.find(stop) != std::string::npos) return text.substr(0, text.find(stop));
    }
    return tokenizer_->decode(out);
  }

  testing::TempDir dir_;
  std::shared_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<AssembledRun> run_;
};

struct Item {
  std::string context;
  std::vector<std::string> choices;
  int label;
};

const std::vector<Item> kItems = {
    {"The cat sat on the", {" mat", " hat", " dog"}, 0},
    {"ab", {" c", " dd", " eee"}, 2},
    {"hello there, how are you today my friend", {" well", " ill"}, 1},  // cut to the block
    {"x ", {"y", "zz"}, 0},                                              // a trailing space
    {"Q", {" a long choice", " b"}, 1},
    {"one two three", {" four", " five", " six", " seven"}, 3},
    {"z", {"!", "?"}, 0},
};

TEST_F(TaskScoring, ChoiceLogLikelihoodsAccAndStandardErrorsMatchOneRowAtATime) {
  std::string jsonl;
  for (const Item& item : kItems) {
    std::string choices;
    for (const auto& c : item.choices)
      choices += (choices.empty() ? "\"" : ", \"") + c + "\"";
    jsonl += fmt::format("{{\"context\": \"{}\", \"choices\": [{}], \"label\": {}}}\n",
                         item.context, choices, item.label);
  }
  const PreparedTask t = task("kind = \"choice\"\n", jsonl);
  const TaskResult result = score_task(*run_, *tokenizer_, t, {3});
  ASSERT_EQ(result.details.size(), kItems.size());
  double acc = 0, acc_norm = 0;
  int64_t cut = 0;
  for (size_t i = 0; i < kItems.size(); ++i) {
    const Item& item = kItems[i];
    bool longer = false;  // context + choice, less the last token, over the block
    for (const auto& choice : item.choices)
      longer = longer || static_cast<int64_t>(item.context.size() + choice.size()) - 1 > kBlock;
    cut += longer;
    std::vector<double> ll, per_byte;
    for (size_t c = 0; c < item.choices.size(); ++c) {
      ll.push_back(loglik(item.context, item.choices[c]));
      per_byte.push_back(ll.back() / static_cast<double>(item.choices[c].size()));
      EXPECT_NEAR(result.details[i].loglik[c], ll.back(), 1e-4) << "item " << i << " choice " << c;
    }
    const auto best = std::max_element(ll.begin(), ll.end()) - ll.begin();
    const auto best_norm = std::max_element(per_byte.begin(), per_byte.end()) - per_byte.begin();
    acc += best == item.label;
    acc_norm += best_norm == item.label;
  }
  const double n = static_cast<double>(kItems.size());
  acc /= n;
  acc_norm /= n;
  ASSERT_EQ(result.metrics.size(), 2u);
  EXPECT_EQ(result.metrics[0].name, "acc");
  EXPECT_DOUBLE_EQ(result.metrics[0].value, acc);
  EXPECT_NEAR(result.metrics[0].stderr_, std::sqrt(acc * (1 - acc) / (n - 1)), 1e-12);
  EXPECT_EQ(result.metrics[1].name, "acc_norm");
  EXPECT_DOUBLE_EQ(result.metrics[1].value, acc_norm);
  EXPECT_NEAR(result.metrics[1].stderr_, std::sqrt(acc_norm * (1 - acc_norm) / (n - 1)), 1e-12);
  EXPECT_EQ(result.truncated, cut);
  EXPECT_GT(cut, 0);
  EXPECT_EQ(result.items, 7);

  const TaskResult one_by_one = score_task(*run_, *tokenizer_, t, {1});
  for (size_t i = 0; i < kItems.size(); ++i)
    for (size_t c = 0; c < kItems[i].choices.size(); ++c)
      EXPECT_NEAR(one_by_one.details[i].loglik[c], result.details[i].loglik[c], 1e-5);
}

TEST_F(TaskScoring, GreedyGenerationStopsAndMatchesAfterNormalizing) {
  const std::vector<std::string> prompts = {"abc", "Hello, w", "a much longer prompt than fits",
                                            "xyz", "0123"};
  // Two answers are what greedy generation gives (in upper case, with spaces), three are not.
  const std::string first = greedy(prompts[0], 6, "o");
  const std::string second = greedy(prompts[1], 6, "o");
  std::string jsonl;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string answer = i == 0 ? "  " + first : i == 1 ? second : "no such answer";
    for (char& c : answer)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    nlohmann::json item = {{"prompt", prompts[i]}, {"answer", answer}};
    jsonl += item.dump() + "\n";
  }
  const PreparedTask t = task(
      "kind = \"generate\"\nmax_tokens = 6\nstop = [\"o\"]\nnormalize = [\"strip\", \"lower\"]\n",
      jsonl);
  const TaskResult result = score_task(*run_, *tokenizer_, t, {2});
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(result.details[i].text, greedy(prompts[i], 6, "o")) << prompts[i];
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(result.details[i].score, i < 2 ? 1.0 : 0.0) << prompts[i];
  ASSERT_EQ(result.metrics.size(), 1u);
  EXPECT_EQ(result.metrics[0].name, "exact_match");
  EXPECT_DOUBLE_EQ(result.metrics[0].value, 2.0 / 5);
  EXPECT_NEAR(result.metrics[0].stderr_, std::sqrt(0.4 * 0.6 / 4), 1e-12);
  EXPECT_EQ(result.truncated, 1);
  const TaskResult one_by_one = score_task(*run_, *tokenizer_, t, {1});
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(one_by_one.details[i].generated, result.details[i].generated);
}

TEST_F(TaskScoring, AChoiceLongerThanTheContextIsRefusedBeforeAnyIsScored) {
  EXPECT_EQ(testing::user_error_of([&] {
              task("kind = \"choice\"\n",
                   "{\"context\": \"a\", \"choices\": [\" b\", \" this choice is far too "
                   "long\"], \"label\": 0}\n");
            }),
            dir_ / "items.jsonl" +
                ":1: choice 1 is 28 tokens, longer than the model's context (16) even with the "
                "context cut away: shorten the choice");
}

// The tokenizer's ids run to 95 ('~'); a model of 64 ids has no row for most of them.
TEST_F(TaskScoring, ATokenIdPastTheModelsVocabularyIsRefused) {
  write_text(dir_ / "items.jsonl", "{\"prompt\": \"AB~\", \"answer\": \"c\"}\n");
  write_text(dir_ / "task.toml", "kind = \"generate\"\nmax_tokens = 4\nitems = \"items.jsonl\"\n");
  const Task t = load_task(read_task_spec(dir_ / "task.toml"));
  EXPECT_EQ(testing::user_error_of([&] { prepare_task(t, *tokenizer_, kBlock, 64); }),
            dir_ / "items.jsonl" +
                ":1: the item encodes to token id 95, but the model has 64 ids: use text the run "
                "was trained on");
  EXPECT_NO_THROW(prepare_task(t, *tokenizer_, kBlock, 96));
}

}  // namespace
}  // namespace kiln
