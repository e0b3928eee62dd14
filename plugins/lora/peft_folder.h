// Hugging Face PEFT's side of the LoRA adapter (plugins/lora/adapter_lora.cpp): how PEFT matches
// target_modules, the adapter_config.json it writes for a LoRA adapter, its tensors' names, and a
// folder its save_pretrained (or `kiln export`) wrote, read back with its config checked against
// the adapter's settings. The fields and names are PEFT's LoraConfig and save_pretrained's.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace kiln {

// What PEFT's adapter_config.json records of a LoRA adapter besides its layers.
struct LoraSettings {
  int64_t rank = 8;     // r
  double alpha = 16;    // lora_alpha
  double dropout = 0;   // lora_dropout
  bool rslora = false;  // use_rslora
  std::string init;     // init_lora_weights: "kaiming" (PEFT's true) or "gaussian"

  // The factor of the update: alpha / rank, or alpha / sqrt(rank) with rslora.
  double scale() const {
    return alpha / (rslora ? std::sqrt(static_cast<double>(rank)) : static_cast<double>(rank));
  }
};

// Whether a module named `name` is one of `targets` as PEFT matches target_modules: named so, or
// ending in "." + a target; "all-linear" matches every one.
bool peft_targets(const std::string& name, const std::vector<std::string>& targets);

// adapter_config.json for a LoRA adapter of these settings on `target_modules`; fan_in_fan_out
// when the adapted weights are stored transposed (gpt-2's Conv1D).
std::string peft_config_json(const LoraSettings& lora, const std::string& base_model,
                             const std::vector<std::string>& target_modules, bool fan_in_fan_out);

// "base_model.model.<module>.<part>.weight": the name PEFT's files give a module's lora_A or
// lora_B.
std::string peft_tensor_name(const std::string& module, const std::string& part);

// A PEFT adapter folder's tensors by name, and its target_modules as adapter_config.json gives
// them (for messages). A UserError naming adapter.init_from when its config is not a plain LoRA
// adapter (no per-layer rank or alpha, no DoRA, no trained biases) of these settings.
struct PeftAdapter {
  std::map<std::string, at::Tensor> tensors;
  std::string target_modules;
};
PeftAdapter read_peft_adapter(const std::string& dir, const LoraSettings& lora);

}  // namespace kiln
