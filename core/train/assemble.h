// Assembly: a resolved config becomes a runnable set of parts, each built by the plugin the
// config names. Everything that can be checked before training starts is checked here, so a
// mistake surfaces before a run row or a snapshot exists; and the model is built only once the
// run was checked against its plan (core/api/model.h), memory included (memory_check.h).
#pragma once

#include <memory>

#include <c10/core/DeviceGuard.h>
#include <torch/types.h>

#include "core/api/data_source.h"
#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/api/parallel.h"
#include "core/api/precision.h"
#include "core/api/schedule.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/train/memory_check.h"
#include "core/train/run_device.h"

namespace kiln {

class Adapter;
class TaskSuite;

struct AssembledRun {
  ResolvedConfig config;
  RunOptions options;  // [run]
  TrainOptions train;
  EvalOptions eval;
  CheckpointOptions checkpoint;
  torch::Device device{torch::kCPU};
  std::string device_note;  // why run.device = auto chose the CPU; empty otherwise
  // On a GPU, `device` made the process's current CUDA device, from assembly (before anything is
  // allocated) for as long as the run lives; null on the CPU. Every CUDA call that takes no
  // device follows it: streams and graph capture, synchronize(), the caching allocator (fsdp's
  // storage resize), pinned-memory copies, NCCL's communicators. Without it rank k > 0 of a
  // machine ran those on GPU 0 while its tensors said cuda:k.
  std::shared_ptr<c10::DeviceGuard> current_device;
  int64_t grad_accum = 1;    // micro-steps per optimizer step on each rank
  int64_t batch_tokens = 0;  // tokens per optimizer step over all ranks

  MemoryFloor memory;  // what the run needs at least, checked before the model is built

  std::shared_ptr<ParallelStrategy> parallel;
  std::shared_ptr<ModelPlan> model_plan;  // the model's sizes, before (or without) building it
  std::shared_ptr<Model> model;           // null under Assembly::kCheck
  std::shared_ptr<Adapter> adapter;       // [adapter]: attached to the model when it is built
  std::shared_ptr<torch::optim::Optimizer> optimizer;  // over a stand-in under Assembly::kCheck
  std::shared_ptr<Schedule> schedule;
  std::shared_ptr<PrecisionPolicy> precision;
  // This process among the Kiln processes of the machine (core/util/core_share.h); null under
  // Assembly::kCheck, which applies no runtime settings.
  std::shared_ptr<CoreShare> core_share;
  std::shared_ptr<DataSource> train_data;
  std::shared_ptr<DataSource> val_data;   // null when the data plugin has no validation split
  std::shared_ptr<DataSource> test_data;  // null without a test split or eval.final_test
  std::shared_ptr<TaskSuite> tasks;       // eval.tasks, prepared (kTrain and kCheck); null = none
};

enum class Assembly {
  kTrain,  // kiln run, resume, bench: every part built; the memory training needs is checked
  // eval, sample: every part built, the memory of the weights checked; model.init_from is read
  // only for an adapter that computes from it what snapshots lack (Adapter::
  // needs_initial_weights): the caller loads a snapshot over the weights
  kLoad,
  // export: kLoad's parts but no data split, which it never reads (so a run whose data has moved
  // still exports); train_data, val_data, test_data stay null.
  kWeights,
  // A sweep's members before any starts: every check of kTrain without building the model. The
  // model stays its plan; the optimizer and schedule are built over a stand-in parameter of
  // 256 KiB on the run's device (on a GPU, that opens a CUDA context in this process); the data
  // splits are opened (their first shard read); the runtime settings (threads, seed) are left
  // alone. What a multi-rank strategy checks in attach() (a pipeline's split) is not reached: a
  // sweep's members run as single processes, whose strategies check their world size first.
  kCheck,
};

AssembledRun assemble(const ResolvedConfig& config, Assembly mode = Assembly::kTrain);

// A data source for `split` ("train", "val", "test") with the run's geometry; null when the data
// has no such split. `files` (kiln eval --data): a path or glob read instead of the split's own.
// `training`: the trainer's train split (DataRequest::endless).
std::shared_ptr<DataSource> open_split(const AssembledRun& run, const std::string& split,
                                       const std::string& files = "", bool training = false);

// The steps a config's schedule spans: schedule.total_steps when set, else train.steps (`train`,
// the config's train_options()).
int64_t schedule_span(const ResolvedConfig& config, const TrainOptions& train);

// The config's schedule with the optimizer's `base_lr`: the schedule plugin's over
// schedule_span(), held at its last lr for the train.steps past it.
std::shared_ptr<Schedule> make_schedule(const ResolvedConfig& config, const TrainOptions& train,
                                        double base_lr);

}  // namespace kiln
