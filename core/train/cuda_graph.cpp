#include "core/train/cuda_graph.h"

#include <fmt/format.h>

#include "core/api/adapter.h"

#if KILN_WITH_CUDA
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace kiln {

std::optional<std::string> cuda_graph_refusal(const AssembledRun& run) {
  const std::string where = run.config.where("train.cuda_graphs").str();
  if (!KILN_WITH_CUDA) {
    return where +
           ": train.cuda_graphs = true but this Kiln was built without CUDA: build it against "
           "a CUDA LibTorch (docs/gpu.md), or set train.cuda_graphs = false";
  }
  if (!run.device.is_cuda()) {
    return fmt::format(
        "{}: train.cuda_graphs = true needs a CUDA device, and this run trains "
        "on {}: set train.cuda_graphs = false",
        where, run.device.str());
  }
  if (run.parallel->world_size() > 1) {
    return fmt::format(
        "{}: train.cuda_graphs = true captures one process's step, but parallel "
        "'{}' exchanges gradients with {} ranks inside it: set "
        "train.cuda_graphs = false",
        where, run.config.type("parallel"), run.parallel->world_size());
  }
  if (run.precision->inspects_gradients()) {
    return fmt::format(
        "{}: train.cuda_graphs = true cannot capture precision '{}': its loss "
        "scale is a host number that changes between steps: use precision.type "
        "= \"bf16\", or set train.cuda_graphs = false",
        where, run.config.type("precision"));
  }
  if (run.adapter->adapts()) {
    return fmt::format(
        "{}: train.cuda_graphs = true does not capture an adapter's step (adapter.type = "
        "\"{}\"): set train.cuda_graphs = false",
        where, run.config.type("adapter"));
  }
  if (run.model_plan->dropout > 0) {
    return fmt::format(
        "{}: train.cuda_graphs = true would replay the captured step's dropout masks in every "
        "step (model.dropout = {}, {}): set model.dropout = 0, or train.cuda_graphs = false",
        where, run.model_plan->dropout, run.config.where("model.dropout").str());
  }
  return std::nullopt;
}

#if KILN_WITH_CUDA

struct CapturedMicroStep::Graph {
  // Eager runs before the capture: cuBLAS creates its workspaces and the autograd engine its
  // threads on the first calls, and neither may happen inside a capture.
  static constexpr int kWarmups = 3;

  std::vector<at::Tensor> parameters;
  MicroStep micro_step;
  at::Device device{at::kCUDA};  // the run's GPU
  at::cuda::CUDAGraph graph;
  bool captured = false;
  at::Tensor inputs, targets, loss;  // the graph's own memory: inputs copied in, loss read out

  void capture(const at::Tensor& first_inputs, const at::Tensor& first_targets) {
    inputs = first_inputs.clone();
    targets = first_targets.clone();
    // Streams come from the current device's pool. Taken on another device than the run's
    // (rank k > 0 with GPU 0 current), the capture would record none of the run's kernels and
    // every replay would leave the gradients at zero; the run makes its device current
    // (AssembledRun::current_device), and this guard holds it so for the capture whatever else
    // changed it.
    const c10::cuda::CUDAGuard on_the_runs_device(device);
    // Captures must run on a stream of their own, which waits for the work queued so far.
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device.index());
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device.index()));
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      for (int i = 0; i < kWarmups; ++i)
        micro_step(inputs, targets);
      zero();
      // Autocast caches its casts of the weights between calls; a cast made during the capture
      // would be a pointer into the graph's private pool, so the cache is off while it records.
      const bool cache = at::autocast::is_autocast_cache_enabled();
      at::autocast::set_autocast_cache_enabled(false);
      graph.capture_begin();
      loss = micro_step(inputs, targets);
      graph.capture_end();
      at::autocast::set_autocast_cache_enabled(cache);
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(c10::cuda::getCurrentCUDAStream(device.index()));
    captured = true;
  }

  void zero() {
    for (auto& p : parameters) {
      if (p.grad().defined()) p.grad().zero_();
    }
  }
};

CapturedMicroStep::CapturedMicroStep(const AssembledRun& run, MicroStep micro_step)
    : graph_(std::make_unique<Graph>()) {
  graph_->parameters = run.model->parameters();
  graph_->micro_step = std::move(micro_step);
  graph_->device = run.device;
}

at::Tensor CapturedMicroStep::run(const at::Tensor& inputs, const at::Tensor& targets) {
  Graph& g = *graph_;
  if (!g.captured) {
    // The gradients of the steps before this one are in there; they were zeroed by the
    // trainer and the warm-up's are zeroed in capture(); the captured pass adds this step's.
    g.capture(inputs.to(g.device), targets.to(g.device));  // not kCUDA: that is GPU 0
  }
  g.inputs.copy_(inputs, /*non_blocking=*/true);
  g.targets.copy_(targets, /*non_blocking=*/true);
  g.graph.replay();
  return g.loss.detach().clone();
}

void CapturedMicroStep::zero_gradients() {
  graph_->zero();
}

#else  // A CPU build refuses train.cuda_graphs in cuda_graph_refusal(): nothing to replay.

struct CapturedMicroStep::Graph {};
CapturedMicroStep::CapturedMicroStep(const AssembledRun&, MicroStep) {
  throw std::logic_error("CapturedMicroStep in a build without CUDA");
}
at::Tensor CapturedMicroStep::run(const at::Tensor&, const at::Tensor&) {
  return {};
}
void CapturedMicroStep::zero_gradients() {}

#endif

CapturedMicroStep::~CapturedMicroStep() = default;

}  // namespace kiln
