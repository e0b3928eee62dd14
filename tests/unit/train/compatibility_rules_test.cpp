// The rules by which plugins and settings refuse one another (core/train/compatibility_rules.h),
// as a table: for each rule a config it lets through and one it refuses, with the refusal spelled
// out here word for word. Each config is assembled as a sweep checks its members
// (Assembly::kCheck): in this process, or where a rule speaks of a strategy over several ranks
// (tensor parallelism, pipeline stages), on two ranks forked with torchrun's environment.
#include "core/train/compatibility_rules.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/config/config.h"
#include "core/data/prepare.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::read_file;
using testing::write_text;

// {D} in a row stands for the test's scratch directory.
struct RuleRow {
  std::string rule;
  int world;  // the ranks both configs are assembled on
  std::string accepted_base;
  std::vector<std::string> accepted;  // --set overrides of the base experiment
  std::string refused_base;
  std::vector<std::string> refused;
  std::string refusal;
};

#if KILN_WITH_CUDA
const char* const kCudaGraphsOnCpu =
    "--set train.cuda_graphs=true: train.cuda_graphs = true needs a CUDA device, and this run "
    "trains on cpu: set train.cuda_graphs = false";
#else
const char* const kCudaGraphsOnCpu =
    "--set train.cuda_graphs=true: train.cuda_graphs = true but this Kiln was built without CUDA: "
    "build it against a CUDA LibTorch (docs/gpu.md), or set train.cuda_graphs = false";
#endif

