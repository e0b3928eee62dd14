// The samples of a step are the same at any world size, and a resume on another number of ranks
// reads the samples it would have read. Each run traces what it read
// (KILN_TRACE_SAMPLES, core/train/sample_trace.h: a fingerprint of every row's tokens, per step);
// the test gathers every rank's trace and compares step by step with one process's, and the loss
// curves within 1e-4. For token shards, a blend of two sources, and fine-tuning records, padded
// or packed, whose count (25) no world size here divides, so that a pass padded to whole global
// batches would shift the order.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ranks.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;

// Step -> the sorted fingerprints of the rows every rank read for it, from the traces in `dir`.
std::map<int64_t, std::vector<std::string>> steps_read(const std::string& dir) {
  std::map<int64_t, std::vector<std::string>> steps;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(file.path());
    int64_t step = 0;
    std::string fingerprint;
    while (in >> step >> fingerprint)
      steps[step].push_back(fingerprint);
  }
  for (auto& [step, rows] : steps)
    std::sort(rows.begin(), rows.end());
  return steps;
}

class Traced {
 public:
  explicit Traced(const std::string& dir) {
    std::filesystem::create_directories(dir);
    ::setenv("KILN_TRACE_SAMPLES", dir.c_str(), 1);  // the ranks inherit it
  }
  ~Traced() { ::unsetenv("KILN_TRACE_SAMPLES"); }
};

class SampleOrder : public testing::TinyRun {
 protected:
  void expect_same_samples_at_every_world_size(const std::string& exp, const std::string& same);
};

// One process for 8 steps; 2 ranks for 4 then 3 ranks for 4; 3 ranks for 4 then one process.
// Six rows a step: 6, 3 and 2 micro-steps.
void SampleOrder::expect_same_samples_at_every_world_size(const std::string& exp,
                                                          const std::string& same) {
  const testing::TempDir& dir = dir_;
  {
    Traced trace(dir / "one");
    auto one = run_kiln("run " + exp + " --name one --set train.steps=8" + same);
    ASSERT_EQ(one.exit_code, 0) << one.output;
  }
  const std::vector<std::pair<int, int>> worlds = {{2, 3}, {3, 1}};
  for (const auto& [first, second] : worlds) {
    const std::string name = fmt::format("w{}to{}", first, second);
    SCOPED_TRACE(name);
    Traced trace(dir / name);
    const std::string logs = dir / (name + "_rank");
    auto codes = run_ranks(first,
                           "run " + exp + " --name " + name +
                               " --set parallel.type=ddp --set train.steps=4 "
                               "--set checkpoint.every=4" +
                               same,
                           logs);
    ASSERT_EQ(codes, std::vector<int>(first, 0)) << testing::read_file(logs + "0.log");
    const std::string resume = "resume " + name + " --db " + db() + " --set train.steps=8";
    if (second == 1) {
      auto resumed = run_kiln(resume + " --set parallel.type=single");
      ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    } else {
      codes = run_ranks(second, resume, logs);
      ASSERT_EQ(codes, std::vector<int>(second, 0)) << testing::read_file(logs + "0.log");
    }
    const auto want = steps_read(dir / "one"), got = steps_read(dir / name);
    ASSERT_EQ(want.size(), 8u);
    for (int64_t step = 1; step <= 8; ++step) {
      EXPECT_EQ(got.at(step).size(), 6u) << "step " << step;
      EXPECT_EQ(got.at(step), want.at(step)) << "step " << step;
    }
    expect_same_curve("one", name, 8);
  }
}

TEST_F(SampleOrder, TokenShardsGiveEveryStepTheSameRowsAtAnyWorldSize) {
  expect_same_samples_at_every_world_size(
      experiment(), " --set train.micro_batch=1 --set train.batch_tokens=192 --set eval.every=0");
}

TEST_F(SampleOrder, BlendedSourcesGiveEveryStepTheSameRowsAtAnyWorldSize) {
  expect_same_samples_at_every_world_size(
      blend_experiment(),
      " --set train.micro_batch=1 --set train.batch_tokens=192 --set eval.every=0");
}

// An experiment over the first 25 fine-tuning records, rows of `seq_len` (after `extra` in
// [data]); "" when the default corpus's tokenizer is not prepared.
std::string records_experiment(const testing::TempDir& dir, const std::string& db, int seq_len,
                               const std::string& extra) {
  const std::string source = KILN_SOURCE_DIR;
  if (!std::filesystem::exists(source + "/data/kjv_char/tokenizer.json")) return "";
  std::ifstream all(source + "/experiments/data/kjv_sft_train.jsonl");
  std::string line, records;
  for (int n = 0; n < 25 && std::getline(all, line); ++n)
    records += line + "\n";
  testing::write_text(dir / "records.jsonl", records);
  const std::string exp = dir / "sft.toml";
  testing::write_text(exp, fmt::format(R"([run]
db = "{}"
out_dir = "{}"
threads = 1
[model]
type = "gpt"
n_layer = 1
n_head = 2
n_embd = 32
block_size = {}
vocab_size = 64
[data]
type = "sft"
train = "{}"
tokenizer = "{}/data/kjv_char"
{}
[train]
micro_batch = 1
seq_len = {}
batch_tokens = {}
[optimizer]
lr = 1e-2
[eval]
every = 0
)",
                                       db, dir / "runs", seq_len, dir / "records.jsonl", source,
                                       extra, seq_len, 6 * seq_len));
  return exp;
}

TEST_F(SampleOrder, FineTuningRecordsGiveEveryStepTheSameRowsAtAnyWorldSize) {
  const std::string exp = records_experiment(dir_, db(), 192, "");
  if (exp.empty()) GTEST_SKIP() << "SKIP: data/kjv_char is not prepared (tools/setup.sh makes it)";
  expect_same_samples_at_every_world_size(exp, "");
}

// Packed rows of about three records each: 25 records make 9 rows, so 8 steps of 6 read the
// rows more than five times over, across epochs.
TEST_F(SampleOrder, PackedRecordsGiveEveryStepTheSameRowsAtAnyWorldSize) {
  const std::string exp = records_experiment(dir_, db(), 384, "pack = true");
  if (exp.empty()) GTEST_SKIP() << "SKIP: data/kjv_char is not prepared (tools/setup.sh makes it)";
  expect_same_samples_at_every_world_size(exp, "");
}

}  // namespace
}  // namespace kiln
