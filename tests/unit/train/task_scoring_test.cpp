// Task scoring (core/train/task_scoring.h) against the same quantities computed here one request
// at a time, without batches or padding: each choice's log-likelihood by lm-evaluation-harness's
// recipe spelled out (lm_eval/api/model.py _encode_pair: the continuation is " " + the choice,
// the context's trailing whitespace moved to it; the sequence cut from the left to the model's
// context), acc, acc_norm (per character of the bare choice) and acc_bytes (per UTF-8 byte) from
// those, the standard error by the binomial formula, and greedy generation with stop strings and
// the harness's exact_match options. The batch size changes nothing.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/api/tokenizer.h"
#include "core/config/config.h"
#include "core/data/prepare.h"
#include "core/train/assemble.h"
#include "core/train/task_suite.h"
#include "core/util/text.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::write_text;

constexpr int64_t kBlock = 16;

// The char tokenizer fitted on "\n", printable ASCII and "é" (sorted bytes): "\n" is 0, byte
// b in 0x20..0x7e is b - 0x1f, and é's bytes 0xA9 and 0xC3 are 96 and 97.
std::vector<int64_t> ids_of(const std::string& text) {
  std::vector<int64_t> ids;
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    ids.push_back(b == '\n' ? 0 : b == 0xA9 ? 96 : b == 0xC3 ? 97 : b - 0x20 + 1);
  }
  return ids;
}