const std::vector<RuleRow>& rule_table() {
  static const std::vector<RuleRow> rows = {
      {"seq_len_within_context",
       1,
       "gpt.toml",
       {},
       "gpt.toml",
       {"train.seq_len=32"},
       "--set train.seq_len=32: train.seq_len = 32 is longer than the model's context of 16 "
       "tokens: lower train.seq_len or raise the model's context length"},
      {"layers_fit_the_strategy",
       1,
       "gpt.toml",
       {"parallel.type=\"pipeline\"", "parallel.pp=1"},
       "gpt.toml",
       {"parallel.type=\"pipeline\"", "parallel.pp=1", "parallel.split_points=\"2\""},
       "parallel.split_points = \"2\" makes 2 stages but parallel.pp = 1: give pp - 1 = 0 layer "
       "indices"},
      {"optimizer_fits_the_strategy",
       1,
       "gpt.toml",
       {"parallel.type=\"zero\""},
       "gpt.toml",
       {"parallel.type=\"zero\"", "optimizer.type=\"schedule_free_adamw\"",
        "schedule.type=\"constant\""},
       "--set optimizer.type=\"schedule_free_adamw\": optimizer 'schedule_free_adamw' keeps each "
       "parameter's training point in its state, which parallel 'zero' gives only the "
       "parameter's owner: use parallel.type = \"ddp\""},
      {"model_has_a_tensor_parallel_form",
       2,
       "gpt.toml",
       {"parallel.type=\"tensor\"", "parallel.tp=2"},
       "tlm.toml",
       {"parallel.type=\"tensor\"", "parallel.tp=2"},
       "--set parallel.tp=2: model.type = \"transformer_lm\" has no tensor-parallel form: use "
       "parallel.tp = 1 or a model that has one (gpt, llama)"},
      {"model_splits_over_tensor_ranks",
       2,
       "gpt.toml",
       {"parallel.type=\"tensor\"", "parallel.tp=2"},
       "gpt.toml",
       {"parallel.type=\"tensor\"", "parallel.tp=2", "model.n_head=3", "model.n_embd=24"},
       "--set parallel.tp=2: model.n_head = 3 does not divide over parallel.tp = 2: each rank "
       "computes n_head / tp whole heads"},
      {"auxiliary_losses_outside_a_pipeline",
       2,
       "moe.toml",
       {"parallel.type=\"ddp\""},
       "moe.toml",
       {"parallel.type=\"pipeline\"", "parallel.pp=2"},
       "--set parallel.type=\"pipeline\": parallel 'pipeline' computes the loss in its own "
       "passes, without the auxiliary losses of a llama with n_layer 2, n_embd 16, ffn_dim 32, "
       "block_size 16 and vocab_size 64, 2 of its blocks mixtures of 4 experts, top 2: use "
       "parallel.type = \"ddp\", \"zero\" or \"fsdp\", or a dense model"},
      {"auxiliary_losses_outside_a_cuda_graph",
       1,
       "moe.toml",
       {"train.cuda_graphs=false"},
       "moe.toml",
       {"train.cuda_graphs=true"},
       "--set train.cuda_graphs=true: train.cuda_graphs = true captures fixed shapes, and the "
       "shapes of a llama with n_layer 2, n_embd 16, ffn_dim 32, block_size 16 and vocab_size 64, "
       "2 of its blocks mixtures of 4 experts, top 2 follow its router: set train.cuda_graphs = "
       "false"},
      {"overflow_checks_see_whole_gradients",
       1,
       "gpt.toml",
       {"parallel.type=\"fsdp\""},
       "gpt.toml",
       {"parallel.type=\"fsdp\"", "precision.type=\"fp16\""},
       "--set precision.type=\"fp16\": precision 'fp16' checks every gradient for overflow, but "
       "parallel 'fsdp' leaves each rank only its shard of them: use precision.type = \"bf16\" "
       "or parallel.type = \"ddp\""},
      {"averaged_iterates_without_decay",
       1,
       "gpt.toml",
       {"optimizer.type=\"schedule_free_adamw\"", "schedule.type=\"constant\""},
       "gpt.toml",
       {"optimizer.type=\"schedule_free_adamw\"", "schedule.type=\"cosine\""},
       "--set schedule.type=\"cosine\": optimizer 'schedule_free_adamw' averages its iterates in "
       "place of a decaying learning rate, and schedule 'cosine' decays it: set schedule.type = "
       "\"constant\" (its warmup is the optimizer's warmup)"},
      {"pinned_batches_on_a_gpu",
       1,
       "gpt.toml",
       {"train.pinned_batches=\"auto\""},
       "gpt.toml",
       {"train.pinned_batches=\"on\""},
       "--set train.pinned_batches=\"on\": train.pinned_batches = \"on\" page-locks batches for "
       "copies to a GPU, and this run trains on cpu: use \"auto\" or \"off\""},
      {"masked_loss_outside_a_pipeline",
       2,
       "gpt.toml",
       {"parallel.type=\"pipeline\"", "parallel.pp=2"},
       "gpt.toml",
       {"parallel.type=\"pipeline\"", "parallel.pp=2", "data.pack=true", "data.separator=0"},
       "--set parallel.type=\"pipeline\": data 'shards' counts only some tokens in the loss, "
       "which parallel 'pipeline' does not support yet (its stages compute every token's mean): "
       "use parallel.type = \"ddp\" or \"zero\""},
      {"masked_loss_outside_a_cuda_graph",
       1,
       "gpt.toml",
       {"data.pack=true", "data.separator=0"},
       "gpt.toml",
       {"data.pack=true", "data.separator=0", "train.cuda_graphs=true"},
       "--set train.cuda_graphs=true: train.cuda_graphs = true captures a loss over every token, "
       "and data 'shards' counts only some: set train.cuda_graphs = false"},
      {"cuda_graphs_capture_the_step",
       1,
       "gpt.toml",
       {"train.cuda_graphs=false"},
       "gpt.toml",
       {"train.cuda_graphs=true"},
       kCudaGraphsOnCpu},
      {"periodic_eval_has_a_val_split",
       1,
       "gpt.toml",
       {"eval.every=2"},
       "gpt.toml",
       {"eval.every=2", "data.val=\"\""},
       "--set eval.every=2: eval.every = 2 but the data has no validation split: point the data "
       "section at validation shards or set eval.every = 0"},
      {"tasks_scored_outside_a_pipeline",
       2,
       "gpt.toml",
       {"parallel.type=\"ddp\"", "eval.tasks=\"{D}/tasks/pick.toml\""},
       "gpt.toml",
       {"parallel.type=\"pipeline\"", "parallel.pp=2", "eval.tasks=\"{D}/tasks/pick.toml\""},
       "--set eval.tasks=\"{D}/tasks/pick.toml\": eval.tasks are not scored under pipeline "
       "parallelism (each stage holds part of the model): leave eval.tasks out and score them "
       "after the run with `kiln eval RUN --task {D}/tasks/pick.toml`"},
  };
  return rows;
}

const CompatibilityRule& rule_named(const std::string& name) {
  for (const CompatibilityRule& rule : compatibility_rules()) {
    if (rule.name == name) return rule;
  }
  throw std::logic_error("no compatibility rule " + name);
}

std::string with_scratch_dir(std::string text, const std::string& dir) {
  for (size_t at = text.find("{D}"); at != std::string::npos; at = text.find("{D}", at))
    text.replace(at, 3, dir);
  return text;
}

