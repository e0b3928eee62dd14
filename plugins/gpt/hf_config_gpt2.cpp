// Hugging Face model_type "gpt2" (GPT2LMHeadModel's config.json) read as Kiln's model "gpt"
// (core/api/hf_config.h). transformers' defaults stand for absent fields; what changes the
// logits and gpt does not compute is refused.
#include <fmt/format.h>

#include "core/api/hf_config.h"

namespace kiln {
namespace {

std::string gpt_section(HfConfig& c) {
  const int64_t n_embd = c.size("n_embd");
  // gelu_new and gelu_pytorch_tanh are the same tanh approximation, the one gpt computes.
  const std::string activation = c.text("activation_function", "gelu_new");
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh") {
    c.unsupported("activation_function " + shown(activation),
                  "Kiln's gpt computes the tanh-approximated GELU (gelu_new, gelu_pytorch_tanh) "
                  "only");
  }
  if (c.size_or("n_inner", 4 * n_embd) != 4 * n_embd) {
    c.unsupported(fmt::format("n_inner {}", c.raw("n_inner").dump()),
                  fmt::format("Kiln's gpt's MLP is 4 x n_embd = {} wide", 4 * n_embd));
  }
  c.require("tie_word_embeddings", true, true,
            "Kiln's gpt's output head is the token embedding; its lm_head.weight would be unread");
  c.require("scale_attn_weights", true, true,
            "Kiln's gpt divides attention scores by the square root of the head size");
  c.require("scale_attn_by_inverse_layer_idx", false, false,
            "Kiln's gpt scales every layer's attention scores alike");
  c.require("add_cross_attention", false, false, "Kiln's gpt is a decoder without cross-attention");
  // reorder_and_upcast_attn only changes the order of float16 operations; Kiln reads a
  // checkpoint in float32.
  return fmt::format(
      "type = \"gpt\"\nn_layer = {}\nn_head = {}\nn_embd = {}\nblock_size = {}\nvocab_size = "
      "{}\nnorm_eps = {}\nbias = true\ndropout = 0.0\n",
      c.size("n_layer"), c.size("n_head"), n_embd, c.size("n_positions"), c.size("vocab_size"),
      c.real("layer_norm_epsilon", 1e-5));
}

const bool registered = add_hf_config_reader("gpt2", gpt_section);

}  // namespace
}  // namespace kiln