// Python's len(): UTF-8 bytes that do not continue a character.
double characters(const std::string& text) {
  return static_cast<double>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

class TaskScoring : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string corpus;
    for (int i = 0; i < 40; ++i) {
      corpus += "\n";
      for (char c = 0x20; c < 0x7f; ++c)
        corpus += c;
      corpus += "é";
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

  // log p(" " + choice | context) for one unpadded row (the context's trailing whitespace, all
  // of it, moved to the continuation).
  double loglik(const std::string& context_text, const std::string& choice) {
    std::string context = context_text;
    std::string continuation = " " + choice;
    while (!context.empty() && std::isspace(static_cast<unsigned char>(context.back()))) {
      continuation.insert(continuation.begin(), context.back());
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
    {"The cat sat on the", {"mat", "hat", "dog"}, 0},
    {"ab", {"c", "dd", "eee"}, 2},
    {"hello there, how are you today my friend", {"well", "ill"}, 1},  // cut to the block
    {"x ", {"y", "zz"}, 0},                                            // a trailing space
    {"Q:\n", {"a long choice", "b"}, 1},                               // a trailing newline
    {"one two three", {"four", "five", "six", "seven"}, 3},
    {"z", {"!", "?"}, 0},
    {"caf", {"é", "ée", "ez"}, 0},  // characters and bytes differ
    {"d", {"ééé", "eeee", "éa"}, 1},
    {"r\u00e9", {"sum\u00e9", "e", "ss\u00e9s"}, 2},
    {"abcdefghijklm", {"x", "y"}, 0},  // a batch of it and "Q:\n" reaches past the block
};

TEST_F(TaskScoring, ChoiceLogLikelihoodsAccAndStandardErrorsMatchOneRowAtATime) {
  std::string jsonl;
  for (const Item& item : kItems) {
    jsonl +=
        nlohmann::json{{"context", item.context}, {"choices", item.choices}, {"label", item.label}}
            .dump() +
        "\n";
  }
  const PreparedTask t = task("kind = \"choice\"\n", jsonl);
  const TaskResult result = score_task(*run_, *tokenizer_, t, {16});
  ASSERT_EQ(result.details.size(), kItems.size());
  std::vector<double> expected(3, 0.0);  // acc, acc_norm, acc_bytes
  int64_t cut = 0;
  for (size_t i = 0; i < kItems.size(); ++i) {
    const Item& item = kItems[i];
    bool longer = false;  // context + " " + choice, less the last token, over the block
    for (const auto& choice : item.choices)
      longer = longer || static_cast<int64_t>(item.context.size() + choice.size()) > kBlock;
    cut += longer;
    std::vector<double> ll, per_char, per_byte;
    for (size_t c = 0; c < item.choices.size(); ++c) {
      ll.push_back(loglik(item.context, item.choices[c]));
      per_char.push_back(ll.back() / characters(item.choices[c]));
      per_byte.push_back(ll.back() / static_cast<double>(item.choices[c].size()));
      EXPECT_NEAR(result.details[i].loglik[c], ll.back(), 1e-4) << "item " << i << " choice " << c;
    }
    int k = 0;
    for (const auto* scores : {&ll, &per_char, &per_byte}) {
      const auto best = std::max_element(scores->begin(), scores->end()) - scores->begin();
      expected[static_cast<size_t>(k++)] += best == item.label;
    }
  }
  const double n = static_cast<double>(kItems.size());
  const char* names[] = {"acc", "acc_norm", "acc_bytes"};
  ASSERT_EQ(result.metrics.size(), 3u);
  for (size_t m = 0; m < 3; ++m) {
    const double p = expected[m] / n;
    EXPECT_EQ(result.metrics[m].name, names[m]);
    EXPECT_DOUBLE_EQ(result.metrics[m].value, p) << names[m];
    EXPECT_NEAR(result.metrics[m].stderr_, std::sqrt(p * (1 - p) / (n - 1)), 1e-12) << names[m];
  }
  EXPECT_EQ(result.truncated, cut);
  EXPECT_GT(cut, 0);
  EXPECT_EQ(result.items, static_cast<int64_t>(kItems.size()));

  const TaskResult one_by_one = score_task(*run_, *tokenizer_, t, {1});
  for (size_t i = 0; i < kItems.size(); ++i)
    for (size_t c = 0; c < kItems[i].choices.size(); ++c)
      EXPECT_NEAR(one_by_one.details[i].loglik[c], result.details[i].loglik[c], 1e-5);
}

TEST_F(TaskScoring, GreedyGenerationStopsAndMatchesByTheHarnesssExactMatch) {
  const std::vector<std::string> prompts = {"abc", "Hello, w", "a much longer prompt than fits",
                                            "xyz", "0123"};
  // Two answers are what greedy generation gives (in upper case, the first with a digit that
  // regexes_to_ignore drops), three are not. The output's whitespace is stripped by the
  // filter, the answer's is not: an answer is written without any.
  const std::string first = python_strip(greedy(prompts[0], 6, "o"));
  const std::string second = python_strip(greedy(prompts[1], 6, "o"));
  std::string jsonl;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string answer = i == 0 ? first + "7" : i == 1 ? second : "no such answer";
    for (char& c : answer)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    nlohmann::json item = {{"prompt", prompts[i]}, {"answer", answer}};
    jsonl += item.dump() + "\n";
  }
  const PreparedTask t = task(
      "kind = \"generate\"\nmax_gen_toks = 6\nuntil = [\"o\"]\nfilter = \"remove_whitespace\"\n"
      "ignore_case = true\nregexes_to_ignore = [\"[0-9]\"]\n",
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
                   "{\"context\": \"a\", \"choices\": [\"b\", \"this choice is far too "
                   "long\"], \"label\": 0}\n");
            }),
            dir_ / "items.jsonl" +
                ":1: choice 1 is 28 tokens, longer than the model's context (16) even with the "
                "context cut away: shorten the choice");
}

// The tokenizer's ids run to 95 ('~'); a model of 64 ids has no row for most of them.
TEST_F(TaskScoring, ATokenIdPastTheModelsVocabularyIsRefused) {
  write_text(dir_ / "items.jsonl", "{\"prompt\": \"AB~\", \"answer\": \"c\"}\n");
  write_text(dir_ / "task.toml",
             "kind = \"generate\"\nmax_gen_toks = 4\nitems = \"items.jsonl\"\n");
  const Task t = load_task(read_task_spec(dir_ / "task.toml"));
  EXPECT_EQ(testing::user_error_of([&] { prepare_task(t, *tokenizer_, kBlock, 64); }),
            dir_ / "items.jsonl" +
                ":1: the item encodes to token id 95, but the model has 64 ids: use text the run "
                "was trained on");
  EXPECT_NO_THROW(prepare_task(t, *tokenizer_, kBlock, 96));
}

}  // namespace
}  // namespace kiln
