// LoRA runs through the binary (plugins/lora/adapter_lora.cpp): a fine-tune of a Hugging Face
// folder Kiln exported starts at the base's loss, says what trains, resumes bit for bit, follows
// the single process's curve under ddp, zero, fsdp, tensor and pipeline parallelism with adapter
// dropout (and resumed in one process from their snapshots), is swept with ASHA over its rank,
// alpha and learning rate, exports PEFT's folder beside a merged one, and refuses the exports it
// does not have.
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ranks.h"
#include "snapshot_writers.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;

class LoraRun : public testing::TinyRun {
 protected:
  // A llama base trained for 10 steps and exported; the experiment, pointed at that folder with
  // a rank-4 adapter on every linear layer of its blocks.
  std::string fine_tune(const std::string& adapter_extra = "") {
    std::string text = testing::read_file(experiment());
    text.replace(text.find("type = \"gpt\"\n"), 13,
                 "type = \"llama\"\nn_kv_head = 2\nffn_dim = 64\n");
    const std::string base = dir_ / "llama.toml";
    testing::write_text(base, text);
    EXPECT_EQ(
        run_kiln("run " + base + " --name base --set train.steps=10 --set checkpoint.every=10")
            .exit_code,
        0);
    auto exported = run_kiln("export base -o " + (dir_ / "base_hf") + " --db " + db());
    EXPECT_EQ(exported.exit_code, 0) << exported.output;
    text.replace(text.find("[model]\n"), 8,
                 "[model]\ninit_from = \"" + (dir_ / "base_hf") + "\"\n");
    text += "\n[adapter]\ntype = \"lora\"\nrank = 4\nalpha = 8\n" + adapter_extra;
    const std::string path = dir_ / "lora.toml";
    testing::write_text(path, text);
    return path;
  }

  // The settings the parallel runs below share with their single-process reference.
  static constexpr const char* kParallelSettings =
      " --set optimizer.lr=1e-2 --set train.micro_batch=4 --set train.batch_tokens=512 "
      "--set checkpoint.every=4";

  // Run `name` of `exp` on two ranks under `parallel` for 4 steps, then resume it in one process
  // to step 8: it must follow run "one", the single process's 8 steps. Returns rank 0's output.
  std::string two_ranks_then_one(const std::string& exp, const std::string& name,
                                 const std::string& parallel) {
    const std::string logs = dir_ / (name + "_rank");
    auto exits = run_ranks(2,
                           "run " + exp + " --name " + name + " " + parallel +
                               " --set train.steps=4" + kParallelSettings,
                           logs);
    EXPECT_EQ(exits, (std::vector<int>{0, 0}));
    auto resumed = run_kiln("resume " + name + " --db " + db() +
                            " --set train.steps=8 --set parallel.type=single");
    EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
    expect_same_curve("one", name, 8);
    return exits.logs.at(0);
  }
};

using LoraResume = testing::EachSnapshotWriter<LoraRun>;

KILN_EACH_SNAPSHOT_WRITER(LoraResume);

// Step 1's loss is computed before any update: with B at zero, the base's own, as a full
// fine-tune of the same folder computes it.
TEST_F(LoraRun, AFineTuneStartsAtItsBaseAndSaysWhatTrains) {
  const std::string exp = fine_tune();
  const std::string common = " --set train.steps=6 --set optimizer.lr=1e-2";
  auto ran = run_kiln("run " + exp + " --name tuned" + common);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("adapter lora: "), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("trainable parameters"), std::string::npos) << ran.output;
  ASSERT_EQ(run_kiln("run " + exp + " --name full --set adapter.type=none" + common).exit_code, 0);
  const auto tuned = losses("tuned"), full = losses("full");
  ASSERT_EQ(tuned.size(), 6u);
  ASSERT_EQ(full.size(), 6u);
  EXPECT_EQ(tuned.front(), full.front());
  EXPECT_NE(tuned.back(), full.back());
  EXPECT_LT(tuned.back(), tuned.front());
}

