#include "plugins/lora/peft_folder.h"

#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/hf_directory.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

bool peft_targets(const std::string& name, const std::vector<std::string>& targets) {
  for (const auto& t : targets) {
    if (t == "all-linear" || name == t ||
        (name.size() > t.size() &&
         name.compare(name.size() - t.size() - 1, t.size() + 1, "." + t) == 0)) {
      return true;
    }
  }
  return false;
}

std::string peft_config_json(const LoraSettings& lora, const std::string& base_model,
                             const std::vector<std::string>& target_modules, bool fan_in_fan_out) {
  const nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model},
      {"r", lora.rank},
      {"lora_alpha", lora.alpha},
      {"lora_dropout", lora.dropout},
      {"target_modules", target_modules},
      {"fan_in_fan_out", fan_in_fan_out},
      {"bias", "none"},
      {"use_rslora", lora.rslora},
      {"init_lora_weights",
       lora.init == "gaussian" ? nlohmann::json("gaussian") : nlohmann::json(true)},
      {"use_dora", false},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"inference_mode", true},
      {"revision", nullptr}};
  return config.dump(2) + "\n";
}

std::string peft_tensor_name(const std::string& module, const std::string& part) {
  return "base_model.model." + module + "." + part + ".weight";
}

PeftAdapter read_peft_adapter(const std::string& dir, const LoraSettings& lora) {
  const std::string at = fmt::format("adapter.init_from = \"{}\"", dir);
  std::ifstream in(dir + "/adapter_config.json");
  nlohmann::json config;
  try {
    if (!in) throw std::runtime_error("no such file");
    config = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw UserError(
        fmt::format("{}: its adapter_config.json cannot be read as JSON ({}): give "
                    "a folder PEFT's save_pretrained or kiln export wrote",
                    at, json_reason(e.what())));
  }
  const auto field = [&](const char* name) {
    return config.contains(name) ? config.at(name).dump() : std::string("absent");
  };
  const bool same = config.value("peft_type", "") == "LORA" && config.value("r", -1) == lora.rank &&
                    config.value("lora_alpha", -1.0) == lora.alpha &&
                    config.value("use_rslora", false) == lora.rslora;
  const bool plain = config.value("rank_pattern", nlohmann::json::object()).empty() &&
                     config.value("alpha_pattern", nlohmann::json::object()).empty() &&
                     !config.value("use_dora", false);
  if (!plain) {
    throw UserError(fmt::format(
        "{}: its adapter_config.json has a rank_pattern, an alpha_pattern or use_dora, which "
        "give layers their own rank or scale: give a plain LoRA adapter",
        at));
  }
  // A bias PEFT trains beside A and B (bias "all" or "lora_only", lora_bias): Kiln's LoRA has
  // none, and would otherwise find the bias tensors picked by no layer and ask to widen the
  // targets.
  if (config.value("bias", std::string("none")) != "none" || config.value("lora_bias", false)) {
    throw UserError(fmt::format(
        "{}: its adapter_config.json has bias {} and lora_bias {}, biases trained with the "
        "adapter, which Kiln's LoRA does not have: give an adapter saved with bias \"none\" "
        "and lora_bias false",
        at, field("bias"), field("lora_bias")));
  }
  if (!same) {
    throw UserError(fmt::format(
        "{}: its adapter_config.json has peft_type {}, r {}, lora_alpha {}, use_rslora {}, and "
        "this adapter is LORA with rank {}, alpha {}, rslora {}: set adapter.rank, "
        "adapter.alpha and adapter.rslora to the folder's",
        at, field("peft_type"), field("r"), field("lora_alpha"), field("use_rslora"), lora.rank,
        lora.alpha, lora.rslora));
  }
  return {read_model_weights(dir + "/adapter_model.safetensors", ""), field("target_modules")};
}

}  // namespace kiln
