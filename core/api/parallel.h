// Parallelism strategies: how many processes share a step and how their gradients meet.
// Assembly, the trainer and the session call these hooks at fixed points of a run (the order is
// at the top of ParallelStrategy); `single` (one process) leaves every one at its default.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/config/registry.h"
#include "core/layers/random_draws.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Model;
class DataSource;

// One tensor of the training state, and the part of it this rank holds: a model parameter or
// buffer, or one of a parameter's optimizer state tensors (in DeclaredState's order). A strategy
// that cuts a tensor says where its part starts in each dim (fsdp's row blocks, tensor
// parallelism's column slices, experts along dim 0); a part is a box of the whole tensor.
struct StateSlice {
  std::string tensor;            // "model/<name>" or "optimizer/<parameter's name>/<i>"
  at::Tensor parameter;          // the parameter it is, or whose state it is; undefined: a buffer
  std::vector<int64_t> whole;    // the whole tensor's shape
  std::vector<int64_t> offsets;  // where `local` starts in the whole, one per dim
  at::Tensor local;              // this rank's part, a view: a load copies into it
  bool writes = true;            // this rank writes the part (one rank per part, over the world)
};

// Every parameter and buffer of `model` by its name (a tied weight once, by its first name), and
// each defined state tensor of every parameter in `optimizer` (null: none), whole, `writes` as
// given: the default of ParallelStrategy::state_slices, which strategies then cut.
std::vector<StateSlice> whole_state_slices(Model& model, torch::optim::Optimizer* optimizer,
                                           bool writes);

// What a strategy that runs the model's passes itself (a pipeline) needs from the trainer.
struct PassContext {
  Model& model;
  DataSource& data;       // the split being read: micro_batches batches are due from it
  int64_t micro_batches;  // grad_accum in training; the eval batch count otherwise
  c10::Device device;
  bool train;  // forward and backward, each loss / micro_batches; else forward only
  // The trainer's loss (mean cross-entropy, fp32) of logits against targets.
  std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& targets)> loss;
  std::function<std::shared_ptr<void>()> forward_scope;          // held around forward (autocast)
  std::function<at::Tensor(const at::Tensor& loss)> scale_loss;  // before backward
  // The dropout key of the step's micro-batch `micro` (0-based, in reading order): a DrawScope
  // with it is held around that micro-batch's forward (core/layers/random_draws.h).
  std::function<DrawKey(int64_t micro)> draws;
};

