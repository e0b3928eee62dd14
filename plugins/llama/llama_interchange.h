// A llama's Hugging Face forms (docs/huggingface.md, docs/moe.md): LlamaForCausalLM for a dense
// llama; for a mixture of experts MixtralForCausalLM, or, with qk_norm, Qwen3MoeForCausalLM. The
// config.json each is written with, and the checkpoint's tensors: each Kiln parameter is one
// tensor under its name with "model." in front, but for the stacked experts, which a checkpoint
// holds one matrix per expert, as the Hub's checkpoints and transformers' save_pretrained hold
// them (Mixtral: block_sparse_moe.experts.E.w1/w3/w2 and block_sparse_moe.gate; Qwen3-MoE:
// mlp.experts.E.gate_proj/up_proj/down_proj and mlp.gate).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "plugins/llama/llama_block.h"

namespace kiln {

enum class HfLlamaForm { kLlama, kMixtral, kQwen3Moe };

// The form that computes what `o` computes; a UserError naming what none of them has (shared
// experts, a dense block among Mixtral's, a capacity that drops tokens, a routing bias, ...) and
// how to train a llama that has one.
HfLlamaForm hf_form_of(const LlamaOptions& o);

// config.json of that form, as a JSON object's text.
std::string hf_config_of(const LlamaOptions& o);

// The parameters (the model's named_parameters()) as the checkpoint's tensors, in their order.
std::vector<std::pair<std::string, at::Tensor>> hf_tensors_of(
    const LlamaOptions& o, const torch::OrderedDict<std::string, at::Tensor>& parameters);

// Copies a checkpoint's tensors into the parameters, once each tensor has been found in its
// shape: otherwise a UserError listing every missing, misshapen and unexpected one.
void load_hf_tensors(const LlamaOptions& o, const std::map<std::string, at::Tensor>& given,
                     torch::OrderedDict<std::string, at::Tensor>& parameters);

}  // namespace kiln
