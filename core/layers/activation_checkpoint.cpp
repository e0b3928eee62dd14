#include "core/layers/activation_checkpoint.h"

#include <mutex>
#include <optional>

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/autograd.h>

#include "core/layers/document_positions.h"
#include "core/layers/random_draws.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

// A generator's state, and the generator, to put back or swap in.
struct GeneratorState {
  at::Generator generator;
  at::Tensor state;

  static GeneratorState of(at::Generator generator) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    at::Tensor state = generator.get_state();
    return {std::move(generator), std::move(state)};
  }
  void restore() {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
};

std::vector<GeneratorState> generator_states(const at::Tensor& x) {
  std::vector<GeneratorState> states = {
      GeneratorState::of(at::globalContext().defaultGenerator(at::kCPU))};
  if (x.is_cuda())
    states.push_back(GeneratorState::of(at::globalContext().defaultGenerator(x.device())));
  return states;
}

struct AutocastState {
  at::DeviceType device;
  bool on;
  at::ScalarType dtype;
};

// What the backward pass needs to run the block again as the forward pass ran it.
struct Recompute : torch::CustomClassHolder {
  std::function<at::Tensor(const at::Tensor&)> block;
  std::vector<GeneratorState> generators;
  std::vector<AutocastState> autocast;
  std::optional<DrawKey> draws;  // Kiln's dropout key (core/layers/random_draws.h)
  at::Tensor positions;          // packed rows' positions (core/layers/document_positions.h)
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // Function::apply runs this with autograd off: the block keeps nothing for backward.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            c10::intrusive_ptr<Recompute> recompute) {
    recompute->generators = generator_states(x);
    recompute->draws = current_draws();
    recompute->positions = current_positions();
    for (at::DeviceType d : {at::kCPU, at::kCUDA}) {
      recompute->autocast.push_back(
          {d, compat::AutocastGuard::enabled(d), compat::AutocastGuard::dtype_of(d)});
    }
    ctx->save_for_backward({x});
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(recompute);
    return recompute->block(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto recompute = ctx->saved_data["recompute"].toCapsule();
    auto& r = static_cast<Recompute&>(*recompute);
    const at::Tensor saved = ctx->get_saved_variables()[0];
    at::Tensor input = saved.detach().requires_grad_(saved.requires_grad());
    at::Tensor output;
    {
      // The generators as the forward pass found them, and as they are now once this is done.
      std::vector<GeneratorState> now = generator_states(saved);
      for (auto& g : r.generators)
        g.restore();
      std::vector<std::optional<compat::AutocastGuard>> autocast(r.autocast.size());
      for (size_t i = 0; i < r.autocast.size(); ++i)
        autocast[i].emplace(r.autocast[i].device, r.autocast[i].dtype, r.autocast[i].on);
      DrawScope draws(r.draws);
      PositionScope positions(r.positions);
      at::AutoGradMode grad(true);
      output = r.block(input);
      for (auto& g : now)
        g.restore();
    }
    torch::autograd::backward({output}, {grad_outputs[0]});
    return {input.grad(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpointed(const std::function<at::Tensor(const at::Tensor&)>& block,
                        const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return block(x);
  auto recompute = c10::make_intrusive<Recompute>();
  recompute->block = block;
  // An input outside the graph (a pipeline stage's received activations, say) would leave the
  // output outside it too, and the block's parameters without gradients: give it a place there.
  return CheckpointFunction::apply(x.requires_grad() ? x : x.detach().requires_grad_(), recompute);
}

std::vector<ParamSpec> with_activation_checkpointing(std::vector<ParamSpec> model_params) {
  model_params.push_back(
      ParamSpec::text("activation_checkpointing", "none",
                      "recompute blocks in backward instead of keeping their activations: none, "
                      "full (every block) or every_n (blocks 0, n, 2n, ...)")
          .one_of({"none", "full", "every_n"})
          .unhashed());
  model_params.push_back(ParamSpec::integer("activation_checkpointing_every", 2,
                                            "the n of activation_checkpointing = \"every_n\"")
                             .at_least(1)
                             .at_most(1 << 20)
                             .unhashed());
  return model_params;
}

bool checkpoints_block(const Params& p, int64_t index) {
  const std::string& mode = p.text("activation_checkpointing");
  if (mode == "full") return true;
  if (mode == "every_n") return index % p.integer("activation_checkpointing_every") == 0;
  return false;
}

}  // namespace kiln
