// The model interface. A model is an ordered sequence of layers (embedding, blocks, head) so
// that the framework can cut it into pipeline stages or shard it; running every layer in order
// is the whole forward pass, tokens [batch, time] -> logits [batch, time, vocab].
//
// Over a run: assemble() asks the plugin for the model's plan (ModelPlan, below), checks the run
// against it, then builds the model on every rank (on the CPU, freshly initialised), lets it
// import model.init_from weights, moves it to the run's device and hands it to the parallel
// strategy's attach(); the optimizer is built over its parameters() after that. Snapshots save
// and load its parameters and buffers by their registered names, so those names are part of
// the snapshot format.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "core/config/registry.h"
#include "core/layers/tensor_parallel.h"

namespace kiln {

class Layer : public torch::nn::Module {
 public:
  // The previous layer's output (the first layer gets the int64 token ids) to this layer's.
  // Called by Model::forward, or by a pipeline stage for its own layers, inside the precision
  // policy's forward scope (autocast); in training with autograd on, in evaluation and sampling
  // under NoGradGuard with the module in eval mode.
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // Parameters registered under another layer that this one also uses (tied weights): a
  // pipeline stage holding this layer keeps a replica of them and sums their gradients with
  // the owner's stage. Asked once, by the pipeline strategy's attach().
  virtual std::vector<torch::Tensor> borrowed_parameters() const { return {}; }
};

class Model : public torch::nn::Module {
 public:
  // Token ids the model predicts (logits may be wider when the vocabulary is padded): data
  // holding larger ids is refused (assemble), and the trainer's loss and sampling read only
  // this many logits. Asked at any time after construction; it never changes.
  virtual int64_t vocab_size() const = 0;
  // Longest sequence the model accepts: assemble() refuses a longer train.seq_len, and sampling
  // feeds at most this many tokens. Fixed from construction on.
  virtual int64_t context_length() const = 0;
  // Training FLOPs per token (forward + backward), for MFU in `kiln bench`; 6 x parameters
  // unless overridden.
  virtual double flops_per_token(int64_t seq_len) const;

  // The weights under the model's interchange names (Hugging Face's, for gpt), in the layout
  // that naming expects: what `kiln export` writes and `model.init_from` reads. Models without
  // an interchange format keep the defaults, which say so. Called by `kiln export` on a model
  // that a snapshot was loaded into.
  virtual std::vector<std::pair<std::string, torch::Tensor>> export_weights() const;
  // Copies `weights` in; a UserError listing every missing, unexpected or misshapen tensor.
  // Called by assemble() for model.init_from, before the model moves to its device and before
  // any optimizer exists; the tensors are on the CPU.
  virtual void import_weights(const std::map<std::string, torch::Tensor>& weights);
  // The model's sizes as Hugging Face's config.json spells them (a JSON object as text, with
  // "architectures" and "model_type"): written beside the exported weights, and compared field
  // by field with a directory's config.json as read (core/api/hf_config.h) by model.init_from.
  // Empty for a model without one.
  virtual std::string interchange_config() const { return {}; }
  // Each parameter's interchange name (its name in export_weights()) by its registered name
  // ("h.0.c_attn.weight" -> "transformer.h.0.attn.c_attn.weight"), and whether the interchange
  // form stores it transposed (GPT-2's Conv1D): what an adapter matches its targets against
  // and names its PEFT tensors by. Empty for a model without an interchange format.
  struct InterchangeName {
    std::string name;
    bool transposed = false;
  };
  virtual std::map<std::string, InterchangeName> interchange_names() const { return {}; }

  // Tensor parallelism: keep only this rank's slice of the weights `group` splits (attention
  // heads, MLP hidden units; see core/layers/tensor_parallel.h) and run forward on them, calling
  // group.enter / group.leave around the split layers. Returns how each split parameter was
  // cut, so that the strategy can gather whole weights for snapshots. Called once by the
  // "tensor" strategy's attach(), on a model built whole (so initialised exactly as on one
  // process), before the optimizer exists. Only for plans with check_tensor_parallel set.
  virtual std::vector<ParameterSplit> split_for_tensor_parallel(const TensorParallelGroup& group);

