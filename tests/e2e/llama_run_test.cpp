// The llama model, the muon optimizer and activation checkpointing through the real binary:
// training, a kill and an exact resume, eval, sampling, export, two pipeline stages.
#include <sstream>
#include <tuple>

#include "ranks.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
class LlamaRun : public testing::TinyRun {
 protected:
  // A tiny llama on the fixture's character corpus.
  std::string llama_experiment() {
    const std::string path = dir_ / "llama.toml";
    testing::write_text(path, fmt::format(R"([run]
db = "{0}"
out_dir = "{1}/runs"
threads = 1

[model]
type = "llama"
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 32
ffn_dim = 64
block_size = 32
vocab_size = 64

[data]
train = "{1}/data/train_*.bin"
val = "{1}/data/val_*.bin"

[train]
steps = 24
micro_batch = 8
seq_len = 32

[optimizer]
lr = 1e-2

[eval]
every = 12
steps = 2
)",
                                          db(), dir_.str()));
    return path;
  }

  // The victim is killed right after its second snapshot is published (step 8); resumed, it
  // must end with the uninterrupted run's 24 losses bit for bit.
  void expect_exact_resume(const std::string& exp, const std::string& settings) {
    auto ref = run_kiln("run " + exp + " --name ref" + settings);
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    std::vector<std::string> args = {"run", exp, "--name", "victim"};
    std::istringstream words(settings);
    for (std::string w; words >> w;)
      args.push_back(w);
    const std::string log = dir_ / "victim.log";
    auto killed = testing::run_child(args, log, "snapshot.published:2");
    ASSERT_TRUE(killed.killed) << testing::read_file(log);
    auto resumed = run_kiln("resume victim --db " + db());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming after step 8"), std::string::npos) << resumed.output;
    const auto expected = losses("ref");
    ASSERT_EQ(expected.size(), 24u);
    EXPECT_EQ(losses("victim"), expected);
  }
};

TEST_F(LlamaRun, TrainsResumesExactlyEvaluatesSamplesAndExports) {
  const std::string exp = llama_experiment();
  expect_exact_resume(exp, " --set checkpoint.every=4");
  const auto curve = losses("ref");
  EXPECT_LT(curve.back(), curve.front() - 0.5) << curve.front() << " -> " << curve.back();

  auto eval = run_kiln("eval ref --split val --db " + db());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("val loss"), std::string::npos) << eval.output;
  const std::string args = "sample ref --prompt 'In the' --tokens 20 --seed 3 --db " + db();
  auto one = run_kiln(args), two = run_kiln(args);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(one.output, two.output);
  EXPECT_NE(one.output.find("In the"), std::string::npos) << one.output;

  // Export, then model.init_from with lr 0: the one step's eval sees the exported weights.
  const std::string weights = dir_ / "ref.safetensors";
  auto exported = run_kiln("export ref -o " + weights + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  auto again = run_kiln("run " + exp + " --name again --set model.init_from=" + weights +
                        " --set optimizer.lr=0 --set train.steps=1 --set eval.every=1");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  auto eval_loss = [&](const std::string& run, int step) {  // the run's own, not `kiln eval`'s
    return testing::query_doubles(
        db(), fmt::format("select loss from evals join runs on id = "
                          "run_id where name = '{}' and step = {} and checkpoint = ''",
                          run, step));
  };
  ASSERT_EQ(eval_loss("ref", 24).size(), 1u);
  ASSERT_EQ(eval_loss("again", 1).size(), 1u);
  EXPECT_NEAR(eval_loss("ref", 24)[0], eval_loss("again", 1)[0], 1e-6);
}

TEST_F(LlamaRun, MuonTrainsAndResumesExactly) {
  const std::string exp = experiment();  // the fixture's tiny gpt
  expect_exact_resume(exp,
                      " --set optimizer.type=muon --set optimizer.lr=0.02 --set "
                      "optimizer.adam_lr=0.01 --set train.steps=24 --set checkpoint.every=4");
  const auto curve = losses("ref");
  EXPECT_LT(curve.back(), curve.front() - 0.5) << curve.front() << " -> " << curve.back();
}

TEST_F(LlamaRun, ActivationCheckpointingLeavesTheCurveBitForBit) {
  // gpt with dropout (the recomputation must draw the same masks) and llama.
  const std::string gpt = experiment();
  const std::string llama = llama_experiment();
  for (const auto& [exp, name, extra] :
       {std::tuple{gpt, std::string("gpt"), std::string(" --set model.dropout=0.1")},
        std::tuple{llama, std::string("llama"), std::string()}}) {
    const std::string common = " --set train.steps=10 --set eval.every=5" + extra;
    ASSERT_EQ(run_kiln("run " + exp + " --name " + name + "_plain" + common).exit_code, 0);
    auto checked = run_kiln("run " + exp + " --name " + name + "_checked" + common +
                            " --set model.activation_checkpointing=full");
    ASSERT_EQ(checked.exit_code, 0) << checked.output;
    EXPECT_EQ(losses(name + "_plain"), losses(name + "_checked")) << name;
    ASSERT_EQ(losses(name + "_plain").size(), 10u);
  }
}

TEST_F(LlamaRun, TwoPipelineStagesFollowTheSingleProcessCurve) {
  const std::string exp = llama_experiment();
  const std::string batch =
      " --set train.steps=8 --set train.micro_batch=4 --set train.batch_tokens=256 "
      "--set eval.every=0 --set checkpoint.every=0";
  ASSERT_EQ(run_kiln("run " + exp + " --name single" + batch).exit_code, 0);
  const int port = testing::free_local_port();
  auto staged = run_kiln(
      fmt::format("launch --nproc-per-node 2 --master-port {} -- run {} --name staged --set "
                  "parallel.type=pipeline --set parallel.pp=2 --set parallel.microbatches=2{}",
                  port, exp, batch));
  ASSERT_EQ(staged.exit_code, 0) << staged.output;
  const auto single = losses("single"), pipelined = losses("staged");
  ASSERT_EQ(pipelined.size(), single.size());
  for (size_t i = 0; i < single.size(); ++i)
    EXPECT_NEAR(single[i], pipelined[i], 1e-4) << "step " << i + 1;
}

}  // namespace
}  // namespace kiln