// The order of the calls over a run (every rank makes the same calls in the same order):
//
//   construction        ParallelRegistry::create in assemble() (core/train/assemble.cpp), once
//                       per process; a multi-process strategy joins its world here.
//   data_world, micro_batches    assemble(), to size the step (grad_accum, batch_tokens)
//   tensor_parallel     assemble(), before the model is built (the plan's shapes are checked)
//   check_layer_count   assemble(), before the model is built (also for a sweep's members, whose
//                       models are never built there)
//   check_optimizer     assemble(), right after check_layer_count
//   attach(model)       assemble(), once: the model is built, initialised and on its device; the
//                       optimizer does not exist yet
//   replicates_gradients         assemble(), against the precision policy
//   data_rank, data_world        assemble(), opening the train, val and test splits
//   state_slices        Session::restore (via SnapshotPolicy), on a resume: where each rank
//                       loads what it holds (before_restore and shard_state around the load of
//                       a snapshot of whole files, from an older Kiln)
//   per step (Trainer::train_step):
//     run_passes(train)        if it returns nothing, the trainer's own micro-steps, each:
//       begin_micro_step(final)  then forward, loss, backward
//     finish_gradients(model)  always, after the last backward
//     global_norm(local_norm)  after the precision policy unscaled the gradients
//     pass_times, loss_share, sum   the step's one collective sum of loss, norm and timings
//     stages                   for the step's statistics, read from that sum
//     finish_update(model)     after the optimizer step, also when the update was skipped
//   sum                 once after the session's first step (the optimizer-state report)
//   per evaluation (Trainer::evaluate: every eval.every steps, the test split, `kiln eval`):
//     run_passes(eval) or the trainer's forward passes, then loss_share and sum
//   per snapshot (SnapshotPolicy::save, between steps): gather_bytes (each rank's RNG state and
//     data position), state_slices (each rank writes its parts), gather_bytes (each rank's file,
//     written and synced, described to rank 0, which commits the snapshot)
//   peak_gradient_bytes  `kiln bench`, after its timed steps
//   rank, world_size    at any time after construction; they never change
//
// Hooks marked "collective" must be called by every rank at the same point: a strategy may
// communicate in them, and they must not return before the others reach them.
class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;
  // This process's place in the world and the world's size; fixed from construction on.
  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  // The ranks that read different data (all of them, but for pipeline stages of one replica):
  // assemble() opens each split with them and sizes the global batch by data_world.
  virtual int data_rank() const { return rank(); }
  virtual int data_world() const { return world_size(); }
  // Micro-batches per step the strategy needs (a pipeline's); 0 = whatever train.batch_tokens
  // makes. Asked once by assemble(), before the model exists.
  virtual int64_t micro_batches() const { return 0; }
  // This rank's share of the run's loss in sum() over all ranks: the mean over ranks, unless
  // only some ranks compute the loss. Asked by the trainer after every step's and eval's passes.
  virtual double loss_share() const { return 1.0 / world_size(); }
  // Collective. Strategies that cut the model across ranks run a step's (or an evaluation's)
  // passes themselves, reading context.micro_batches batches from context.data, and return
  // this rank's summed loss; nullopt = the trainer's own loop over micro-batches. Called at the
  // start of every step (after zero_grad and the lr update) and of every evaluation (model in
  // eval mode, no grad).
  virtual std::optional<at::Tensor> run_passes(PassContext& context) {
    (void)context;
    return std::nullopt;
  }
  // A pipeline's last training pass: ms spent computing, and ms the passes took in all (with
  // waits). Asked by the trainer once per step, after finish_gradients.
  struct PassTimes {
    double compute_ms = 0, total_ms = 0;
    int64_t peak_live = 0;  // most micro-batches whose activations were held at once
  };
  virtual PassTimes pass_times() const { return {}; }
  // Pipeline stages (1 otherwise); stage s of the first replica is rank s. Asked once per step.
  virtual int stages() const { return 1; }
  // A UserError when this strategy cannot place a model of `layer_count` layers (the entries of
  // Model::layers(), from the model's plan): a pipeline with more stages than layers, or cuts
  // past the last one. Asked once by assemble(), before the model is built.
  virtual void check_layer_count(int64_t layer_count) const { (void)layer_count; }
  // A UserError when this strategy cannot train with optimizer.type `optimizer` (fsdp gives
  // each rank rows of a matrix, which muon must see whole). Asked once by assemble(), before
  // the model is built.
  virtual void check_optimizer(const std::string& optimizer) const { (void)optimizer; }
  // Ranks over which each weight is split by Model::split_for_tensor_parallel (1: none).
  // assemble() refuses a model whose plan cannot split that way, before building it.
  virtual int64_t tensor_parallel() const { return 1; }
  // Collective. Once, by assemble(), after the model is built, initialised (model.init_from)
  // and moved to its device, before the optimizer exists: e.g. broadcast rank 0's weights, hook
  // the gradient accumulators, move layers this rank never runs off the device.
  virtual void attach(Model& model) { (void)model; }
  // At the start of each micro-step of the trainer's own loop (not when run_passes returned a
  // loss), before its forward and backward: gradients need syncing only on the final one.
  virtual void begin_micro_step(bool final_micro_step) { (void)final_micro_step; }
  // Collective. After the last backward of every step, before the precision policy unscales
  // and the trainer clips: the gradients are still scaled by the loss scale.
  virtual void finish_gradients(Model& model) { (void)model; }
  // False when, after finish_gradients, each rank holds only its own shard of the gradients:
  // then no rank alone can tell whether all of them are finite. Asked once by assemble().
  virtual bool replicates_gradients() const { return true; }
  // Collective. The global gradient norm from `local_norm`, this rank's L2 norm (a 0-d float
  // tensor on the device) of the gradients it holds after finish_gradients and unscaling; the
  // result must be the same on every rank, since each clips by it. Once per step.
  virtual at::Tensor global_norm(const at::Tensor& local_norm) { return local_norm; }
  // Collective. Once per step after the optimizer update, and in its place when the update was
  // skipped (non-finite gradients): ranks that updated only their shard share it here.
  virtual void finish_update(Model& model) { (void)model; }
  // Collective. Element-wise sum over ranks of a tensor on the run's device, returned on it; no
  // host sync. The trainer and session call it once per step, per evaluation and after the
  // first step; every rank passes a tensor of the same shape.
  virtual at::Tensor sum(const at::Tensor& value) { return value; }
  // Collective. Every rank's `bytes` on rank 0, indexed by rank; the other ranks get their own
  // only. For what is small and not a tensor: each rank's RNG states for a snapshot.
  virtual std::vector<std::string> gather_bytes(const std::string& bytes) { return {bytes}; }
  // Collective. Rank 0's `bytes` on every rank (what the others pass is not used): what rank 0
  // alone decides, such as a new run's identity, whose folder every rank writes its snapshot
  // files into.
  virtual std::string broadcast_bytes(const std::string& bytes) { return bytes; }
  // gather_bytes under `key` (the same on every rank, new to the run), through the rendezvous store
  // and not the process group, so that a background thread may call it while the training
  // thread communicates: each rank's list of the snapshot files it wrote.
  virtual std::vector<std::string> gather_bytes_at(const std::string& key,
                                                   const std::string& bytes) {
    (void)key;
    return {bytes};
  }
  // The most bytes this rank's gradient tensors held at once in the last step, for strategies
  // that free gradients during the step (zero); nullopt: none is freed before the update, so
  // the gradients held after the step are the peak.
  virtual std::optional<int64_t> peak_gradient_bytes() const { return std::nullopt; }
  // Snapshots: the training state as this rank holds it (`optimizer` null: the model alone, as
  // eval, sample and export load it). Each rank writes the parts marked `writes` into its own
  // file, nothing gathered; a resume under any strategy and world loads into the parts its
  // strategy lists, reading only the bytes that overlap them (core/checkpoint/state_shards.h),
  // and drops the optimizer entries of parameters none of whose state it lists. The default
  // (whole_state_slices): every rank holds every tensor whole and rank 0 writes it. Asked between
  // two steps; the parts must stay valid until the snapshot's tensors are copied or written.
  virtual std::vector<StateSlice> state_slices(Model& model, torch::optim::Optimizer* optimizer) {
    return whole_state_slices(model, optimizer, rank() == 0);
  }
  // Collective. Snapshots in the format of whole files (model.pt and optimizer.pt with the
  // tensors, from an older Kiln) load whole on every rank: before_restore first gives the
  // parameters their whole shapes (fsdp, tensor: the values are about to be overwritten), and
  // shard_state after the load keeps this rank's part. Neither is called by `kiln eval`,
  // `sample` or `export`, which load a snapshot into a model without an optimizer.
  virtual void shard_state(Model& model, torch::optim::Optimizer& optimizer) {
    (void)model;
    (void)optimizer;
  }
  virtual void before_restore(Model& model) { (void)model; }
};

