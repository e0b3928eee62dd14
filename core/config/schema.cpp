#include "core/config/schema.h"

#include <cstdlib>

#include "core/config/registry.h"

namespace kiln {

std::string default_run_db() {
  const char* env = std::getenv("KILN_DB");
  return env && *env ? env : "runs/kiln.db";
}

const std::vector<SectionSchema>& config_sections() {
  using P = ParamSpec;
  static const std::vector<SectionSchema> sections = {
      {"run",
       false,
       "what the run is called, where it goes, how it is seeded",
       {P::text("name", "", "run name, unique in the db; empty = <experiment>-<UTC time>")
            .unhashed(),
        P::integer("seed", 1337, "seeds every random stream: init, dropout, sampling").at_least(0),
        P::text("out_dir", "runs", "directory for snapshots, one folder per run").unhashed(),
        P::text("db", default_run_db(),
                "run store shared by all runs: an SQLite file, or postgresql://user@host:port/db")
            .unhashed(),
        P::text("sweep", "", "the sweep this run belongs to (kiln sweep sets it)").unhashed(),
        P::integer("threads", 0,
                   "CPU threads for LibTorch; 0 = OMP_NUM_THREADS if set, else the CPUs this "
                   "process may use (affinity, cgroup quota) / the run's ranks on this machine, "
                   "fixed at the start and recorded in the run. Curves match bit for bit only "
                   "at one count")
            .at_least(0)
            .at_most(1024),
        P::flag("share_cores", false,
                "with threads = 0: divide the CPUs among the Kiln processes on this machine, "
                "rechecked between steps (faster beside other runs; the numerics then depend "
                "on what else runs)")
            .unhashed()
            .added_later(),
        P::text("device", "auto",
                "where to train: auto (CUDA when this process sees a GPU, else cpu), cpu, cuda "
                "(each rank on a machine takes cuda:LOCAL_RANK) or cuda:N (one process)")
            .one_of({"auto", "cpu", "cuda", "cuda:N"})}},
      {"model",
       true,
       "the network; type picks a model plugin",
       {P::text("init_from", "",
                "weights to start from: a .safetensors file or a Hugging Face model directory "
                "(config.json with model.safetensors or a sharded index; e.g. GPT-2 from the Hub); "
                "empty = the model's own initialisation")
            .files()}},
      {"data", true, "where the tokens come from; type picks a data plugin", {}},
      {"train",
       false,
       "the optimisation loop",
       {P::integer("steps", 1000, "optimizer steps to run").at_least(1),
        // Upper bounds far beyond any real batch keep micro_batch x seq_len x world_size (and
        // the token counts derived from it) well inside int64.
        P::integer("micro_batch", 8, "sequences per forward/backward on each rank")
            .at_least(1)
            .at_most(1 << 20),
        P::integer("seq_len", 256, "tokens per sequence").at_least(1).at_most(1 << 24),
        P::integer("batch_tokens", 0,
                   "tokens per optimizer step over all ranks and micro-steps; "
                   "0 = micro_batch x seq_len x world_size (no accumulation)")
            .at_least(0)
            .at_most(static_cast<double>(int64_t{1} << 40)),
        P::real("grad_clip", 1.0, "clip the global gradient norm to this; 0 = no clipping")
            .at_least(0),
        P::integer("log_every", 1, "print a console line every N steps (the db gets every step)")
            .at_least(1)
            .unhashed(),
        P::text("on_nonfinite", "abort",
                "a step whose gradients are inf/NaN is never applied; then: abort = stop the "
                "run (its last snapshot stays the last good one), skip = go on with the next "
                "batch. Both are recorded in the db (metrics.skipped, runs.error)")
            .one_of({"abort", "skip"})
            .unhashed(),
        P::flag("cuda_graphs", false,
                "capture a micro-step (forward, loss, backward) once as a CUDA graph and replay "
                "it: one launch instead of hundreds of kernels. CUDA, one process, fp32/tf32/bf16; "
                "the update stays eager (docs/gpu.md)")
            .unhashed(),
        P::text("pinned_batches", "auto",
                "batches in page-locked host memory, so their copies to the GPU run alongside "
                "compute: auto = on for CUDA, off for the CPU")
            .one_of({"auto", "on", "off"})
            .unhashed()}},
      {"optimizer", true, "the update rule; type picks an optimizer plugin", {}},
      {"schedule",
       true,
       "the learning rate over steps; type picks a schedule plugin",
       // Unhashed: 0, every run's value until a resume asks otherwise, leaves hashes as they were.
       {P::integer("total_steps", 0,
                   "the steps the schedule spans; 0 = train.steps. `kiln resume --keep-schedule` "
                   "sets it to the steps the run was planned with, so steps added later stay at "
                   "the schedule's final lr")
            .at_least(0)
            .unhashed()}},
      {"precision", true, "number formats of compute and weights; type picks a policy", {}},
      {"parallel", true, "how work is spread over processes; type picks a strategy", {}},
      {"adapter",
       true,
       "trainable weights added to a frozen model (LoRA); type picks an adapter, \"none\" trains "
       "every weight",
       {},
       /*added_later=*/true},
      {"eval",
       false,
       "validation during training",
       {P::integer("every", 0, "evaluate every N steps and at the end; 0 = never").at_least(0),
        P::integer("steps", 20, "validation batches per evaluation").at_least(1),
        P::flag("final_test", true,
                "at the end of the run, evaluate the whole test split when the data has one"),
        P::text("tasks", "",
                "evaluation tasks: a path or glob of task files (core/data/task_file.h), scored "
                "at eval.every's steps (or task_every's) and logged as TASK.METRIC; \"\" = none")
            .files()
            .added_later(),
        P::integer("task_every", 0,
                   "score the tasks every N steps and at the end; 0 = at eval.every's steps, and "
                   "at the end even when eval.every is 0")
            .at_least(0)
            .added_later(),
        P::integer("task_batch", 16, "task requests per forward pass").at_least(1).unhashed()}},
      {"checkpoint",
       false,
       "snapshots for resuming",
       {P::integer("every", 0, "snapshot every N steps and at the end; 0 = never").at_least(0),
        P::integer("keep", 3, "latest snapshots kept on disk").at_least(1),
        P::flag("async", false,
                "write each snapshot on a background thread while training goes on (the state "
                "copied to host memory first; docs/snapshots.md says when it pays)")
            .unhashed()
            .added_later()}},
      {"metrics",
       false,
       "where a run's metrics go besides the run store",
       {P::text("tensorboard", "",
                "a folder for TensorBoard: rank 0 writes <folder>/<run name>/events.out.tfevents.* "
                "as it trains, at each run store commit; empty = none")
            .unhashed()}},
  };
  return sections;
}

const ParamSpec* declared_param(const std::string& section, const std::string& type,
                                const std::string& key) {
  for (const auto& schema : config_sections()) {
    if (schema.name != section) continue;
    if (const ParamSpec* p = find_param(schema.params, key)) return p;
    if (const PluginSpec* plugin = Catalog::global().find(section, type))
      return find_param(plugin->params, key);
  }
  return nullptr;
}

}  // namespace kiln
