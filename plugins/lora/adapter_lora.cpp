// adapter "lora": low-rank adapters (Hu et al., "LoRA: Low-Rank Adaptation of Large Language
// Models", ICLR 2022) as Hugging Face PEFT makes them. Each targeted linear layer y = x W^T + b
// gains y += s (drop(x) A^T) B^T with A [rank, in] and B [out, rank], s = alpha / rank (alpha /
// sqrt(rank) with rslora); W and every other weight of the model are frozen. A starts
// Kaiming-uniform (PEFT's default: bound 1 / sqrt(in)) or Gaussian (std 1 / rank), B at zero, so
// step 0 computes what the base model computes.
//
// Targets are matched as PEFT matches target_modules: a module whose name is a target or ends
// with "." + target, over the model's interchange (Hugging Face) module names where it has them
// (gpt's c_attn, c_proj, c_fc; llama's q_proj, ..., down_proj), else Kiln's own; "all-linear" is
// every linear layer of the blocks (not the output head). The adapter's tensors are registered
// under the model as "adapter.<Kiln's module path, dots as underscores>.lora_A|lora_B", so
// snapshots save and resume them with the model; PEFT's files name them
// "base_model.model.<module>.lora_A.weight" (PEFT's names and files: plugins/lora/peft_folder.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "core/api/adapter.h"
#include "core/layers/dropout.h"
#include "core/layers/int8_weights.h"
#include "core/layers/low_rank.h"
#include "core/util/error.h"
#include "core/util/text.h"
#include "plugins/lora/peft_folder.h"

namespace kiln {
namespace {

struct LoraOptions : LoraSettings {
  std::string targets;
  std::string init_from;  // a PEFT adapter folder to start from
  // "fp32", "bf16" or "int8": how the blocks' frozen linear weights are kept
  std::string base_dtype;
};

std::string last_part(const std::string& name) {
  return name.substr(name.rfind('.') + 1);
}

// The adapter's tensors, one submodule per adapted layer, and the sites that make linear()
// add them while this module lives.
class LoraModule : public torch::nn::Module {
 public:
  LoraModule(const LoraOptions& o, const std::vector<BlockLinear>& layers) : layers_(layers) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const at::Tensor& w = layers_[i].weight;
      const int64_t in = w.size(1), out = w.size(0);
      auto holder = register_module(module_name(layers_[i].path), std::make_shared<Module>());
      at::Tensor a = holder->register_parameter("lora_A", torch::empty({o.rank, in}));
      at::Tensor b = holder->register_parameter("lora_B", torch::zeros({out, o.rank}));
      if (o.init == "gaussian") {
        a.normal_(0.0, 1.0 / static_cast<double>(o.rank));
      } else {
        const double bound = 1.0 / std::sqrt(static_cast<double>(in));
        a.uniform_(-bound, bound);
      }
      ab_.emplace_back(a, b);
      handles_.push_back(register_low_rank_site(
          w, {a, b, o.scale(), o.dropout,
              dropout_site(static_cast<int64_t>(i), DropoutPlace::kAdapterInput),
              [this] { return is_training(); }}));
    }
  }

  static std::string module_name(const std::string& path) {
    std::string name = path;
    for (char& c : name)
      if (c == '.') c = '_';
    return name;
  }

  const std::vector<BlockLinear>& layers() const { return layers_; }
  const std::vector<std::pair<at::Tensor, at::Tensor>>& ab() const { return ab_; }
  void detach_sites() { handles_.clear(); }

 private:
  std::vector<BlockLinear> layers_;
  std::vector<std::pair<at::Tensor, at::Tensor>> ab_;
  std::vector<std::shared_ptr<void>> handles_;
};

class Lora : public Adapter {
 public:
  explicit Lora(LoraOptions o) : o_(std::move(o)) {
    for (std::string t : split(o_.targets, ',')) {
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t") + 1);
      if (!t.empty()) targets_.push_back(t);
    }
  }

  bool adapts() const override { return true; }
  int narrowest_weight_bytes() const override {
    return o_.base_dtype == "int8" ? 1 : o_.base_dtype == "bf16" ? 2 : 4;
  }

  void attach(Model& model, bool starts) override {
    const std::vector<BlockLinear> layers = block_linear_layers(model);
    const std::vector<BlockLinear> chosen = chosen_layers(layers);
    for (auto& p : model.parameters())
      p.requires_grad_(false);
    narrow_base(layers);
    module_ = model.register_module("adapter", std::make_shared<LoraModule>(o_, chosen));
    if (starts && !o_.init_from.empty()) load_peft(o_.init_from);
  }

  std::string needs_initial_weights() const override {
    if (o_.base_dtype != "int8") return {};
    return "the int8 base's scales (adapter.base_dtype = \"int8\") are computed from these "
           "weights, and snapshots hold only its int8 values";
  }

