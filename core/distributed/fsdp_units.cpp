#include "core/distributed/fsdp_units.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/optimizer.h>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/distributed/distributed.h"
#include "core/distributed/fsdp_blocks.h"
#include "core/distributed/gradient_buckets.h"
#include "core/layers/low_rank.h"
#include "core/util/fault.h"

namespace kiln {

// One parameter and its dim-0 blocks. Not in an anonymous namespace: FsdpUnits::State holds
// them, and a type of internal linkage inside it is refused by -Wsubobject-linkage where this
// file is compiled inside a unity build's unit.
struct FsdpShard {
  at::Tensor param;   // the model's: its data is `block`, or `whole` while gathered
  at::Tensor block;   // this rank's rows of the padded whole
  at::Tensor padded;  // world blocks; its storage holds memory only while gathered
  at::Tensor whole;   // padded's first rows: the parameter's own shape
  bool gathered = false;
  at::Tensor gradient_sum;  // this rank's block of the gradient, summed over ranks, micro-steps
};

struct FsdpUnits::State {
  Communicator& comm;
  std::vector<FsdpShard> params;
  std::vector<std::vector<size_t>> units;  // indices into params, per layer (borrowed ones too)
  std::vector<size_t> trainable;           // indices into params of those that take gradients
  int64_t most_in_transit = 0;             // whole-gradient bytes held at once, at most

  explicit State(Communicator& c) : comm(c) {}

  void release(FsdpShard& s) {
    if (!s.gathered) return;
    s.param.set_data(s.block);
    // A test's leak (KILN_FAULT=fsdp.keep_gathered:1+): the whole parameter stays allocated, as a
    // forgotten buffer would, so that the measured-memory test is seen to catch one.
    if (!fault_due("fsdp.keep_gathered")) resize_storage(s.padded, 0);
    s.gathered = false;
  }

  // The unit's parameters that are not whole yet, whole on every rank, in one collective: each
  // rank's blocks go out side by side and are copied into each parameter's buffer once they
  // have arrived (one all-gather of a block's weights costs about what one of a single bias does
  // on Gloo). A gather started ahead (prefetch) is finished here first.
  void gather_unit(size_t unit) {
    at::NoGradGuard no_grad;
    if (prefetched) {
      Gathering ahead = std::move(*prefetched);
      prefetched.reset();
      finish_gather(ahead);
    }
    if (auto now = start_gather(unit)) finish_gather(*now);
  }

  // Starts the gather of unit `unit` so that it travels while the unit before it computes.
  void prefetch(size_t unit) {
    at::NoGradGuard no_grad;
    if (!prefetched && unit < units.size()) prefetched = start_gather(unit);
  }

  struct Gathering {
    std::vector<FsdpShard*> params;
    at::Tensor all;  // every rank's blocks, rank after rank
    int64_t per_rank = 0;
    Communicator::Pending pending;
  };
  std::optional<Gathering> prefetched;

  std::optional<Gathering> start_gather(size_t unit) {
    Gathering g;
    std::vector<at::Tensor> blocks;
    for (size_t i : units[unit]) {
      if (params[i].gathered) continue;
      g.params.push_back(&params[i]);
      blocks.push_back(params[i].block.reshape(-1));
      params[i].gathered = true;  // on its way: neither gathered again nor released meanwhile
    }
    if (g.params.empty()) return std::nullopt;
    const at::Tensor mine = at::cat(blocks);  // a frozen bf16 base beside fp32: joined in fp32
    g.per_rank = mine.numel();
    g.all = at::empty({comm.size() * g.per_rank}, mine.options());
    g.pending = comm.start_all_gather(mine, g.all.chunk(comm.size()));
    return g;
  }

  void finish_gather(Gathering& g) {
    g.pending.wait();
    int64_t offset = 0;
    for (FsdpShard* s : g.params) {
      resize_storage(s->padded, s->padded.numel() * s->padded.element_size());
      const auto rows = s->padded.chunk(comm.size());
      for (int r = 0; r < comm.size(); ++r)
        rows[r].copy_(g.all.narrow(0, r * g.per_rank + offset, s->block.numel()).view_as(s->block));
      offset += s->block.numel();
      s->param.set_data(s->whole);
    }
  }

  void release_unit(size_t unit) {
    for (size_t i : units[unit])
      release(params[i]);
  }

