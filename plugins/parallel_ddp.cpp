// parallel "ddp": data parallel over c10d, as torch DistributedDataParallel. Each rank holds the
// whole model; rank 0's weights are broadcast at the start; each rank reads its own slice of
// every global batch (the loader interleaves windows by rank), and after the last micro-step's
// backward the gradients are averaged across ranks in flat buckets of bucket_mb, all buckets in
// flight at once. The micro-steps before the last communicate nothing. Launch with torchrun,
// srun or `kiln launch`; the environment says who is who (core/distributed.h).
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include "core/distributed.h"
#include "core/error.h"
#include "core/model.h"
#include "core/parallel.h"

namespace kiln {
namespace {

class DistributedDataParallel : public ParallelStrategy {
 public:
  DistributedDataParallel(std::unique_ptr<Communicator> comm, double bucket_mb)
      : comm_(std::move(comm)), bucket_bytes_(static_cast<int64_t>(bucket_mb * (1 << 20))) {}

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }

  void attach(Model& model) override {
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> tensors;
    for (auto& p : model.parameters())
      tensors.push_back(p);
    for (auto& b : model.buffers())
      tensors.push_back(b);
    for_each_bucket(tensors, [&](std::vector<at::Tensor>& flats) { comm_->broadcast(flats, 0); });
  }

  void finish_gradients(Model& model) override {
    std::vector<at::Tensor> grads;
    for (auto& p : model.parameters()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    const double scale = 1.0 / static_cast<double>(comm_->size());
    for_each_bucket(grads, [&](std::vector<at::Tensor>& flats) {
      comm_->all_reduce_sum(flats);
      for (auto& f : flats)
        f.mul_(scale);
    });
  }

  at::Tensor mean(const at::Tensor& value) override {
    std::vector<at::Tensor> one = {value.detach().clone()};
    comm_->all_reduce_sum(one);
    return one[0] / static_cast<double>(comm_->size());
  }

 private:
  // Packs `tensors` into flat buffers of about bucket_bytes_, lets `collective` work on all of
  // them, and copies the results back.
  template <class Collective>
  void for_each_bucket(std::vector<at::Tensor>& tensors, Collective&& collective) {
    std::vector<std::vector<at::Tensor>> buckets(1);
    int64_t bytes = 0;
    for (auto& t : tensors) {
      if (bytes > 0 && bytes + t.nbytes() > static_cast<size_t>(bucket_bytes_)) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(t);
      bytes += static_cast<int64_t>(t.nbytes());
    }
    std::vector<at::Tensor> flats;
    for (auto& bucket : buckets) {
      std::vector<at::Tensor> pieces;
      for (auto& t : bucket)
        pieces.push_back(t.detach().reshape(-1));
      flats.push_back(at::cat(pieces));
    }
    collective(flats);
    for (size_t b = 0; b < buckets.size(); ++b) {
      int64_t offset = 0;
      for (auto& t : buckets[b]) {
        t.detach().copy_(flats[b].narrow(0, offset, t.numel()).view_as(t));
        offset += t.numel();
      }
    }
  }

  std::unique_ptr<Communicator> comm_;
  int64_t bucket_bytes_;
};

const bool registered = ParallelRegistry::add(
    {"ddp",
     "data parallel over c10d (Gloo on CPU, NCCL on CUDA): broadcast, bucketed all-reduce",
     {ParamSpec::text("backend", "auto", "c10d backend; auto = nccl on CUDA, gloo on CPU")
          .one_of({"auto", "gloo", "nccl"}),
      ParamSpec::real("bucket_mb", 25.0, "gradient bucket size for the all-reduce").at_least(0.001),
      ParamSpec::integer("timeout_s", 300, "seconds to wait for peers and collectives")
          .at_least(1)}},
    [](const Params& p) -> std::shared_ptr<ParallelStrategy> {
      WorldEnv env = read_world_env();
      std::string backend = p.text("backend");
      if (backend == "auto") backend = torch::cuda::is_available() ? "nccl" : "gloo";
      auto comm = std::make_unique<Communicator>(env, backend,
                                                 std::chrono::seconds(p.integer("timeout_s")));
      return std::make_shared<DistributedDataParallel>(std::move(comm), p.real("bucket_mb"));
    });

}  // namespace
}  // namespace kiln