class CompatibilityRules : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string corpus;  // the task's characters among them
    for (int i = 0; i < 200; ++i)
      corpus += "abcd efgh ijkl.\n";
    write_text(dir_ / "corpus.txt", corpus);
    PrepareOptions prepare;
    prepare.inputs = {dir_ / "corpus.txt"};
    prepare.out_dir = dir_ / "data";
    prepare.threads = 1;
    prepare_dataset(prepare);
    write_text(dir_ / "tasks/pick.toml", "kind = \"choice\"\nitems = \"pick.jsonl\"\n");
    write_text(dir_ / "tasks/pick.jsonl", R"({"context": "ab", "choices": ["c", "d"], "label": 0})"
                                          "\n");
    write_experiment("gpt.toml", R"(type = "gpt"
n_layer = 2
n_head = 2
n_embd = 16
block_size = 16
vocab_size = 64
)");
    write_experiment("moe.toml", R"(type = "llama"
n_layer = 2
n_head = 2
n_embd = 16
ffn_dim = 32
block_size = 16
vocab_size = 64
moe_experts = 4
moe_top_k = 2
)");
    write_experiment("tlm.toml", R"(type = "transformer_lm"
vocab_size = 64
d_model = 16
nhead = 2
num_layers = 1
dim_feedforward = 32
max_len = 16
)");
  }

  // A tiny experiment on the prepared corpus with `model` as its [model] section.
  void write_experiment(const std::string& name, const std::string& model) {
    write_text(dir_ / name, fmt::format(R"([run]
threads = 1
device = "cpu"
[model]
{1}[data]
train = "{0}/data/train_*.bin"
val = "{0}/data/val_*.bin"
[train]
steps = 4
micro_batch = 2
seq_len = 16
[eval]
every = 0
)",
                                        dir_.str(), model));
  }

  ResolvedConfig config(const std::string& base, const std::vector<std::string>& overrides) {
    std::vector<std::string> settings;
    for (const std::string& setting : overrides)
      settings.push_back(with_scratch_dir(setting, dir_.str()));
    return load_config(dir_ / base, settings);
  }

  // What assembly says of the config on each of `world` ranks: "refused: " with assemble()'s
  // refusal, or "assembled" (with the rule's own refusal of the assembled run, should it have one).
  std::vector<std::string> outcomes(const std::string& rule, int world, const ResolvedConfig& c) {
    if (world == 1) return {outcome(rule, c)};
    const int port = testing::free_local_port();
    std::fflush(stdout);  // or each child would print what this process has buffered
    std::vector<pid_t> ranks;
    for (int rank = 0; rank < world; ++rank) {
      std::filesystem::remove(dir_ / fmt::format("rank{}.txt", rank));  // the last row's
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::setenv("RANK", std::to_string(rank).c_str(), 1);
        ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
        ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
        ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
        ::setenv("MASTER_ADDR", "127.0.0.1", 1);
        ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        at::set_num_threads(1);  // a forked child starts no thread pool of its parent's
        write_text(dir_ / fmt::format("rank{}.txt", rank), outcome(rule, c));
        ::_exit(0);
      }
      ranks.push_back(pid);
    }
    std::vector<std::string> out;
    for (int rank = 0; rank < world; ++rank) {
      int status = 0;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (::waitpid(ranks[rank], &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > until) {
          ::kill(ranks[rank], SIGKILL);
          ::waitpid(ranks[rank], &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << rank;
      out.push_back(read_file(dir_ / fmt::format("rank{}.txt", rank)));
    }
    return out;
  }

  static std::string outcome(const std::string& rule, const ResolvedConfig& c) {
    try {
      const AssembledRun run = assemble(c, Assembly::kCheck);
      const std::optional<std::string> refusal = rule_named(rule).refusal(run, {});
      return refusal ? "assembled, though the rule refuses it: " + *refusal : "assembled";
    } catch (const UserError& e) {
      return std::string("refused: ") + e.what();
    }
  }

  testing::TempDir dir_;
};

TEST_F(CompatibilityRules, EachLetsOneConfigThroughAndRefusesAnotherInItsOwnWords) {
  for (const RuleRow& row : rule_table()) {
    SCOPED_TRACE(row.rule);
    const std::vector<std::string> everyone_assembles(row.world, "assembled");
    EXPECT_EQ(outcomes(row.rule, row.world, config(row.accepted_base, row.accepted)),
              everyone_assembles);
    const std::vector<std::string> everyone_refuses(
        row.world, "refused: " + with_scratch_dir(row.refusal, dir_.str()));
    EXPECT_EQ(outcomes(row.rule, row.world, config(row.refused_base, row.refused)),
              everyone_refuses);
  }
}

TEST(CompatibilityRulesTable, HasOneRowForEveryRule) {
  std::vector<std::string> rules, rows;
  for (const CompatibilityRule& rule : compatibility_rules())
    rules.push_back(rule.name);
  for (const RuleRow& row : rule_table())
    rows.push_back(row.rule);
  EXPECT_EQ(rows, rules);
}

}  // namespace
}  // namespace kiln
