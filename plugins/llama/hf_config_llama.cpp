// Hugging Face model_type "llama" (LlamaForCausalLM's config.json) read as Kiln's model "llama"
// (core/api/hf_config.h). transformers' defaults stand for absent fields; what changes the
// logits and llama does not compute is refused. The rotary base and scaling come in two
// spellings: transformers 4's rope_theta beside rope_scaling (whose type was "type" before
// 4.43 and "rope_type" since), and transformers 5's one rope_parameters object.
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

// The rotary base, and Llama 3's scaling if any, as the llama model's config keys.
std::string rotary_section(HfConfig& c) {
  const Json parameters = c.raw("rope_parameters");
  const bool v5 = parameters.is_object();
  const Json rope = v5 ? parameters : c.raw("rope_scaling");
  if (!rope.is_null() && !rope.is_object()) {
    c.unsupported("rope_scaling " + rope.dump(), "it must be an object or null");
  }
  const Json theta_given = c.raw("rope_theta");
  const double theta = theta_given.is_number() ? theta_given.get<double>()
                       : rope.is_object()      ? rope.value("rope_theta", 10000.0)
                                               : 10000.0;
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

std::string llama_section(HfConfig& c) {
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
  return section + rotary_section(c);
}

const bool registered = add_hf_config_reader("llama", llama_section);

}  // namespace
}  // namespace kiln