  std::string peft_config(const Model& model, const std::string& base_model) const override {
    require_interchange(model);
    // PEFT matches target_modules by suffix: the short names when they pick these layers and no
    // other, else each layer's whole name.
    std::set<std::string> targets, whole;
    bool transposed = false;
    for (const auto& layer : module_->layers()) {
      targets.insert(last_part(layer.interchange_name));
      whole.insert(layer.interchange_name);
      transposed = transposed || layer.transposed;
    }
    const std::vector<std::string> short_names(targets.begin(), targets.end());
    for (const auto& layer : block_linear_layers(model)) {
      if (peft_targets(layer.interchange_name, short_names) &&
          !whole.count(layer.interchange_name)) {
        targets = whole;
        break;
      }
    }
    return peft_config_json(o_, base_model,
                            std::vector<std::string>(targets.begin(), targets.end()), transposed);
  }

  std::vector<std::pair<std::string, at::Tensor>> peft_weights(const Model& model) const override {
    require_interchange(model);
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < module_->layers().size(); ++i) {
      const std::string& layer = module_->layers()[i].interchange_name;
      const auto& [a, b] = module_->ab()[i];
      out.emplace_back(peft_tensor_name(layer, "lora_A"), a.detach().to(torch::kCPU).contiguous());
      out.emplace_back(peft_tensor_name(layer, "lora_B"), b.detach().to(torch::kCPU).contiguous());
    }
    return out;
  }

  void merge(Model& model) override {
    torch::NoGradGuard no_grad;
    widen_base(model);
    for (size_t i = 0; i < module_->layers().size(); ++i) {
      const auto& [a, b] = module_->ab()[i];
      at::Tensor w = module_->layers()[i].weight;
      w.add_(torch::matmul(b.to(torch::kDouble), a.to(torch::kDouble)).to(w.dtype()), o_.scale());
    }
    module_->detach_sites();
    model.unregister_module("adapter");
    module_.reset();
  }

 private:
  static void require_interchange(const Model& model) {
    if (model.interchange_names().empty()) {
      throw UserError(
          "this model has no Hugging Face form, so a PEFT adapter folder could name none of its "
          "layers (nor can a merged export): train the adapter on a gpt or llama model to "
          "export it");
    }
  }

  // The layers the targets pick, each target picking one at least, each of a rank the layer
  // can take: a target that picks nothing is a typo PEFT would refuse too, and a rank above a
  // layer's smaller side adds nothing a full update of it would not.
  std::vector<BlockLinear> chosen_layers(const std::vector<BlockLinear>& layers) const {
    std::set<std::string> names;
    for (const auto& layer : layers)
      names.insert(last_part(layer.interchange_name));
    std::vector<std::string> none;
    for (const auto& t : targets_) {
      bool picks = false;
      for (const auto& layer : layers)
        picks = picks || peft_targets(layer.interchange_name, {t});
      if (!picks) none.push_back(fmt::format("\"{}\"", t));
    }
    if (targets_.empty() || !none.empty()) {
      throw UserError(fmt::format(
          "adapter.targets = \"{}\": {} names no linear layer of the model's blocks: its linear "
          "layers are {} (a comma-separated list or an array, matched as PEFT's target_modules: "
          "a module named so or ending in .NAME), or \"all-linear\"",
          o_.targets, none.empty() ? std::string("it") : join(none, ", "),
          join(std::vector<std::string>(names.begin(), names.end()), ", ")));
    }
    std::vector<BlockLinear> chosen;
    for (const auto& layer : layers) {
      if (!peft_targets(layer.interchange_name, targets_)) continue;
      const int64_t most = std::min(layer.weight.size(0), layer.weight.size(1));
      if (o_.rank > most) {
        throw UserError(fmt::format(
            "adapter.rank = {} is larger than layer {} can take (its weight is [{}, {}], so a "
            "rank above {} adds nothing): lower adapter.rank to {} at most, or leave the layer "
            "out of adapter.targets",
            o_.rank, layer.interchange_name, layer.weight.size(0), layer.weight.size(1), most,
            most));
      }
      chosen.push_back(layer);
    }
    return chosen;
  }

  // The blocks' linear weights (most of a large model's; not the embedding, the head, the norms
  // or the biases) in base_dtype, in place: the same tensors, so that linear() still finds each
  // adapter's site by its weight, and a snapshot's restore copies into them (model.init_from's
  // weights are in before attach, so an int8 base's scales come from the same weights again on
  // every resume, eval or export, and need no place in a snapshot).
  void narrow_base(const std::vector<BlockLinear>& layers) {
    torch::NoGradGuard no_grad;
    for (const auto& layer : layers) {
      at::Tensor w = layer.weight;
      if (o_.base_dtype == "bf16") w.set_data(w.to(at::kBFloat16));
      if (o_.base_dtype != "int8") continue;
      Int8Rows q = quantize_rows(w);
      w.set_data(q.values);
      int8_scales_.push_back(register_int8_scales(w, std::move(q.scales)));
    }
  }

  // Back to fp32 for a merge: the merged model is an fp32 checkpoint, its sums taken in fp32.
  void widen_base(const Model& model) {
    torch::NoGradGuard no_grad;
    for (const auto& layer : block_linear_layers(model)) {
      at::Tensor w = layer.weight;
      w.set_data(w.scalar_type() == at::kChar ? dequantized(w) : w.to(at::kFloat));
    }
    int8_scales_.clear();
  }

  // A PEFT adapter folder's tensors into this adapter: the same rank, alpha and scaling, and
  // exactly the layers the targets pick.
  void load_peft(const std::string& dir) const {
    const std::string at = fmt::format("adapter.init_from = \"{}\"", dir);
    PeftAdapter given = read_peft_adapter(dir, o_);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < module_->layers().size(); ++i) {
      const std::string& layer = module_->layers()[i].interchange_name;
      const auto& [a, b] = module_->ab()[i];
      for (const auto& [name, tensor] : {std::pair(peft_tensor_name(layer, "lora_A"), a),
                                         std::pair(peft_tensor_name(layer, "lora_B"), b)}) {
        const auto found = given.tensors.find(name);
        if (found == given.tensors.end() || found->second.sizes() != tensor.sizes()) {
          throw UserError(fmt::format(
              "{}: adapter_model.safetensors {} '{}' of shape [{}]: adapter.targets must pick "
              "the layers the folder adapts, on the base it was trained on",
              at, found == given.tensors.end() ? "has no tensor" : "has another shape for", name,
              fmt::join(tensor.sizes(), ", ")));
        }
        tensor.copy_(found->second);
        given.tensors.erase(found);
      }
    }
    if (!given.tensors.empty()) {
      throw UserError(fmt::format(
          "{}: adapter_model.safetensors adapts '{}', which adapter.targets does not pick: "
          "widen adapter.targets to the folder's target_modules ({})",
          at, given.tensors.begin()->first, given.target_modules));
    }
  }

  LoraOptions o_;
  std::vector<std::string> targets_;
  std::shared_ptr<LoraModule> module_;
  std::vector<std::shared_ptr<void>> int8_scales_;  // registrations of an int8 base's scales
};