TEST_P(LoraResume, AResumeFollowsTheUninterruptedRunBitForBit) {
  const std::string exp = fine_tune("dropout = 0.1\n");
  const std::string common = " --set train.steps=8 --set optimizer.lr=1e-2";
  ASSERT_EQ(run_kiln("run " + exp + " --name whole" + common).exit_code, 0);
  ASSERT_EQ(run_kiln("run " + exp + " --name paused --until 4" + common).exit_code, 0);
  auto resumed = run_kiln("resume paused --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_curve("whole", "paused", 8, 0.0);
}

TEST_F(LoraRun, DdpWithAdapterDropoutFollowsTheSingleProcess) {
  const std::string exp = fine_tune("dropout = 0.1\n");
  const std::string same =
      " --set train.steps=8 --set optimizer.lr=1e-2 --set train.micro_batch=4 "
      "--set train.batch_tokens=512 --set checkpoint.every=0";
  ASSERT_EQ(run_kiln("run " + exp + " --name one" + same).exit_code, 0);
  const std::string logs = dir_ / "ddp_rank";
  auto codes = run_ranks(2, "run " + exp + " --name ddp --set parallel.type=ddp" + same, logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  expect_same_curve("one", "ddp", 8);
}

// ZeRO over an adapter: its owners split the adapter's weights (the frozen base has no state to
// shard), each rank keeping some of its AdamW state, stage 1 all-reducing the adapter's gradients,
// stage 2 summing each into its owner; both follow the single process's curve with adapter dropout,
// and resume in one process.
TEST_F(LoraRun, ZeroStagesShardTheAdapterAndFollowTheSingleProcess) {
  const std::string exp = fine_tune("dropout = 0.1\n");
  ASSERT_EQ(
      run_kiln("run " + exp + " --name one --set train.steps=8" + kParallelSettings).exit_code, 0);
  for (const std::string stage : {"1", "2"}) {
    SCOPED_TRACE("stage " + stage);
    const std::string header = two_ranks_then_one(
        exp, "z" + stage, "--set parallel.type=zero --set parallel.stage=" + stage);
    // "optimizer state per rank: 0.02, 0.02 MiB": each rank holds a part of the adapter's.
    const auto sizes = testing::optimizer_state_mib(header);
    ASSERT_EQ(sizes.size(), 2u) << header;
    EXPECT_GT(sizes[0], 0) << header;
    EXPECT_GT(sizes[1], 0) << header;
  }
}

// fsdp shards the frozen base as any weight and the adapter with the layer it adapts; tensor
// parallelism cuts each adapter with its layer (B by rows under q, k, v, gate and up, A by columns
// under o and down, their input's dropout mask that slice of the one process's); pipeline stages
// train the adapters of their layers. Each follows the single process's curve with adapter
// dropout, and its snapshot (whole again) resumes in one process.
TEST_F(LoraRun, FsdpTensorAndPipelineParallelismSplitTheAdapterWithItsLayers) {
  const std::string exp = fine_tune("dropout = 0.1\n");
  ASSERT_EQ(
      run_kiln("run " + exp + " --name one --set train.steps=8" + kParallelSettings).exit_code, 0);
  for (const auto& [name, settings] : std::vector<std::pair<std::string, std::string>>{
           {"fsdp", "--set parallel.type=fsdp"},
           {"tp", "--set parallel.type=tensor --set parallel.tp=2"},
           {"pp", "--set parallel.type=pipeline --set parallel.pp=2 --set parallel.microbatches=4"},
       }) {
    SCOPED_TRACE(name);
    two_ranks_then_one(exp, name, settings);
  }
}

// gpt's fused q, k, v: its adapter's B is cut part by part as the weight is.
TEST_F(LoraRun, TensorParallelismCutsGptsFusedAdapterPartByPart) {
  std::string text = testing::read_file(experiment());
  text += "\n[adapter]\ntype = \"lora\"\nrank = 4\nalpha = 8\ndropout = 0.1\n";
  const std::string exp = dir_ / "gpt_lora.toml";
  testing::write_text(exp, text);
  const std::string same =
      " --set train.steps=6 --set optimizer.lr=1e-2 --set train.micro_batch=4 "
      "--set train.batch_tokens=512 --set checkpoint.every=0";
  ASSERT_EQ(run_kiln("run " + exp + " --name one" + same).exit_code, 0);
  const std::string logs = dir_ / "gpt_tp_rank";
  auto codes = run_ranks(
      2, "run " + exp + " --name tp --set parallel.type=tensor --set parallel.tp=2" + same, logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  expect_same_curve("one", "tp", 6);
}

// A LoRA run's snapshot from two ddp ranks, resumed in one process: the adapter's weights and
// their AdamW state are whole in every snapshot, and adapter dropout draws by position, so the
// resumed run keeps the single process's curve.
TEST_P(LoraResume, DdpSnapshotResumedInOneProcessKeepsTheSingleProcessCurve) {
  const std::string exp = fine_tune("dropout = 0.1\n");
  ASSERT_EQ(
      run_kiln("run " + exp + " --name one --set train.steps=8" + kParallelSettings).exit_code, 0);
  two_ranks_then_one(exp, "down", "--set parallel.type=ddp");
}

// ASHA over the adapter's rank and alpha and the learning rate: every member is a LoRA run of
// the rank it drew (its header says so), the members that went on resumed at their rungs, and
// one that went the whole way has the curve of the same config run straight, bit for bit.
TEST_F(LoraRun, AnAshaSweepOverRankAlphaAndLearningRateRunsAdaptedMembers) {
  const std::string exp = fine_tune();
  const std::string file = dir_ / "lora_asha.toml";
  testing::write_text(file, "base = \"" + exp +
                                "\"\nname = \"la\"\n[set]\ntrain.steps = 9\n"
                                "eval.every = 3\n[search]\ntype = \"asha\"\ntrials = 4\nseed = 2\n"
                                "metric = \"val_loss\"\nmin_steps = 3\n[space]\n"
                                "adapter.rank = { choice = [2, 8] }\n"
                                "adapter.alpha = { choice = [4.0, 16.0] }\n"
                                "optimizer.lr = { log_uniform = [1e-3, 3e-2] }\n");
  auto ran = run_kiln("sweep " + file + " --jobs 2");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  const auto rows = testing::query(
      db(),
      "select name, status, (select max(step) from metrics m where m.run_id = runs.id) from runs "
      "where sweep = 'la' order by name");
  ASSERT_EQ(rows.size(), 4u) << ran.output;
  int completed = 0;
  for (const auto& row : rows) {
    EXPECT_NE(row[0].find("adapter.rank="), std::string::npos) << row[0];
    if (row[2] != "9") continue;
    ++completed;
    // The member's draws, from its name ("la/trial=1,adapter.rank=8,adapter.alpha=4,...").
    std::string sets;
    for (std::string rest = row[0].substr(3); !rest.empty();) {
      const size_t comma = rest.find(',');
      const std::string label = rest.substr(0, comma);
      if (label.rfind("trial=", 0) != 0) sets += " --set " + label;
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    auto straight = run_kiln("run " + exp +
                             " --name straight --set train.steps=9 "
                             "--set eval.every=3" +
                             sets);
    ASSERT_EQ(straight.exit_code, 0) << straight.output;
    EXPECT_NE(straight.output.find("adapter lora: "), std::string::npos) << straight.output;
    expect_same_curve(row[0], "straight", 9, 0.0);
    break;
  }
  EXPECT_GE(completed, 1) << ran.output;
}

// adapter.base_dtype = "bf16": kiln bench's frozen bytes drop by 2 for each element of the blocks'
// linear weights (counted here from the model's dimensions); the curve stays by the fp32 base's;
// a run paused and resumed follows the uninterrupted one bit for bit (the bf16 weights through a
// snapshot); ddp, which broadcasts rank 0's weights, and fsdp, which shards them, follow the
// single process.
// A base kept narrower (adapter.base_dtype) takes the bytes it should, stays near the fp32 base's
// curve, resumes bit for bit and runs under ddp, fsdp and tensor parallelism as one process.
TEST_F(LoraRun,
       ANarrowBaseShrinksItsLinearWeightsAndResumesAndRunsUnderDdpFsdpAndTensorParallelism) {
  const std::string exp = fine_tune("dropout = 0.1\n");
  const auto frozen_bytes = [&](const std::string& extra) {
    auto bench = run_kiln("bench " + exp + " --steps 1 --warmup 0" + extra);
    EXPECT_EQ(bench.exit_code, 0) << bench.output;
    const std::regex line(R"(parameters +\d+ trainable, \d+ frozen in (\d+) bytes)");
    std::smatch m;
    return std::regex_search(bench.output, m, line) ? std::stoll(m[1]) : -1LL;
  };
  // 2 blocks of width 32 (q, k, v and o: 2 heads of 16, as many for k and v) and ffn 64 (the
  // three SwiGLU matrices).
  const int64_t linear_elements = 2 * (4 * 32 * 32 + 3 * 32 * 64);
  const std::string steps = std::string(" --set train.steps=8") + kParallelSettings;
  ASSERT_EQ(run_kiln("run " + exp + " --name fp32" + steps).exit_code, 0);
  const auto fp32_losses = losses("fp32");
  struct Base {
    std::string dtype;
    int64_t bytes_saved_per_weight;
    double near_fp32;  // the most any step's loss may differ from the fp32 base's
  };
  for (const Base& base : {Base{"bf16", 2, 0.02}, Base{"int8", 3, 0.02}}) {
    SCOPED_TRACE(base.dtype);
    const std::string narrow = " --set adapter.base_dtype=" + base.dtype;
    EXPECT_EQ(frozen_bytes("") - frozen_bytes(narrow),
              base.bytes_saved_per_weight * linear_elements);
    const std::string settings = narrow + steps;
    const std::string one = base.dtype + "_one";
    auto single = run_kiln("run " + exp + " --name " + one + settings);
    ASSERT_EQ(single.exit_code, 0) << single.output;
    const auto narrow_losses = losses(one);
    ASSERT_EQ(narrow_losses.size(), 8u);
    for (size_t i = 0; i < narrow_losses.size(); ++i)
      EXPECT_NEAR(narrow_losses[i], fp32_losses.at(i), base.near_fp32) << "step " << i + 1;
    const std::string paused = base.dtype + "_paused";
    ASSERT_EQ(run_kiln("run " + exp + " --name " + paused + " --until 4" + settings).exit_code, 0);
    auto resumed = run_kiln("resume " + paused + " --db " + db());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    expect_same_curve(one, paused, 8, 0.0);
    const std::string logs = dir_ / (base.dtype + "_rank");
    // Buckets of a few KiB, so that the first broadcast sends buckets of narrow weights alone.
    const std::string ddp = base.dtype + "_ddp";
    auto codes = run_ranks(2,
                           "run " + exp + " --name " + ddp +
                               " --set parallel.type=ddp --set parallel.bucket_mb=0.004" + settings,
                           logs);
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
    expect_same_curve(one, ddp, 8);
    // fsdp gathers the narrow blocks beside the fp32 norms in one collective.
    const std::string fsdp = base.dtype + "_fsdp";
    codes = run_ranks(2, "run " + exp + " --name " + fsdp + " --set parallel.type=fsdp" + settings,
                      logs);
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
    expect_same_curve(one, fsdp, 8);
    // Tensor parallelism cuts int8 rows with their scales, and gathers the narrow blocks whole
    // for its snapshots at steps 4 and 8.
    const std::string tp = base.dtype + "_tp";
    codes = run_ranks(2,
                      "run " + exp + " --name " + tp +
                          " --set parallel.type=tensor --set parallel.tp=2" + settings,
                      logs);
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
    expect_same_curve(one, tp, 8);
  }
  // An int8 base's values mean nothing as another type's: a resume that changes it is refused, as
  // every change of the model is.
  ASSERT_EQ(
      run_kiln("run " + exp + " --name changed --until 4 --set adapter.base_dtype=int8" + steps)
          .exit_code,
      0);
  auto changed = run_kiln("resume changed --db " + db() + " --set adapter.base_dtype=fp32");
  EXPECT_EQ(changed.exit_code, 2) << changed.output;
  EXPECT_NE(changed.output.find("resume cannot change adapter.base_dtype"), std::string::npos)
      << changed.output;
}

TEST_F(LoraRun, ExportsPeftsFolderAndAMergedOneAndRefusesWhatItCannot) {
  const std::string exp = fine_tune();
  ASSERT_EQ(run_kiln("run " + exp + " --name tuned --set train.steps=4 --set checkpoint.every=4")
                .exit_code,
            0);
  auto adapter = run_kiln("export tuned -o " + (dir_ / "adapter") + " --db " + db());
  ASSERT_EQ(adapter.exit_code, 0) << adapter.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "adapter/adapter_config.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "adapter/adapter_model.safetensors"));
  EXPECT_NE(testing::read_file(dir_ / "adapter/adapter_config.json")
                .find("\"base_model_name_or_path\": \"" + (dir_ / "base_hf") + "\""),
            std::string::npos);
  auto merged = run_kiln("export tuned --merge -o " + (dir_ / "merged") + " --db " + db());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "merged/config.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "merged/model.safetensors"));
  // Exported again over its own folder: replaced, not refused.
  EXPECT_EQ(run_kiln("export tuned -o " + (dir_ / "adapter") + " --db " + db()).exit_code, 0);
  // The folder read back by adapter.init_from on the same base is the model that wrote it: with
  // lr 0, its val loss after one step is the exporting run's last, exactly.
  auto imported = run_kiln("run " + exp +
                           " --name imported --set train.steps=1 --set "
                           "optimizer.lr=0 --set adapter.init_from=" +
                           (dir_ / "adapter"));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  const auto val = [&](const std::string& run) {
    return testing::query_doubles(db(),
                                  "select e.loss from evals e join runs r on r.id = "
                                  "e.run_id where r.name = '" +
                                      run + "' and e.split = 'val' order by e.step desc limit 1");
  };
  EXPECT_EQ(val("imported"), val("tuned"));
  auto other_rank = run_kiln("run " + exp +
                             " --name r8 --set adapter.rank=8 --set "
                             "adapter.init_from=" +
                             (dir_ / "adapter"));
  EXPECT_EQ(other_rank.exit_code, 2) << other_rank.output;
  EXPECT_NE(other_rank.output.find("its adapter_config.json has peft_type \"LORA\", r 4"),
            std::string::npos)
      << other_rank.output;

  auto one_file = run_kiln("export tuned -o " + (dir_ / "a.safetensors") + " --db " + db());
  EXPECT_EQ(one_file.exit_code, 2) << one_file.output;
  EXPECT_NE(one_file.output.find("an adapter run exports PEFT's adapter folder"), std::string::npos)
      << one_file.output;
  auto no_adapter = run_kiln("export base --merge -o " + (dir_ / "m2") + " --db " + db());
  EXPECT_EQ(no_adapter.exit_code, 2) << no_adapter.output;
  EXPECT_NE(no_adapter.output.find("--merge folds an adapter into the model's weights, and run "
                                   "'base' trained none"),
            std::string::npos)
      << no_adapter.output;
}

// Each base_dtype's run is, read back, the model that trained: `kiln eval` of its last snapshot
// gives the val loss the run logged there (the same batches), its --merge export, trained whole
// at lr 0, gives it within fp32's rounding of the fold, and a run paused and resumed logs it bit
// for bit. An int8 base's scales are not in snapshots but computed from model.init_from, so eval
// and export read that folder again, and refuse when it is gone or holds other weights.
TEST_F(LoraRun, EvalMergeAndResumeGiveTheTrainingLossForEveryBase) {
  const std::string exp = fine_tune();
  const auto val_at_step_8 = [&](const std::string& run) {
    const auto v = testing::query_doubles(db(),
                                          "select e.loss from evals e join runs r on r.id = "
                                          "e.run_id where r.name = '" +
                                              run + "' and e.split = 'val' and e.step = 8");
    return v.empty() ? -1.0 : v[0];  // the run's own row, and any kiln eval's alike
  };
  const auto evaluated = [&](const std::string& run) {
    auto ran = run_kiln("eval " + run + " --steps 2 --db " + db());  // eval.steps
    EXPECT_EQ(ran.exit_code, 0) << ran.output;
    std::smatch m;
    const std::regex loss(R"(loss (\d+\.\d+))");
    return std::regex_search(ran.output, m, loss) ? std::stod(m[1]) : -1.0;
  };
  const std::string steps =
      " --set train.steps=8 --set optimizer.lr=1e-2 --set eval.every=4 --set checkpoint.every=4";
  for (const std::string dtype : {"fp32", "bf16", "int8"}) {
    SCOPED_TRACE(dtype);
    const std::string settings = " --set adapter.base_dtype=" + dtype + steps;
    const std::string run = dtype + "_whole";
    ASSERT_EQ(run_kiln("run " + exp + " --name " + run + settings).exit_code, 0);
    const double trained = val_at_step_8(run);
    ASSERT_GT(trained, 0);
    EXPECT_NEAR(evaluated(run), trained, 1e-6);  // eval prints 6 decimals

    const std::string merged = dir_ / (dtype + "_merged");
    auto exported = run_kiln("export " + run + " --merge -o " + merged + " --db " + db());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    const std::string reread = dtype + "_reread";
    auto whole = run_kiln("run " + exp + " --name " + reread + steps +
                          " --set adapter.type=none --set optimizer.lr=0 --set train.steps=1 "
                          "--set model.init_from=" +
                          merged);
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    const auto reread_val = testing::query_doubles(
        db(), "select e.loss from evals e join runs r on r.id = e.run_id where r.name = '" +
                  reread + "' and e.split = 'val'");
    ASSERT_EQ(reread_val.size(), 1u);
    EXPECT_NEAR(reread_val[0], trained, 1e-5);

    const std::string paused = dtype + "_paused";
    ASSERT_EQ(run_kiln("run " + exp + " --name " + paused + " --until 4" + settings).exit_code, 0);
    auto resumed = run_kiln("resume " + paused + " --db " + db());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(val_at_step_8(paused), trained);
  }
  // The int8 run's base moved away, then back with other weights in it: refused, not computed
  // on another base's scales.
  const std::string base = dir_ / "base_hf", aside = dir_ / "base_hf_aside";
  std::filesystem::rename(base, aside);
  for (const std::string& command : std::vector<std::string>{
           "eval int8_whole", "export int8_whole --merge -o " + (dir_ / "merged_again")}) {
    auto refused = run_kiln(command + " --db " + db());
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("model.init_from"), std::string::npos) << refused.output;
    EXPECT_NE(refused.output.find("int8"), std::string::npos) << refused.output;
  }
  std::filesystem::rename(aside, base);
  EXPECT_NEAR(evaluated("int8_whole"), val_at_step_8("int8_whole"), 1e-6);
  std::filesystem::remove_all(base);
  std::filesystem::copy(dir_ / "fp32_merged", base);
  auto changed = run_kiln("eval int8_whole --db " + db());
  EXPECT_EQ(changed.exit_code, 2) << changed.output;
  EXPECT_NE(changed.output.find("model.init_from"), std::string::npos) << changed.output;
}

// The PEFT export names its base as the experiment wrote model.init_from (here relative to the
// directory the run started in), which is what PEFT's users load it by, not this machine's
// absolute path. A LoRA run with no model.init_from says, in one line on stderr, that it trains
// over a random model.
TEST_F(LoraRun, TheExportNamesTheBaseAsWrittenAndARandomBaseIsWarnedOf) {
  const std::string exp = fine_tune();
  std::string text = testing::read_file(exp);
  const std::string absolute = "init_from = \"" + (dir_ / "base_hf") + "\"";
  text.replace(text.find(absolute), absolute.size(), "init_from = \"base_hf\"");
  testing::write_text(dir_ / "relative.toml", text);
  const std::string quiet = " --set train.steps=2 --set checkpoint.every=2 2>&1 >/dev/null";
  const std::string kiln = "'" + std::string(KILN_BINARY) + "' ";
  auto relative = testing::run_shell("cd '" + dir_.str() + "' && " + kiln +
                                     "run relative.toml --name relative" + quiet);
  ASSERT_EQ(relative.exit_code, 0) << relative.output;
  EXPECT_EQ(relative.output, "");
  auto exported = run_kiln("export relative -o " + (dir_ / "adapter") + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto config =
      nlohmann::json::parse(testing::read_file(dir_ / "adapter/adapter_config.json"));
  EXPECT_EQ(config.at("base_model_name_or_path"), "base_hf");

  auto random = testing::run_shell(kiln + "run " + exp +
                                   " --name random --set 'model.init_from=\"\"'" + quiet);
  ASSERT_EQ(random.exit_code, 0) << random.output;
  EXPECT_EQ(random.output,
            "kiln: warning: adapter 'lora' trains over a randomly initialised model, as "
            "model.init_from is empty, and its export names a base only Kiln can rebuild: set "
            "model.init_from to the weights to fine-tune\n");
}

}  // namespace
}  // namespace kiln
