// A Hugging Face config.json read as a Kiln model. Each model plugin with a Hugging Face form
// registers a reader for its model_type (gpt2, llama), which turns config.json into the [model]
// section of the Kiln model that computes the same logits, and refuses, in one line naming the
// file and the field, every value that model does not compute. `kiln eval --hf` and `kiln sample
// --hf` build their model from that section; model.init_from compares the experiment's model with
// the config as read (core/checkpoint/hf_directory.h). A field no reader asks for (a dropout rate,
// a token id, torch_dtype) does not change the logits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln {

class HfConfig {
 public:
  // `config`: config.json's object; `path`: where it was read, for messages.
  HfConfig(nlohmann::json config, std::string path);

  // A size the model cannot do without: a UserError when absent, null or not a whole number.
  int64_t size(const std::string& key);
  // The field, or `hf_default` (transformers' default for the model_type) when absent or null.
  int64_t size_or(const std::string& key, int64_t hf_default);
  double real(const std::string& key, double hf_default);
  bool flag(const std::string& key, bool hf_default);
  std::string text(const std::string& key, const std::string& hf_default);
  // The field as written; null when absent.
  nlohmann::json raw(const std::string& key) const;

  // The UserError "'PATH': WHAT is not supported: WHY", e.g. what = "rope_scaling type 'linear'".
  [[noreturn]] void unsupported(const std::string& what, const std::string& why) const;
  // Refuses the field `key` ("activation_function 'relu' is not supported") unless its value
  // (default where absent) is `expected`.
  void require(const std::string& key, const nlohmann::json& hf_default,
               const nlohmann::json& expected, const std::string& why);

  // Records `value` as what the reader made of `key` (a field spelt another way: rope_parameters
  // read as rope_theta and rope_scaling), and drops the fields in `spelt_as` it came from.
  void read_as(const std::string& key, nlohmann::json value,
               const std::vector<std::string>& spelt_as = {});
  // config.json with each field a reader asked for at the value it used: transformers' default
  // where config.json has none, one spelling for fields written in several.
  const nlohmann::json& as_read() const { return as_read_; }
  const std::string& path() const { return path_; }

 private:
  const nlohmann::json* present(const std::string& key) const;

  nlohmann::json config_;
  nlohmann::json as_read_;
  std::string path_;
};

// A value as messages show it: a string in single quotes, anything else as JSON.
std::string shown(const nlohmann::json& value);

// Turns a config.json of one model_type into the lines of a [model] section ("type = ...", then
// "key = value" lines), or throws a UserError through HfConfig's checks.
using HfConfigReader = std::function<std::string(HfConfig& config)>;

// Registers the reader of `model_type`, at a plugin's static initialisation; returns true.
bool add_hf_config_reader(const std::string& model_type, HfConfigReader reader);

// Whether a plugin reads config.json of `model_type`.
bool has_hf_config_reader(const std::string& model_type);

// What config.json at `path` describes, read by its model_type's reader: the [model] section
// lines and the config as read. A UserError for a model_type no plugin reads.
struct ReadHfConfig {
  std::string model_section;
  nlohmann::json as_read;
};
ReadHfConfig read_hf_config(const nlohmann::json& config, const std::string& path);

}  // namespace kiln