LoraOptions lora_options(const Params& p) {
  LoraOptions o;
  o.rank = p.integer("rank");
  o.alpha = p.real("alpha");
  o.dropout = p.real("dropout");
  o.targets = p.text("targets");
  o.rslora = p.flag("rslora");
  o.init = p.text("init");
  o.init_from = p.path("init_from");
  o.base_dtype = p.text("base_dtype");
  return o;
}

const bool registered = AdapterRegistry::add(
    {"lora",
     "low-rank adapters on the blocks' linear layers, the model's own weights frozen; exported "
     "in Hugging Face PEFT's format",
     {ParamSpec::integer("rank", 8, "r: the adapters' rank").at_least(1),
      ParamSpec::real("alpha", 16, "lora_alpha: the update is scaled by alpha / rank").above(0),
      ParamSpec::real("dropout", 0,
                      "lora_dropout: dropout on each adapter's input, drawn by Kiln's rule")
          .at_least(0)
          .at_most(0.9),
      ParamSpec::text("targets", "all-linear",
                      "target_modules, comma-separated or an array of names: layers named so or "
                      "ending in .NAME (gpt: c_attn, c_proj, c_fc; llama: q_proj, k_proj, "
                      "v_proj, o_proj, gate_proj, up_proj, down_proj), or \"all-linear\" (the "
                      "blocks' every one); each must name one at least")
          .list(),
      ParamSpec::flag("rslora", false, "use_rslora: scale by alpha / sqrt(rank)"),
      ParamSpec::text("init", "kaiming",
                      "init_lora_weights: A Kaiming-uniform (PEFT's default) or gaussian (std "
                      "1/rank); B starts at zero either way, so step 0 is the base model")
          .one_of({"kaiming", "gaussian"}),
      ParamSpec::text("init_from", "",
                      "a PEFT adapter folder (adapter_config.json, adapter_model.safetensors) "
                      "to start the adapter from, on model.init_from's base; its r, lora_alpha "
                      "and use_rslora must be rank, alpha and rslora; \"\" = init")
          .files(),
      ParamSpec::text("base_dtype", "fp32",
                      "the frozen linear weights of the blocks: fp32; bf16 (half their bytes; "
                      "each product then takes the bf16-rounded weight, widened to the "
                      "precision's operands); or int8 (a quarter: weight-only, one scale per "
                      "output channel, each weight within half its row's scale; dequantized to "
                      "fp32 for each product)")
          .one_of({"fp32", "bf16", "int8"})}},
    [](const Params& p) { return std::make_shared<Lora>(lora_options(p)); });

}  // namespace
}  // namespace kiln
