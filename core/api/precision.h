// Precision policies decide the number formats of the forward pass and guard the update:
// fp32 does nothing; mixed-precision policies autocast the forward pass and may scale the loss
// (and skip steps whose gradients overflowed).
//
// Over a run: assemble() creates one policy per rank, after the optimizer; the trainer then calls,
// per step, forward_scope and scale_loss for each micro-batch, loss_scale and prepare_step once
// after the gradients were synced; the session saves state() in every snapshot and gives it
// back through load_state on resume. Every rank makes the same calls.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "core/config/registry.h"

namespace kiln {

class PrecisionPolicy {
 public:
  struct Scope {
    virtual ~Scope() = default;
  };
  virtual ~PrecisionPolicy() = default;
  // Held around each micro-batch's forward and loss, in training and in evaluation (by the
  // trainer, or a pipeline stage through PassContext); an autocast guard for mixed precision.
  virtual std::unique_ptr<Scope> forward_scope() { return nullptr; }
  // The number format the forward pass's matmuls compute in (under forward_scope()); what
  // `kiln bench` measures the device's peak FLOP/s in.
  virtual at::ScalarType compute_dtype() const { return at::kFloat; }
  // A line for the run's header where the policy chose something the config did not spell out
  // ("precision auto: fp32 (why)"); "" prints nothing.
  virtual std::string describe() const { return ""; }
  // Each training micro-batch's loss (already divided by the micro-batch count), just before
  // backward is called on what this returns.
  virtual at::Tensor scale_loss(const at::Tensor& loss) { return loss; }
  // Once per step, after the parallel strategy's finish_gradients and before the gradient norm
  // and clipping: unscale the gradients in place; false = skip this step's update (the step
  // still counts). `parameters`: all the model's, some without a gradient on sharding ranks.
  virtual bool prepare_step(const std::vector<at::Tensor>& parameters) {
    (void)parameters;
    return true;
  }
  // The scale this step's losses were multiplied by; read once per step, before prepare_step
  // (which may change it), for the step's metrics row.
  virtual double loss_scale() const { return 1.0; }
  // Whether prepare_step inspects the gradients (and so needs all of them on every rank).
  // Asked once by assemble(), which refuses a parallel strategy that shards gradients.
  virtual bool inspects_gradients() const { return false; }
  // What a snapshot keeps of the policy (a loss scale, say) and gives back on resume: state()
  // is read on rank 0 between steps, load_state called on every rank before the first step of a
  // resumed session.
  virtual std::map<std::string, double> state() const { return {}; }
  virtual void load_state(const std::map<std::string, double>& state) { (void)state; }

  // For a policy that chooses among the others by measurement (auto): the workload it runs
  // (core/train/assemble.h: precision_workload), given by assemble() before load_state.
  virtual void set_workload(const std::string& workload) { (void)workload; }
  // The precision it runs in, as the store records it: its own type's name ("" here) for all but
  // a choosing policy, which names its choice ("bf16").
  virtual std::string runs_as() const { return ""; }
};

struct PrecisionKind {
  static constexpr const char* name = "precision";
  using Product = PrecisionPolicy;
  using Factory =
      std::function<std::shared_ptr<PrecisionPolicy>(const Params&, c10::DeviceType device)>;
};
using PrecisionRegistry = Registry<PrecisionKind>;

}  // namespace kiln
