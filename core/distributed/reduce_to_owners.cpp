#include "core/distributed/reduce_to_owners.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include "core/distributed/data_parallel.h"

namespace kiln {

struct ReduceToOwners::State {
  struct Bucket {
    std::vector<at::Tensor> parameters;
    std::vector<int64_t> counted;  // bytes of each parameter's gradient counted in `held`
    int owner = 0;
    size_t waiting = 0;  // gradients not yet produced in this micro-step
    bool started = false;
    at::Tensor flat;
    Communicator::Pending pending;
  };

  Communicator* comm = nullptr;
  std::vector<Bucket> buckets;
  std::vector<HeldAccumulator> accumulators;  // keep the hooks alive
  std::mutex mutex;                           // autograd may run hooks on its device threads
  std::optional<size_t> in_flight;
  bool step_open = false;
  int64_t held = 0;  // bytes of the buckets' gradients this rank holds now
  int64_t peak = 0;

  bool mine(const Bucket& bucket) const { return bucket.owner == comm->rank(); }

  void count(Bucket& bucket, size_t i) {
    const at::Tensor& grad = bucket.parameters[i].grad();
    const int64_t bytes = grad.defined() ? static_cast<int64_t>(grad.nbytes()) : 0;
    held += bytes - bucket.counted[i];
    bucket.counted[i] = bytes;
    peak = std::max(peak, held);
  }

  void release(Bucket& bucket) {
    for (size_t i = 0; i < bucket.parameters.size(); ++i) {
      bucket.parameters[i].mutable_grad() = at::Tensor();
      count(bucket, i);
    }
  }

  // Packs bucket `b` into its flat buffer, after the bucket before it has landed, and starts the
  // sum into its owner; the other ranks release the bucket's gradients at once. A bucket none of
  // whose parameters got a gradient has nothing to send (every rank runs the same graph).
  void start(size_t b) {
    Bucket& bucket = buckets[b];
    bucket.started = true;
    if (in_flight) land(*in_flight);
    std::vector<at::Tensor> grads;
    bool any = false;
    for (auto& p : bucket.parameters) {
      any = any || p.grad().defined();
      grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
    }
    if (!any) return;
    bucket.flat = flatten(grads);
    if (!mine(bucket)) release(bucket);
    bucket.pending = comm->start_reduce_sum(bucket.flat, bucket.owner);
    in_flight = b;
  }

  // Waits for bucket `b`'s sum; its owner's gradients become the sum over the ranks, into which
  // the next micro-step's backward accumulates (the others contribute that micro-step alone).
  void land(size_t b) {
    Bucket& bucket = buckets[b];
    in_flight.reset();
    bucket.pending.wait();
    if (mine(bucket)) {
      for (size_t i = 0; i < bucket.parameters.size(); ++i) {
        at::Tensor& grad = bucket.parameters[i].mutable_grad();
        if (!grad.defined()) grad = at::zeros_like(bucket.parameters[i]);
        count(bucket, i);
      }
      std::vector<at::Tensor> grads;
      for (auto& p : bucket.parameters)
        grads.push_back(p.grad());
      copy_from_flat(bucket.flat, grads);
    }
    bucket.flat = at::Tensor();
  }

  // Starts every bucket the micro-step left unstarted, in bucket order (the same on every
  // rank), and waits for the last.
  void flush() {
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (!buckets[b].started) start(b);
    }
    if (in_flight) land(*in_flight);
    for (auto& bucket : buckets) {
      bucket.started = false;
      bucket.waiting = bucket.parameters.size();
    }
  }

  void gradient_ready(size_t b, size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    Bucket& bucket = buckets[b];
    if (!step_open || bucket.started) return;
    count(bucket, i);
    if (--bucket.waiting == 0) start(b);
  }
};

ReduceToOwners::ReduceToOwners(Communicator& comm,
                               const std::vector<std::vector<at::Tensor>>& owned_by,
                               int64_t bucket_bytes)
    : state_(std::make_shared<State>()) {
  state_->comm = &comm;
  // Backward reaches the parameters roughly in reverse model order: the last owner's first.
  for (int owner = static_cast<int>(owned_by.size()) - 1; owner >= 0; --owner) {
    std::vector<at::Tensor> reversed(owned_by[owner].rbegin(), owned_by[owner].rend());
    for (auto& group : make_buckets(reversed, bucket_bytes)) {
      auto& bucket = state_->buckets.emplace_back();
      bucket.parameters = std::move(group);
      bucket.counted.assign(bucket.parameters.size(), 0);
      bucket.owner = owner;
      bucket.waiting = bucket.parameters.size();
    }
  }
  for (size_t b = 0; b < state_->buckets.size(); ++b) {
    std::weak_ptr<State> weak = state_;
    auto hooked = on_gradient_accumulated(state_->buckets[b].parameters, [weak, b](size_t i) {
      if (auto state = weak.lock()) state->gradient_ready(b, i);
    });
    state_->accumulators.insert(state_->accumulators.end(), hooked.begin(), hooked.end());
  }
}

ReduceToOwners::~ReduceToOwners() = default;

void ReduceToOwners::begin_micro_step() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  if (s.step_open) {
    s.flush();
    return;
  }
  s.step_open = true;
  for (auto& bucket : s.buckets)
    s.release(bucket);  // the last step's shard: this step's backward starts afresh
  s.peak = s.held;
}

void ReduceToOwners::finish() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  s.flush();
  s.step_open = false;
  const double scale = 1.0 / static_cast<double>(s.comm->size());
  for (auto& bucket : s.buckets) {
    if (!s.mine(bucket)) continue;
    for (auto& p : bucket.parameters) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
}

int64_t ReduceToOwners::peak_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->peak;
}

}  // namespace kiln
