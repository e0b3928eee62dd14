#include "plugins/llama/llama_interchange.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/layers/interchange_weights.h"
#include "core/util/error.h"

namespace kiln {
namespace {

using Json = nlohmann::json;

// What only one of Mixtral's and Qwen3-MoE's forms computes, refused for the other.
void check_mixtral_form(const MoeOptions& moe, int64_t moe_every) {
  if (moe_every != 1) {
    throw UserError(fmt::format(
        "model.moe_every = {}: MixtralForCausalLM makes every block a mixture of experts, and "
        "Qwen3MoeForCausalLM, whose decoder_sparse_step keeps blocks dense, has qk-norm, so this "
        "llama has no Hugging Face form to export or load: train it with moe_every = 1, or with "
        "qk_norm = true for Qwen3-MoE's",
        moe_every));
  }
  if (moe.routing == MoeRouting::kQwen3 && !moe.norm_topk_prob) {
    throw UserError(
        "model.moe_routing = \"qwen3\" without moe_norm_topk_prob: MixtralForCausalLM "
        "renormalises the k kept weights, and Qwen3MoeForCausalLM, which need not, has "
        "qk-norm, so this llama has no Hugging Face form to export or load: train it with "
        "moe_norm_topk_prob = true, or with qk_norm = true for Qwen3-MoE's");
  }
}

// One tensor of a checkpoint, and where it lies in a Kiln parameter: the whole of it, or rows
// [begin, end) of expert `expert`'s matrix in a stacked one.
struct Piece {
  std::string name;
  int64_t expert = -1, begin = 0, end = 0;
};

at::Tensor view_of(const at::Tensor& parameter, const Piece& piece) {
  if (piece.expert < 0) return parameter;
  return parameter[piece.expert].slice(0, piece.begin, piece.end);
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The checkpoint's pieces of parameter `name`: experts.gate_up_proj [E, 2 ffn, n_embd] is each
// expert's gate then up projection, experts.down_proj [E, n_embd, ffn] each one's down.
std::vector<Piece> pieces_of(HfLlamaForm form, const std::string& name,
                             const at::Tensor& parameter) {
  if (name == "lm_head.weight") return {{name}};
  std::string full = "model." + name;
  const bool routed =
      ends_with(name, ".mlp.gate.weight") || name.find(".mlp.experts.") != std::string::npos;
  if (form == HfLlamaForm::kMixtral && routed) {
    full.replace(full.find(".mlp."), 5, ".block_sparse_moe.");
  }
  const bool mixtral = form == HfLlamaForm::kMixtral;
  std::vector<Piece> out;
  for (const auto& [stacked, tails] :
       {std::pair<std::string, std::vector<std::string>>{
            "gate_up_proj", {mixtral ? "w1" : "gate_proj", mixtral ? "w3" : "up_proj"}},
        {"down_proj", {mixtral ? "w2" : "down_proj"}}}) {
    if (!ends_with(name, ".experts." + stacked)) continue;
    const std::string prefix = full.substr(0, full.size() - stacked.size());
    const int64_t rows = parameter.size(1) / static_cast<int64_t>(tails.size());
    for (int64_t e = 0; e < parameter.size(0); ++e) {
      for (size_t t = 0; t < tails.size(); ++t) {
        const int64_t begin = static_cast<int64_t>(t) * rows;
        out.push_back({fmt::format("{}{}.{}.weight", prefix, e, tails[t]), e, begin, begin + rows});
      }
    }
    return out;
  }
  return {{full}};
}

}  // namespace

HfLlamaForm hf_form_of(const LlamaOptions& o) {
  const MoeOptions& moe = o.moe;
  if (moe.experts == 0) {
    if (o.qk_norm) {
      throw UserError(
          "a llama with model.qk_norm = true has no LlamaForCausalLM form (Hugging Face's "
          "Llama has no q_norm/k_norm): export a llama without it");
    }
    return HfLlamaForm::kLlama;
  }
  if (moe.capacity_factor > 0) {
    throw UserError(fmt::format(
        "model.moe_capacity_factor = {}: transformers' Mixtral and Qwen3-MoE send every token to "
        "its k experts, so they would compute other logits than this llama, which drops tokens "
        "over an expert's capacity, and it has no Hugging Face form to export or load: train "
        "it dropless, moe_capacity_factor = 0",
        moe.capacity_factor));
  }
  if (moe.bias_update_rate > 0) {
    throw UserError(fmt::format(
        "model.moe_bias_update_rate = {}: the routing bias it trains helps choose each token's "
        "experts, and neither MixtralForCausalLM nor Qwen3MoeForCausalLM has one, so this llama "
        "has no Hugging Face form to export or load: balance it with moe_aux_loss_weight "
        "instead, moe_bias_update_rate = 0",
        moe.bias_update_rate));
  }
  if (moe.shared_ffn_dim > 0) {
    throw UserError(
        "model.moe_shared_experts > 0: neither MixtralForCausalLM nor Qwen3MoeForCausalLM has "
        "shared experts, so this llama has no Hugging Face form to export or load: train it "
        "with moe_shared_experts = 0");
  }
  if (o.qk_norm) return HfLlamaForm::kQwen3Moe;
  check_mixtral_form(moe, o.moe_every);
  return HfLlamaForm::kMixtral;
}

std::string hf_config_of(const LlamaOptions& o) {
  const HfLlamaForm form = hf_form_of(o);
  Json rope_scaling = nullptr;
  if (o.rope_factor > 0) {
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", o.rope_factor},
                    {"low_freq_factor", o.low_freq_factor},
                    {"high_freq_factor", o.high_freq_factor},
                    {"original_max_position_embeddings", o.rope_original_context}};
  }
  Json config = {{"hidden_size", o.n_embd},
                 {"num_attention_heads", o.n_head},
                 {"num_key_value_heads", o.n_kv_head},
                 {"num_hidden_layers", o.n_layer},
                 {"head_dim", o.head_dim()},
                 {"rms_norm_eps", o.norm_eps},
                 {"rope_theta", o.rope_theta},
                 {"rope_scaling", rope_scaling},
                 {"max_position_embeddings", o.block_size},
                 {"vocab_size", o.vocab_size},
                 {"tie_word_embeddings", o.tie_embeddings},
                 {"hidden_act", "silu"},
                 {"torch_dtype", "float32"}};
  const MoeOptions& moe = o.moe;
  if (form == HfLlamaForm::kLlama) {
    config.update({{"architectures", Json::array({"LlamaForCausalLM"})},
                   {"model_type", "llama"},
                   {"intermediate_size", o.ffn_dim},
                   {"attention_bias", false},
                   {"mlp_bias", false}});
  } else if (form == HfLlamaForm::kMixtral) {
    // Every block is a mixture, so intermediate_size is each expert's width.
    config.update({{"architectures", Json::array({"MixtralForCausalLM"})},
                   {"model_type", "mixtral"},
                   {"intermediate_size", moe.ffn_dim},
                   {"num_local_experts", moe.experts},
                   {"num_experts_per_tok", moe.top_k},
                   {"sliding_window", nullptr}});
  } else {
    // Mixtral's routing is Qwen3-MoE's with the kept weights renormalised.
    config.update({{"architectures", Json::array({"Qwen3MoeForCausalLM"})},
                   {"model_type", "qwen3_moe"},
                   {"intermediate_size", o.ffn_dim},
                   {"moe_intermediate_size", moe.ffn_dim},
                   {"num_experts", moe.experts},
                   {"num_experts_per_tok", moe.top_k},
                   {"decoder_sparse_step", o.moe_every},
                   {"norm_topk_prob", moe.routing == MoeRouting::kMixtral || moe.norm_topk_prob},
                   {"mlp_only_layers", Json::array()},
                   {"use_sliding_window", false},
                   {"attention_bias", false}});
  }
  return config.dump();
}

std::vector<std::pair<std::string, at::Tensor>> hf_tensors_of(
    const LlamaOptions& o, const torch::OrderedDict<std::string, at::Tensor>& parameters) {
  const HfLlamaForm form = hf_form_of(o);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : parameters) {
    const at::Tensor parameter = item.value().detach();
    for (const Piece& piece : pieces_of(form, item.key(), parameter))
      out.emplace_back(piece.name, view_of(parameter, piece).contiguous());
  }
  return out;
}

void load_hf_tensors(const LlamaOptions& o, const std::map<std::string, at::Tensor>& given,
                     torch::OrderedDict<std::string, at::Tensor>& parameters) {
  const HfLlamaForm form = hf_form_of(o);
  std::vector<InterchangeTensor> needed;
  for (const auto& item : parameters) {
    for (const Piece& piece : pieces_of(form, item.key(), item.value()))
      needed.push_back({piece.name, view_of(item.value(), piece).sizes().vec()});
  }
  // Tied checkpoints may still carry the head (a copy of the embedding); older ones carry the
  // rotary frequencies, which follow from the config.
  check_interchange_weights(given, needed, "llama", [&o](const std::string& name) {
    return (o.tie_embeddings && name == "lm_head.weight") ||
           name.find(".rotary_emb.inv_freq") != std::string::npos;
  });
  torch::NoGradGuard no_grad;
  for (auto& item : parameters) {
    for (const Piece& piece : pieces_of(form, item.key(), item.value())) {
      view_of(item.value(), piece).copy_(given.at(piece.name).to(item.value().dtype()));
    }
  }
}

}  // namespace kiln