  // `loss` plus the weighted auxiliary losses of the training forward pass that just ran (a
  // mixture of experts' router losses, core/layers/moe.h) over `micro_steps`, which are then
  // forgotten; `loss` itself for a model without any. Called by the trainer after each training
  // forward pass, `micro_steps` being the step's count of them on this rank.
  virtual at::Tensor with_auxiliary_loss(const at::Tensor& loss, double /*micro_steps*/) {
    return loss;
  }
  // Measures of the model's layers over the training forward passes since the last call, by
  // metric name ("moe_3.load_imbalance"): what the run store keeps beside a step's row. The
  // model adds its ranks' tallies with `sum_over_ranks` (ParallelStrategy::sum, a collective)
  // before it takes any ratio, so a measure is that of the whole step's batch. Empty for a model
  // without any. Called by the session after every step, on every rank.
  virtual std::vector<std::pair<std::string, double>> take_layer_measures(
      const std::function<at::Tensor(const at::Tensor&)>& sum_over_ranks) {
    (void)sum_over_ranks;
    return {};
  }

  const std::vector<std::shared_ptr<Layer>>& layers() const { return layers_; }
  // Runs every layer in order through the layer runner (by default layer.forward(x)). Inside a
  // KvCacheScope that asks for the last position's logits (core/layers/kv_cache.h), the last layer,
  // the head, gets the last position alone: a head works on each position by itself.
  torch::Tensor forward(const torch::Tensor& tokens);
  // How forward() runs layer `index`: a strategy that keeps a layer's weights elsewhere between
  // uses (fsdp) installs one that fetches them first. Set at most once, by attach().
  using LayerRunner =
      std::function<torch::Tensor(size_t index, Layer& layer, const torch::Tensor& x)>;
  void set_layer_runner(LayerRunner runner) { runner_ = std::move(runner); }
  int64_t parameter_count() const;

 protected:
  // Appends to the layer sequence; registering it as a submodule stays the subclass's business
  // so that it controls parameter names.
  void append_layer(std::shared_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
  LayerRunner runner_;
};

// A model as its parameters describe it, before anything is allocated. A model plugin's factory
// returns one: assemble() checks the run against it (the context, the vocabulary, the memory
// training needs) and only then calls build(); a sweep checks every member against its plan and
// builds none (core/train/assemble.h, Assembly::kCheck). Sizes are counted in double, so that a
// size typo cannot overflow before it is refused.
struct ModelPlan {
  std::string description;  // the model and its sizes: "a gpt with n_layer 12, ..."
  double parameters = 0;    // exactly what parameter_count() of the built model gives
  // Of them, those a token's forward pass does not use: the experts it is not routed to. `kiln
  // bench` prints parameters less these as the active ones, which flops_per_token counts.
  double inactive_parameters = 0;
  double buffers = 0;      // numbers the model holds besides its parameters (a positional table)
  int64_t vocab_size = 0;  // what Model::vocab_size() of the built model gives
  int64_t context_length = 0;  // what Model::context_length() of the built model gives
  int64_t layers = 0;          // entries of the built model's layers(): embedding, blocks, head
  // The probability of the model's dropouts in training (core/layers/dropout.h); 0 = its forward
  // pass draws no random number.
  double dropout = 0;
  std::function<std::shared_ptr<Model>()> build;  // allocates and initialises it, on the CPU
  // A UserError when the model's shapes do not divide over `tp` tensor-parallel ranks
  // ("model.n_head = 6 does not divide over parallel.tp = 4"); empty for a model that has no
  // tensor-parallel form. Asked by assemble() before the model is built.
  std::function<void(int64_t tp)> check_tensor_parallel;
  // The model adds auxiliary losses to the training loss (Model::with_auxiliary_loss): what
  // computes the loss elsewhere than the trainer's micro-steps (pipeline stages, a captured CUDA
  // graph) is refused.
  bool auxiliary_losses = false;
};

// `plan`'s model, built; an allocation failure while building is a UserError naming the model.
std::shared_ptr<Model> build_model(const ModelPlan& plan);

struct ModelKind {
  static constexpr const char* name = "model";
  using Product = ModelPlan;
  using Factory = std::function<std::shared_ptr<ModelPlan>(const Params&)>;
};
using ModelRegistry = Registry<ModelKind>;

}  // namespace kiln
