// What the data-parallel strategies (ddp, zero) share: a c10d communicator opened from the
// [parallel] section, rank 0's weights copied to every rank at the start, sums over ranks, and
// gradients packed into flat buckets so that each collective moves megabytes, not one tensor.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/api/parallel.h"
#include "core/config/params.h"
#include "core/distributed/distributed.h"
#include "core/distributed/gradient_buckets.h"

namespace kiln {

// The parameters every data-parallel plugin declares: backend, bucket_mb, timeout_s.
std::vector<ParamSpec> data_parallel_params();

// Drops the state entries of parameters (TensorImpl addresses) not in `keep`.
void keep_optimizer_state(torch::optim::Optimizer& optimizer,
                          const std::unordered_set<const void*>& keep);

class DataParallel : public ParallelStrategy {
 public:
  // Joins the world that the environment describes (core/distributed/distributed.h).
  DataParallel(const Params& params, c10::DeviceType device);

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  // Rank 0's parameters and buffers, copied to every rank in buckets.
  void attach(Model& model) override;
  at::Tensor sum(const at::Tensor& value) override;
  // Through the rendezvous store: small things (an RNG state), not tensors.
  std::vector<std::string> gather_bytes(const std::string& bytes) override;
  std::vector<std::string> gather_bytes_at(const std::string& key,
                                           const std::string& bytes) override;
  std::string broadcast_bytes(const std::string& bytes) override;

 protected:
  Communicator& comm() { return *comm_; }
  int64_t bucket_bytes() const { return bucket_bytes_; }

 private:
  std::unique_ptr<Communicator> comm_;
  int64_t bucket_bytes_;
  int64_t byte_gathers_ = 0;  // each gather's and broadcast's store keys are new
};

// The gradient all-reduce of torch's DistributedDataParallel, overlapping the backward pass
// (core/distributed/gradient_buckets.h): as soon as all gradients of a bucket are complete, that
// bucket's all-reduce starts while backward goes on with earlier layers, any number on the wire
// at once. Buckets follow the parameters in reverse, the order backward reaches them. Only the
// final micro-step of a step communicates; the others accumulate.
class OverlappedAllReduce {
 public:
  OverlappedAllReduce(Communicator& comm, const std::vector<at::Tensor>& parameters,
                      int64_t bucket_bytes);
  ~OverlappedAllReduce();
  OverlappedAllReduce(const OverlappedAllReduce&) = delete;
  OverlappedAllReduce& operator=(const OverlappedAllReduce&) = delete;

  // Before a micro-step's backward: hooks start all-reduces only when `final_micro_step`.
  void arm(bool final_micro_step);
  // After the final backward: starts what has not started (buckets whose parameters got no
  // gradient in time), waits for all, and leaves each gradient averaged over the ranks.
  void finish();

 private:
  std::unique_ptr<GradientBuckets> buckets_;  // null in a world of one: nothing to average
};

}  // namespace kiln