  // A unit's backward is done: its frozen parameters (an adapter's base), which no gradient
  // accumulator releases, are freed again.
  void release_frozen(size_t unit) {
    if (unit >= units.size()) return;
    for (size_t i : units[unit]) {
      if (!params[i].param.requires_grad()) release(params[i]);
    }
  }

  // Parameter i's whole gradient is complete (its accumulator's hook, through `reducer`): a copy
  // padded to the blocks' rows goes into the bucket and the parameter's whole buffers are freed.
  at::Tensor padded_gradient(size_t i) {
    at::NoGradGuard no_grad;
    FsdpShard& s = params[i];
    at::Tensor padded = at::zeros_like(s.padded, at::MemoryFormat::Contiguous);
    padded.narrow(0, 0, s.whole.size(0)).copy_(s.param.grad());
    s.param.mutable_grad() = at::Tensor();
    release(s);
    return padded;
  }

  // A bucket's sum over the ranks has arrived: this rank's block of each gradient in it,
  // averaged, joins the parameter's block sum.
  void land(const GradientBuckets::Members& members, const at::Tensor& flat) {
    int64_t offset = 0;
    for (size_t j : members) {
      FsdpShard& s = params[trainable[j]];
      const at::Tensor whole = flat.narrow(0, offset, s.padded.numel()).view_as(s.padded);
      offset += s.padded.numel();
      at::Tensor mine = whole.chunk(comm.size())[comm.rank()].div(comm.size());
      s.gradient_sum = s.gradient_sum.defined() ? s.gradient_sum.add_(mine) : mine;
    }
  }

  // Hooks each parameter's gradient accumulator (a resume copies into the same parameters, so
  // they stay hooked). Only while the parameters are whole: autograd expects a gradient of the
  // shape they have when the accumulator is made. Buckets fill in the order gradients complete
  // and close at bucket_bytes, when backward reaches the next unit and at the end of each
  // micro-step's backward; one is on the wire while backward computes the next (Gloo has no
  // reduce-scatter: an all-reduce of whole gradients, of which each rank keeps its blocks).
  void hook_accumulators(const std::shared_ptr<State>& self, int64_t bucket_bytes) {
    std::weak_ptr<State> weak = self;
    std::vector<at::Tensor> tensors;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].param.requires_grad()) continue;
      trainable.push_back(i);
      tensors.push_back(params[i].param);
    }
    GradientBuckets::Rules rules;
    rules.fill_bytes = bucket_bytes;
    rules.max_in_flight = 1;
    rules.contribute = [weak](size_t j) {
      auto state = weak.lock();
      return state->padded_gradient(state->trainable[j]);
    };
    rules.send = [weak](at::Tensor& flat, size_t) {
      std::vector<at::Tensor> one = {flat};
      return weak.lock()->comm.start_all_reduce_sum(one);
    };
    rules.land = [weak](const GradientBuckets::Members& members, size_t, const at::Tensor& flat) {
      weak.lock()->land(members, flat);
    };
    reducer = std::make_unique<GradientBuckets>(tensors, std::move(rules));
  }

  std::unique_ptr<GradientBuckets> reducer;
};

namespace {

// Holds a unit's place for the identity node, which autograd keeps until backward.
struct UnitRef : torch::CustomClassHolder {
  std::weak_ptr<FsdpUnits::State> state;
  size_t unit = 0;
};

// Identity on a unit's output whose backward gathers the unit's parameters again, before
// autograd reaches the unit's own nodes (they all wait for this node's gradient).
struct GatherBeforeBackward : torch::autograd::Function<GatherBeforeBackward> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& output,
                            c10::intrusive_ptr<UnitRef> ref) {
    ctx->saved_data["unit"] = c10::IValue::make_capsule(std::move(ref));
    return output;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto& ref = static_cast<UnitRef&>(*ctx->saved_data["unit"].toCapsule());
    if (auto state = ref.state.lock()) {
      state->reducer->close_filling();  // the units after this one are done with backward
      state->release_frozen(ref.unit + 1);
      state->gather_unit(ref.unit);
    }
    return {grad_outputs[0], at::Tensor()};
  }
};

}  // namespace

