#include "core/distributed/expert_placement.h"

#include <fmt/format.h>
#include <torch/autograd.h>
#include <torch/optim/optimizer.h>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/distributed/distributed.h"
#include "core/layers/moe.h"
#include "core/layers/tensor_parallel.h"
#include "core/util/error.h"

namespace kiln {

struct ExpertPlacement::Groups {
  int ep = 1, index = 0, world = 1, rank = 0;
  std::unique_ptr<Communicator> group;     // the ep ranks whose experts make one whole
  std::unique_ptr<Communicator> replicas;  // the ranks holding this rank's share
};

namespace {

struct GroupRef : torch::CustomClassHolder {
  Communicator* comm = nullptr;
};

// Gloo exchanges no bf16: such rows travel widened to fp32, which holds them exactly.
at::Tensor all_to_all(Communicator& comm, const at::Tensor& rows, std::vector<int64_t> sent,
                      std::vector<int64_t> received) {
  if (comm.backend() != "gloo" || rows.scalar_type() != at::kBFloat16)
    return comm.all_to_all(rows, std::move(sent), std::move(received));
  return comm.all_to_all(rows.to(at::kFloat), std::move(sent), std::move(received))
      .to(at::kBFloat16);
}

// The rows' all-to-all, whose backward sends the gradients back the way the rows came.
struct Exchange : torch::autograd::Function<Exchange> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& rows,
                            c10::intrusive_ptr<GroupRef> ref, std::vector<int64_t> sent,
                            std::vector<int64_t> received) {
    at::Tensor out = all_to_all(*ref->comm, rows, sent, received);
    ctx->saved_data["group"] = c10::IValue::make_capsule(std::move(ref));
    ctx->saved_data["sent"] = sent;
    ctx->saved_data["received"] = received;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto& ref = static_cast<GroupRef&>(*ctx->saved_data["group"].toCapsule());
    return {all_to_all(*ref.comm, grads[0], ctx->saved_data["received"].toIntVector(),
                       ctx->saved_data["sent"].toIntVector()),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::vector<MixtureOfExpertsImpl*> moe_layers(Model& model) {
  std::vector<MixtureOfExpertsImpl*> out;
  for (const auto& module : model.modules()) {
    if (auto* moe = dynamic_cast<MixtureOfExpertsImpl*>(module.get())) out.push_back(moe);
  }
  return out;
}

ExpertParallelGroup group_of(Communicator& group) {
  ExpertParallelGroup out;
  out.rank = group.rank();
  out.size = group.size();
  auto ref = c10::make_intrusive<GroupRef>();
  ref->comm = &group;
  out.exchange = [ref](const at::Tensor& rows, const std::vector<int64_t>& sent,
                       const std::vector<int64_t>& received) {
    if (!rows.requires_grad()) return all_to_all(*ref->comm, rows, sent, received);
    return Exchange::apply(rows, ref, sent, received);
  };
  return out;
}

const ParameterSplit kExpertRows{"experts", 0, 1};

}  // namespace

ParamSpec expert_parallel_param(bool built) {
  if (!built) {
    return ParamSpec::integer("ep", 1, "experts split over ranks: not built for this strategy")
        .at_least(1)
        .added_later();
  }
  return ParamSpec::integer("ep", 1,
                            "ranks over which each mixture-of-experts layer's experts are split; "
                            "consecutive ranks form a group, and the experts' other ranks are "
                            "data parallel")
      .at_least(1)
      .at_most(1 << 16)
      .added_later();
}

void refuse_unbuilt_expert_parallel(const Params& params, const std::string& strategy) {
  if (const int64_t ep = params.integer("ep"); ep > 1) {
    throw ParamError("ep", fmt::format("parallel.ep = {}: experts split over ranks are not built "
                                       "for parallel.type = \"{}\": use parallel.type = \"ddp\" "
                                       "or \"fsdp\" with parallel.ep, or parallel.ep = 1",
                                       ep, strategy));
  }
}

WorldShape expert_world_shape(const Params& params, int world) {
  if (const int64_t ep = params.integer("ep"); world % ep != 0) {
    throw ParamError("ep", fmt::format("parallel.ep = {} does not divide the world of {} "
                                       "process(es): start a multiple of ep ranks (kiln launch "
                                       "--nproc-per-node N) or change parallel.ep",
                                       ep, world));
  }
  return WorldShape{world, 0};
}

ExpertPlacement::ExpertPlacement(Communicator& world, Model& model, int ep)
    : groups_(std::make_unique<Groups>()) {
  const std::vector<MixtureOfExpertsImpl*> layers = moe_layers(model);
  if (ep > 1 && layers.empty()) {
    throw ParamError("ep", fmt::format("parallel.ep = {} splits experts, but the model has no "
                                       "mixture-of-experts layer: set parallel.ep = 1, or "
                                       "model.moe_experts",
                                       ep));
  }
  for (const auto* moe : layers) {
    if (moe->options().experts % ep != 0) {
      throw ParamError("ep", fmt::format("model.moe_experts = {} does not divide over parallel.ep "
                                         "= {}: give each rank of a group as many experts; set "
                                         "moe_experts to a multiple of ep",
                                         moe->options().experts, ep));
    }
  }
  if (ep == 1) return;
  Groups& g = *groups_;
  g.ep = ep;
  g.world = world.size();
  g.rank = world.rank();
  g.index = world.rank() % ep;
  std::vector<int> group, replicas;
  for (int i = 0; i < ep; ++i)
    group.push_back(world.rank() / ep * ep + i);
  for (int i = g.index; i < world.size(); i += ep)
    replicas.push_back(i);
  g.group = world.subgroup(fmt::format("ep{}/", world.rank() / ep), group);
  g.replicas = world.subgroup(fmt::format("experts{}/", g.index), replicas);
  const ExpertParallelGroup placement = group_of(*g.group);
  at::NoGradGuard no_grad;
  for (auto* moe : layers) {
    moe->placement = placement;
    for (at::Tensor* share : {&moe->gate_up_proj, &moe->down_proj}) {
      share->set_data(slice_for_rank(share->detach(), kExpertRows, g.index, ep));
      shares_.push_back(*share);
      share_set_.insert(share->unsafeGetTensorImpl());
    }
  }
}

ExpertPlacement::~ExpertPlacement() = default;

std::vector<at::Tensor> ExpertPlacement::data_parallel(
    const std::vector<at::Tensor>& parameters) const {
  std::vector<at::Tensor> out;
  for (const auto& p : parameters) {
    if (!share_set_.count(p.unsafeGetTensorImpl())) out.push_back(p);
  }
  return out;
}

void ExpertPlacement::finish_gradients() {
  std::vector<at::Tensor> grads;
  for (const auto& p : shares_) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  groups_->replicas->all_reduce_sum(grads);
  for (auto& grad : grads)
    grad.div_(groups_->world);
}

at::Tensor ExpertPlacement::own_squares() const {
  at::NoGradGuard no_grad;
  at::Tensor sum = at::zeros({}, at::kFloat);
  for (const auto& p : shares_) {
    if (p.grad().defined()) sum = sum.to(p.device()) + p.grad().to(at::kFloat).pow(2).sum();
  }
  return sum;
}

at::Tensor ExpertPlacement::group_squares() const {
  std::vector<at::Tensor> sum = {own_squares()};
  if (!shares_.empty()) groups_->group->all_reduce_sum(sum);
  return sum[0];
}

void ExpertPlacement::declare_shares(std::vector<StateSlice>& slices) const {
  for (StateSlice& slice : slices) {
    if (!slice.parameter.defined() || !share_set_.count(slice.parameter.unsafeGetTensorImpl()))
      continue;
    slice.offsets[0] = groups_->index * slice.local.size(0);
    slice.whole[0] = groups_->ep * slice.local.size(0);
    slice.writes = groups_->rank < groups_->ep;
  }
}

void ExpertPlacement::shard(torch::optim::Optimizer& optimizer) {
  at::NoGradGuard no_grad;
  const auto share_of = [&](const at::Tensor& whole) {
    return slice_for_rank(whole, kExpertRows, groups_->index, groups_->ep);
  };
  for (auto& p : shares_) {
    for (at::Tensor* t : parameter_state(optimizer, p))
      *t = share_of(*t);
    p.set_data(share_of(p.detach()));
  }
}

void ExpertPlacement::make_whole_shaped() {
  at::NoGradGuard no_grad;
  for (auto& p : shares_) {
    std::vector<int64_t> whole = p.sizes().vec();
    whole[0] *= groups_->ep;
    p.set_data(at::zeros(whole, p.options()));
  }
}

}  // namespace kiln
