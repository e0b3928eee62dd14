#include "core/distributed/gradient_buckets.h"

#include <algorithm>

#include <ATen/Functions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace kiln {

std::vector<HeldAccumulator> on_gradient_accumulated(const std::vector<at::Tensor>& parameters,
                                                     const std::function<void(size_t)>& ready) {
  std::vector<HeldAccumulator> accumulators;
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters[i]);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [ready, i](const torch::autograd::variable_list& outputs,
                   const torch::autograd::variable_list&) {
          ready(i);
          return outputs;
        }));
    accumulators.push_back(std::make_shared<decltype(accumulator)>(std::move(accumulator)));
  }
  return accumulators;
}

std::vector<std::vector<at::Tensor>> make_buckets(const std::vector<at::Tensor>& tensors,
                                                  int64_t bytes) {
  std::vector<std::vector<at::Tensor>> buckets;
  int64_t filled = 0;
  for (const auto& t : tensors) {
    if (buckets.empty() || (filled > 0 && filled + static_cast<int64_t>(t.nbytes()) > bytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(t);
    filled += static_cast<int64_t>(t.nbytes());
  }
  return buckets;
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> pieces;
  for (const auto& t : tensors)
    pieces.push_back(t.detach().reshape(-1));
  return at::cat(pieces);
}

void copy_from_flat(const at::Tensor& flat, const std::vector<at::Tensor>& into) {
  int64_t offset = 0;
  for (const auto& t : into) {
    t.detach().copy_(flat.narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
}

struct GradientBuckets::State {
  // A bucket being filled: its members' contributions so far (undefined until they come).
  struct Open {
    Members members;
    std::vector<at::Tensor> parts;
    size_t waiting = 0;
    bool closed = false;
  };
  struct OnWire {
    Members members;
    size_t bucket;
    at::Tensor flat;
    Communicator::Pending pending;
  };

  std::vector<at::Tensor> parameters;
  Rules rules;
  std::vector<HeldAccumulator> accumulators;  // keep the hooks alive
  std::mutex mutex;
  bool collecting = false;
  std::vector<Open> fixed;        // Rules::buckets
  std::vector<size_t> bucket_of;  // parameter -> its fixed bucket
  std::vector<size_t> place_of;   // parameter -> its place among the bucket's members
  Open filling;                   // fill order: the bucket filling now
  size_t filled = 0;              // fill order: buckets closed since the last flush
  std::deque<OnWire> wire;
  int64_t open_bytes = 0, wire_bytes = 0, peak = 0;

  void reset(Open& bucket) {
    bucket.parts.assign(bucket.members.size(), at::Tensor());
    bucket.waiting = bucket.members.size();
    bucket.closed = false;
  }

  void ready(size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!collecting) return;
    at::Tensor part = rules.contribute ? rules.contribute(i) : parameters[i].grad();
    const auto bytes = static_cast<int64_t>(part.nbytes());
    if (rules.buckets.empty()) {
      filling.members.push_back(i);
      filling.parts.push_back(std::move(part));
      open_bytes += bytes;
      peak = std::max(peak, open_bytes + wire_bytes);
      if (open_bytes >= rules.fill_bytes) close_filling();
      return;
    }
    const size_t b = bucket_of[i];
    Open& bucket = fixed[b];
    at::Tensor& slot = bucket.parts[place_of[i]];
    if (bucket.closed || slot.defined()) return;
    slot = std::move(part);
    open_bytes += bytes;
    peak = std::max(peak, open_bytes + wire_bytes);
    if (--bucket.waiting == 0) close(bucket, b);
  }

  // Packs `bucket` and starts its collective, after landing what must land first.
  void close(Open& bucket, size_t b) {
    bucket.closed = true;
    const bool any = std::any_of(bucket.parts.begin(), bucket.parts.end(),
                                 [](const at::Tensor& t) { return t.defined(); });
    if (!any) return;
    while (!wire.empty() && wire.size() >= rules.max_in_flight)
      land_first();
    for (size_t k = 0; k < bucket.parts.size(); ++k) {
      at::Tensor& part = bucket.parts[k];
      if (part.defined()) {
        open_bytes -= static_cast<int64_t>(part.nbytes());
      } else {
        part = at::zeros_like(parameters[bucket.members[k]]);
      }
    }
    at::Tensor flat = flatten(bucket.parts);
    bucket.parts.assign(bucket.members.size(), at::Tensor());  // the strategy may free them now
    if (rules.packed) rules.packed(bucket.members, b);
    Communicator::Pending pending = rules.send(flat, b);
    wire_bytes += static_cast<int64_t>(flat.nbytes());
    wire.push_back({bucket.members, b, std::move(flat), std::move(pending)});
  }

  void close_filling() {
    if (filling.members.empty()) return;
    Open bucket = std::move(filling);
    filling = Open{};
    bucket.waiting = 0;
    close(bucket, filled++);
  }

  void land_first() {
    OnWire& first = wire.front();
    first.pending.wait();
    rules.land(first.members, first.bucket, first.flat);
    wire_bytes -= static_cast<int64_t>(first.flat.nbytes());
    wire.pop_front();
  }
};

GradientBuckets::GradientBuckets(const std::vector<at::Tensor>& parameters, Rules rules)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.parameters = parameters;
  s.rules = std::move(rules);
  s.bucket_of.assign(parameters.size(), 0);
  s.place_of.assign(parameters.size(), 0);
  for (size_t b = 0; b < s.rules.buckets.size(); ++b) {
    State::Open& bucket = s.fixed.emplace_back();
    bucket.members = s.rules.buckets[b];
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      s.bucket_of.at(bucket.members[k]) = b;
      s.place_of[bucket.members[k]] = k;
    }
    s.reset(bucket);
  }
  std::weak_ptr<State> weak = state_;
  s.accumulators = on_gradient_accumulated(parameters, [weak](size_t i) {
    if (auto state = weak.lock()) state->ready(i);
  });
}

GradientBuckets::~GradientBuckets() = default;

void GradientBuckets::arm(bool collect) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->collecting = collect;
}

void GradientBuckets::close_filling() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->close_filling();
}

void GradientBuckets::flush() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  for (size_t b = 0; b < s.fixed.size(); ++b) {
    if (!s.fixed[b].closed) s.close(s.fixed[b], b);
  }
  s.close_filling();
  while (!s.wire.empty())
    s.land_first();
  for (auto& bucket : s.fixed)
    s.reset(bucket);
  s.filled = 0;
}

int64_t GradientBuckets::take_peak_bytes() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const int64_t peak = state_->peak;
  state_->peak = state_->open_bytes + state_->wire_bytes;
  return peak;
}

}  // namespace kiln