FsdpUnits::FsdpUnits(Communicator& comm, Model& model, int64_t bucket_bytes,
                     const std::unordered_set<const void*>& left_alone)
    : state_(std::make_shared<State>(comm)) {
  std::unordered_map<const void*, size_t> index;
  const auto& layers = model.layers();
  for (const auto& layer : layers) {
    std::vector<at::Tensor> used = with_low_rank_parameters(layer->parameters());
    for (const auto& b : layer->borrowed_parameters())
      used.push_back(b);
    std::vector<size_t> unit;
    for (const auto& p : used) {
      if (left_alone.count(p.unsafeGetTensorImpl())) continue;
      auto [it, fresh] = index.emplace(p.unsafeGetTensorImpl(), state_->params.size());
      if (fresh) state_->params.push_back({p, {}, {}, {}, false, {}});
      if (std::find(unit.begin(), unit.end(), it->second) == unit.end()) unit.push_back(it->second);
    }
    state_->units.push_back(std::move(unit));
  }
  state_->hook_accumulators(state_, bucket_bytes);
  state_->reducer->arm(true);  // every micro-step is summed
  std::weak_ptr<State> weak = state_;
  const int world = comm.size();
  at::NoGradGuard no_grad;
  for (FsdpShard& s : state_->params) {
    const at::Tensor whole = s.param.detach();
    const int64_t rows = (whole.size(0) + world - 1) / world;
    s.block = block_of(whole, rows, comm.rank(), world);
    std::vector<int64_t> shape = whole.sizes().vec();
    shape[0] = rows * world;
    s.padded = at::empty(shape, whole.options());
    s.whole = s.padded.narrow(0, 0, whole.size(0));
    s.param.set_data(s.block);
    resize_storage(s.padded, 0);
  }
  model.set_layer_runner([weak](size_t unit, Layer& layer, const at::Tensor& x) {
    auto state = weak.lock();
    state->gather_unit(unit);
    state->prefetch(unit + 1);
    const bool training = torch::GradMode::is_enabled();
    if (training) {
      for (size_t i : state->units[unit])
        state->params[i].param.mutable_grad() = at::Tensor();  // zero_grad left a block of 0s
    }
    at::Tensor out = layer.forward(x);
    state->release_unit(unit);
    if (!training || !out.requires_grad()) return out;
    auto ref = c10::make_intrusive<UnitRef>();
    ref->state = weak;
    ref->unit = unit;
    return GatherBeforeBackward::apply(out, ref);
  });
}

FsdpUnits::~FsdpUnits() = default;

void FsdpUnits::begin_micro_step() {
  state_->reducer->close_filling();
}

void FsdpUnits::finish_gradients() {
  state_->reducer->flush();
  for (FsdpShard& s : state_->params) {
    state_->release(s);
    s.param.mutable_grad() = std::move(s.gradient_sum);
    s.gradient_sum = at::Tensor();
  }
}

int64_t FsdpUnits::peak_gradient_bytes() const {
  int64_t blocks = 0;
  for (size_t i : state_->trainable)
    blocks += static_cast<int64_t>(state_->params[i].block.nbytes());
  state_->most_in_transit = std::max(state_->most_in_transit, state_->reducer->take_peak_bytes());
  return blocks + state_->most_in_transit;
}

void FsdpUnits::declare_blocks(std::vector<StateSlice>& slices) const {
  std::unordered_map<const void*, const FsdpShard*> shards;
  for (const FsdpShard& s : state_->params)
    shards.emplace(s.param.unsafeGetTensorImpl(), &s);
  const int rank = state_->comm.rank();
  for (StateSlice& slice : slices) {
    if (!slice.parameter.defined()) continue;  // buffers are whole on every rank
    const auto found = shards.find(slice.parameter.unsafeGetTensorImpl());
    if (found == shards.end()) continue;
    const FsdpShard& s = *found->second;
    const int64_t rows = s.block.size(0), real = s.whole.size(0);
    const int64_t first = std::min(real, rank * rows);
    slice.whole = s.whole.sizes().vec();
    slice.offsets[0] = first;
    slice.local = slice.local.narrow(0, 0, std::min(rows, real - first));
    slice.writes = true;
  }
}

void FsdpUnits::shard(torch::optim::Optimizer& optimizer) {
  at::NoGradGuard no_grad;
  Communicator& comm = state_->comm;
  for (FsdpShard& s : state_->params) {
    const int64_t rows = s.block.size(0);
    for (at::Tensor* t : parameter_state(optimizer, s.param))
      *t = block_of(*t, rows, comm.rank(), comm.size());
    s.block = block_of(s.param.detach(), rows, comm.rank(), comm.size());
    s.param.set_data(s.block);
  }
}

void FsdpUnits::make_whole_shaped() {
  at::NoGradGuard no_grad;
  for (FsdpShard& s : state_->params)
    s.param.set_data(at::zeros(s.whole.sizes(), s.block.options()));
}

}  // namespace kiln