struct ParallelKind {
  static constexpr const char* name = "parallel";
  using Product = ParallelStrategy;
  // device: where this rank trains (run.device, resolved), which decides the c10d backend.
  using Factory =
      std::function<std::shared_ptr<ParallelStrategy>(const Params&, c10::DeviceType device)>;
};
using ParallelRegistry = Registry<ParallelKind>;

// What a strategy makes of a world of `world` ranks, known before any rank of it starts: a Slurm
// job that may go on with fewer nodes is checked at submission, and again before it does, for each
// world it may shrink to (core/app/slurm/node_range.h).
struct WorldShape {
  int data_world = 1;         // the ranks that read different data: data_world() in that world
  int64_t micro_batches = 0;  // micro_batches() in that world
};
// A UserError, in the words the strategy's own start would use, when it cannot run in that world
// (a parallel.tp that does not divide it).
using WorldShapeRule = std::function<WorldShape(const Params& params, int world)>;
// Registered by a plugin beside its factory when it divides the world otherwise than the
// contract's defaults do (every rank reads its own data; micro_batches 0), and asked by the
// plugin's own constructor too, so that both say the same.
bool add_world_shape_rule(const std::string& type, WorldShapeRule rule);
WorldShape world_shape(const std::string& type, const Params& params, int world);

}  // namespace kiln
