#include "core/distributed/reduce_to_owners.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "core/distributed/gradient_buckets.h"

namespace kiln {

// The .grad bytes this rank holds, counted where they change: the hooks (a gradient completes),
// packing (others' gradients released) and landing (the owner's become the sums). All of these
// run under the GradientBuckets' lock; begin_micro_step runs between backward passes.
struct ReduceToOwners::Tally {
  std::vector<at::Tensor> parameters;  // in bucket order
  std::vector<int> owner;              // per bucket
  std::vector<int64_t> counted;        // bytes of each parameter's gradient counted in `held`
  int64_t held = 0;
  int64_t peak = 0;

  void count(size_t i) {
    const at::Tensor& grad = parameters[i].grad();
    const int64_t bytes = grad.defined() ? static_cast<int64_t>(grad.nbytes()) : 0;
    held += bytes - counted[i];
    counted[i] = bytes;
    peak = std::max(peak, held);
  }

  void release(size_t i) {
    parameters[i].mutable_grad() = at::Tensor();
    count(i);
  }
};

ReduceToOwners::ReduceToOwners(Communicator& comm,
                               const std::vector<std::vector<at::Tensor>>& owned_by,
                               int64_t bucket_bytes)
    : world_(comm.size()), tally_(std::make_shared<Tally>()) {
  GradientBuckets::Rules rules;
  rules.max_in_flight = 1;  // each bucket lands before the next is packed: one in flight at most
  // Backward reaches the parameters roughly in reverse model order: the last owner's first.
  for (int owner = static_cast<int>(owned_by.size()) - 1; owner >= 0; --owner) {
    std::vector<at::Tensor> reversed(owned_by[owner].rbegin(), owned_by[owner].rend());
    for (auto& group : make_buckets(reversed, bucket_bytes)) {
      GradientBuckets::Members members;
      for (auto& p : group) {
        members.push_back(tally_->parameters.size());
        tally_->parameters.push_back(p);
      }
      rules.buckets.push_back(std::move(members));
      tally_->owner.push_back(owner);
    }
  }
  tally_->counted.assign(tally_->parameters.size(), 0);
  const int rank = comm.rank();
  std::shared_ptr<Tally> tally = tally_;
  rules.contribute = [tally](size_t i) {
    tally->count(i);
    return tally->parameters[i].grad();
  };
  // The other ranks release the bucket's gradients at once: their storage goes back to the
  // allocator while the sum travels.
  rules.packed = [tally, rank](const GradientBuckets::Members& members, size_t bucket) {
    if (tally->owner[bucket] == rank) return;
    for (size_t i : members)
      tally->release(i);
  };
  rules.send = [&comm, tally](at::Tensor& flat, size_t bucket) {
    return comm.start_reduce_sum(flat, tally->owner[bucket]);
  };
  // The owner's gradients become the sum over the ranks, into which the next micro-step's
  // backward accumulates (the others contribute that micro-step alone).
  rules.land = [tally, rank](const GradientBuckets::Members& members, size_t bucket,
                             const at::Tensor& flat) {
    if (tally->owner[bucket] != rank) return;
    std::vector<at::Tensor> grads;
    for (size_t i : members) {
      at::Tensor& grad = tally->parameters[i].mutable_grad();
      if (!grad.defined()) grad = at::zeros_like(tally->parameters[i]);
      tally->count(i);
      grads.push_back(grad);
    }
    copy_from_flat(flat, grads);
  };
  buckets_ = std::make_unique<GradientBuckets>(tally_->parameters, std::move(rules));
  buckets_->arm(true);
}

ReduceToOwners::~ReduceToOwners() = default;

void ReduceToOwners::begin_micro_step() {
  if (step_open_) {
    buckets_->flush();
    return;
  }
  step_open_ = true;
  for (size_t i = 0; i < tally_->parameters.size(); ++i)
    tally_->release(i);  // the last step's shard: this step's backward starts afresh
  tally_->peak = tally_->held;
}

void ReduceToOwners::finish() {
  buckets_->flush();
  step_open_ = false;
  const double scale = 1.0 / static_cast<double>(world_);
  for (auto& p : tally_->parameters) {
    if (p.grad().defined()) p.grad().mul_(scale);  // only the owned ones are left defined
  }
}

int64_t ReduceToOwners::peak_bytes() const {
  return tally_->peak;
}

}  // namespace kiln
