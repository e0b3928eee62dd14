// Hugging Face model_types "llama", "mixtral" and "qwen3_moe" (LlamaForCausalLM's,
// MixtralForCausalLM's and Qwen3MoeForCausalLM's config.json) read as Kiln's model "llama"
// (core/api/hf_config.h; the mixtures of experts: docs/moe.md). transformers' defaults stand for
// absent fields; what changes the logits and llama does not compute is refused. The rotary base and
// scaling come in two spellings: transformers 4's rope_theta beside rope_scaling (whose type was
// "type" before 4.43 and "rope_type" since), and transformers 5's one rope_parameters object.
#include <fmt/format.h>

#include "core/api/hf_config.h"

namespace kiln {
namespace {

using Json = nlohmann::json;

// Llama 3's scaling as the llama model's config keys, and as its interchange config writes it.
std::string llama3_scaling(HfConfig& c, const Json& rope) {
  const Json scaling = {{"rope_type", "llama3"},
                        {"factor", rope.value("factor", 8.0)},
                        {"low_freq_factor", rope.value("low_freq_factor", 1.0)},
                        {"high_freq_factor", rope.value("high_freq_factor", 4.0)},
                        {"original_max_position_embeddings",
                         rope.value("original_max_position_embeddings", int64_t{8192})}};
  c.read_as("rope_scaling", scaling);
  return fmt::format(
      "rope_scaling_factor = {}\nrope_low_freq_factor = {}\nrope_high_freq_factor = {}\n"
      "rope_original_context = {}\n",
      scaling["factor"].get<double>(), scaling["low_freq_factor"].get<double>(),
      scaling["high_freq_factor"].get<double>(),
      scaling["original_max_position_embeddings"].get<int64_t>());
}

// The rotary base (`default_theta` where config.json has none), and Llama 3's scaling if any, as
// the llama model's config keys.
std::string rotary_section(HfConfig& c, double default_theta) {
  const Json parameters = c.raw("rope_parameters");
  const bool v5 = parameters.is_object();
  const Json rope = v5 ? parameters : c.raw("rope_scaling");
  if (!rope.is_null() && !rope.is_object()) {
    c.unsupported("rope_scaling " + rope.dump(), "it must be an object or null");
  }
  const Json theta_given = c.raw("rope_theta");
  const double theta = theta_given.is_number() ? theta_given.get<double>()
                       : rope.is_object()      ? rope.value("rope_theta", default_theta)
                                               : default_theta;
  c.read_as("rope_theta", theta, {"rope_parameters"});
  const Json type = rope.is_object() ? rope.value("rope_type", rope.value("type", Json("default")))
                                     : Json("default");
  std::string section = fmt::format("rope_theta = {}\n", theta);
  if (type == "llama3") return section + llama3_scaling(c, rope);
  if (type != "default") {
    c.unsupported(fmt::format("{} type {}", v5 ? "rope_parameters" : "rope_scaling", shown(type)),
                  "Kiln's llama computes plain rotary frequencies and Llama 3's scaling "
                  "(\"llama3\") only");
  }
  c.read_as("rope_scaling", Json());
  return section;
}

std::string llama_section(HfConfig& c, double default_theta = 10000.0) {
  const int64_t heads = c.size("num_attention_heads"), hidden = c.size("hidden_size");
  const int64_t head_dim = c.size_or("head_dim", hidden / heads);
  c.require("hidden_act", "silu", "silu", "Kiln's llama's MLP is SwiGLU, with SiLU");
  c.require("attention_bias", false, false, "Kiln's llama's attention projections have no bias");
  c.require("mlp_bias", false, false, "Kiln's llama's MLP has no bias");
  std::string section = fmt::format(
      "type = \"llama\"\nn_layer = {}\nn_head = {}\nn_kv_head = {}\nn_embd = {}\nffn_dim = {}\n"
      "block_size = {}\nvocab_size = {}\nnorm_eps = {}\ntie_embeddings = {}\ndropout = 0.0\n",
      c.size("num_hidden_layers"), heads, c.size_or("num_key_value_heads", heads), hidden,
      c.size("intermediate_size"), c.size("max_position_embeddings"), c.size("vocab_size"),
      c.real("rms_norm_eps", 1e-6), c.flag("tie_word_embeddings", false));
  if (head_dim != hidden / heads) section += fmt::format("head_dim = {}\n", head_dim);
  return section + rotary_section(c, default_theta);
}

// A sliding window no shorter than the context is no window; Kiln's llama attends to the whole
// context.
void require_full_context(HfConfig& c, const std::string& key, bool windowed) {
  const Json window = c.raw(key);
  if (!windowed || window.is_null()) return c.read_as(key, Json());
  if (!window.is_number_integer() || window.get<int64_t>() < c.size("max_position_embeddings")) {
    c.unsupported(fmt::format("{} {}", key, shown(window)),
                  "Kiln's llama attends to the whole context, not a sliding window");
  }
  c.read_as(key, Json());
}

// Every block a mixture of experts, softmax over the top k logits (MixtralForCausalLM), with
// intermediate_size each expert's width.
std::string mixtral_section(HfConfig& c) {
  require_full_context(c, "sliding_window", true);
  std::string section = llama_section(c, 1e6);  // Mixtral's default rotary base
  return section + fmt::format("moe_experts = {}\nmoe_top_k = {}\n",
                               c.size_or("num_local_experts", 8),
                               c.size_or("num_experts_per_tok", 2));
}

// Qwen 3's qk-norm, and every decoder_sparse_step-th block a mixture of experts
// (Qwen3MoeForCausalLM), the others dense and intermediate_size wide.
std::string qwen3_moe_section(HfConfig& c) {
  require_full_context(c, "sliding_window", c.flag("use_sliding_window", false));
  const Json dense = c.raw("mlp_only_layers");
  if (!dense.is_null() && dense != Json::array()) {
    c.unsupported("mlp_only_layers " + dense.dump(),
                  "Kiln's llama keeps blocks dense by decoder_sparse_step (model.moe_every) alone");
  }
  c.read_as("mlp_only_layers", Json::array());
  // transformers 5 writes num_experts as num_local_experts.
  const int64_t experts =
      c.raw("num_experts").is_null() ? c.size_or("num_local_experts", 128) : c.size("num_experts");
  c.read_as("num_experts", experts, {"num_local_experts"});
  std::string section = llama_section(c, 10000.0);
  return section + fmt::format(
                       "qk_norm = true\nmoe_experts = {}\nmoe_top_k = {}\nmoe_ffn_dim = {}\n"
                       "moe_every = {}\nmoe_routing = \"qwen3\"\nmoe_norm_topk_prob = {}\n",
                       experts, c.size_or("num_experts_per_tok", 8),
                       c.size_or("moe_intermediate_size", 768), c.size_or("decoder_sparse_step", 1),
                       c.flag("norm_topk_prob", false));
}

const bool registered = add_hf_config_reader("llama", [](HfConfig& c) { return llama_section(c); });
const bool registered_mixtral = add_hf_config_reader("mixtral", mixtral_section);
const bool registered_qwen3_moe = add_hf_config_reader("qwen3_moe", qwen3_moe_section);

}  // namespace
}  // namespace kiln
