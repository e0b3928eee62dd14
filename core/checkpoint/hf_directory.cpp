#include "core/checkpoint/hf_directory.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/api/hf_config.h"
#include "core/api/tokenizer.h"
#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/weights_io.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kConfigFile = "config.json";
constexpr const char* kAdapterConfigFile = "adapter_config.json";
constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
constexpr const char* kGenerationConfigFile = "generation_config.json";

// Fields of config.json that say how a checkpoint was saved, not what model it is.
const std::set<std::string>& ignored_fields() {
  static const std::set<std::string> fields = {"torch_dtype", "dtype", "transformers_version",
                                               "_name_or_path"};
  return fields;
}

Json read_json(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(fmt::format("'{}', the {}, is a folder, not a JSON file", path, what));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read '{}', the {}", path, what));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    Json parsed = Json::parse(text.str());
    if (!parsed.is_object()) throw UserError(fmt::format("'{}' is not a JSON object", path));
    return parsed;
  } catch (const Json::exception& e) {
    throw UserError(json_error_text(path, e.what()) + " (not valid JSON)");
  }
}

// Every field of `ours` (the experiment's) that `theirs` (config.json) lacks or holds otherwise.
// Fields only config.json has (dropout rates, token ids, ...) do not describe the weights.
std::vector<std::string> differences(const Json& ours, const Json& theirs) {
  std::vector<std::string> out;
  for (const auto& [field, value] : ours.items()) {
    if (ignored_fields().count(field)) continue;
    const auto it = theirs.find(field);
    if (it == theirs.end()) {
      if (!value.is_null())
        out.push_back(fmt::format("{} absent (experiment {})", field, value.dump()));
    } else if (*it != value) {
      out.push_back(fmt::format("{} {} (experiment {})", field, it->dump(), value.dump()));
    }
  }
  return out;
}

void check_config(const std::string& dir, const std::string& interchange_config) {
  const std::string path = dir + "/" + kConfigFile;
  if (interchange_config.empty()) return;  // the model's import refuses on its own
  if (!fs::exists(path)) {
    throw UserError(
        fmt::format("'{}' has no {}: give a Hugging Face model directory (config.json beside "
                    "the weights, as `kiln export RUN -o DIR` writes it) or a .safetensors file",
                    dir, kConfigFile));
  }
  // The checkpoint's own refusals first: a value no Kiln model computes is about the file, not
  // about the experiment. A model_type no plugin reads differs from the experiment's anyway.
  Json theirs = read_json(path, "model's Hugging Face config");
  const Json type = theirs.value("model_type", Json());
  if (type.is_string() && has_hf_config_reader(type.get<std::string>())) {
    theirs = read_hf_config(theirs, path).as_read;
  }
  const auto found = differences(Json::parse(interchange_config), theirs);
  if (!found.empty()) {
    throw UserError(
        fmt::format("'{}' describes another model than the experiment's: {}; set the "
                    "model section to the checkpoint's sizes",
                    path, fmt::join(found, ", ")));
  }
}

// The weight files of a directory, each with the tensors it must hold (empty: all of them).
std::map<std::string, std::set<std::string>> directory_files(const std::string& dir) {
  if (fs::exists(dir + "/" + kWeightsFile)) return {{dir + "/" + kWeightsFile, {}}};
  const std::string index_path = dir + "/" + kIndexFile;
  if (!fs::exists(index_path)) {
    throw UserError(
        fmt::format("'{}' holds neither {} nor {}: point model.init_from at a Hugging "
                    "Face model directory or a .safetensors file",
                    dir, kWeightsFile, kIndexFile));
  }
  const Json index = read_json(index_path, "index of a sharded checkpoint");
  const auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object() || map->empty()) {
    throw UserError(
        fmt::format("'{}' has no weight_map naming the file of each tensor", index_path));
  }
  std::map<std::string, std::set<std::string>> files;
  for (const auto& [tensor, file] : map->items()) {
    const std::string name = file.is_string() ? file.get<std::string>() : "";
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      throw UserError(fmt::format("'{}' places tensor '{}' in {}, which is not a file name in {}",
                                  index_path, tensor, file.dump(), dir));
    }
    files[dir + "/" + name].insert(tensor);
  }
  return files;
}

// `path`'s weight files, each with the tensors it must hold (empty: all of them).
std::map<std::string, std::set<std::string>> weight_files(const std::string& path) {
  if (fs::is_directory(path)) return directory_files(path);
  if (!fs::exists(path)) {
    throw UserError(
        fmt::format("no such file or directory '{}': give a .safetensors file or a "
                    "Hugging Face model directory",
                    path));
  }
  return {{path, {}}};
}

}  // namespace

// The weights in shards of at most `max_bytes` each (0: one shard), in order.
std::vector<std::vector<std::pair<std::string, at::Tensor>>> shards_of(
    const std::vector<std::pair<std::string, at::Tensor>>& weights, int64_t max_bytes) {
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> shards(1);
  int64_t bytes = 0;
  for (const auto& weight : weights) {
    const int64_t size = weight.second.numel() * 4;  // written in fp32
    if (max_bytes > 0 && bytes > 0 && bytes + size > max_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(weight);
    bytes += size;
  }
  return shards;
}

// DIR/model.safetensors, or the shards and their index (write_hf_directory).
void write_weight_files(const std::string& dir,
                        const std::vector<std::pair<std::string, at::Tensor>>& weights,
                        const std::map<std::string, std::string>& metadata,
                        int64_t max_shard_bytes) {
  const auto shards = shards_of(weights, max_shard_bytes);
  if (shards.size() == 1) {
    write_weights(dir + "/" + kWeightsFile, weights, metadata);
    return;
  }
  Json weight_map = Json::object();
  int64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_weights(dir + "/" + file, shards[i], metadata);
    for (const auto& [name, tensor] : shards[i]) {
      weight_map[name] = file;
      total += tensor.numel() * 4;
    }
  }
  write_file_atomic(
      dir + "/" + kIndexFile,
      Json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");
}

bool is_model_directory_file(const std::string& name) {
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return name == kWeightsFile || name == kIndexFile || name == kConfigFile ||
         name == kGenerationConfigFile || name == kAdapterConfigFile ||
         name == kAdapterWeightsFile || std::regex_match(name, shard);
}

bool holds_kiln_export(const std::string& dir) {
  std::error_code ec;
  const fs::path adapter = fs::path(dir) / kAdapterWeightsFile;
  if (fs::exists(adapter, ec)) {
    try {
      return SafetensorsFile(adapter.string()).metadata().count(kExportRunKey) > 0;
    } catch (const UserError&) {
      return false;
    }
  }
  if (!fs::exists(fs::path(dir) / kConfigFile, ec)) return false;
  try {
    for (const auto& entry : weight_files(dir)) {
      if (!SafetensorsFile(entry.first).metadata().count(kExportRunKey)) return false;
    }
    return true;
  } catch (const UserError&) {
    return false;  // damaged or foreign: not one of Kiln's
  }
}

void write_hf_directory(const std::string& dir,
                        const std::vector<std::pair<std::string, at::Tensor>>& weights,
                        const std::string& config, const TokenizerFiles& tokenizer,
                        const std::map<std::string, std::string>& metadata,
                        int64_t max_shard_bytes) {
  const SpecialTokenIds& special = tokenizer.special;
  auto id = [](const std::optional<int64_t>& token) { return token ? Json(*token) : Json(); };
  const Json ids = {{"bos_token_id", id(special.bos)},
                    {"eos_token_id", id(special.eos)},
                    {"pad_token_id", id(special.pad)}};
  Json described = Json::parse(config);
  described["torch_dtype"] = "float32";
  described.update(ids);
  ensure_parent_dir(dir + "/" + kConfigFile);
  write_weight_files(dir, weights, metadata, max_shard_bytes);
  write_file_atomic(dir + "/" + kConfigFile, described.dump(2) + "\n");
  write_file_atomic(dir + "/" + kGenerationConfigFile, ids.dump(2) + "\n");
  if (!tokenizer.tokenizer_json.empty())
    write_file_atomic(dir + "/tokenizer.json", tokenizer.tokenizer_json);
}

TokenizerFiles tokenizer_files_of(const Tokenizer& tokenizer) {
  TokenizerFiles out;
  if (const std::optional<uint32_t> end = tokenizer.end_of_text()) out.special = {*end, *end, *end};
  const Json file = tokenizer.hugging_face_file();
  if (!file.is_null()) out.tokenizer_json = file.dump() + "\n";
  return out;
}

std::map<std::string, at::Tensor> read_model_weights(const std::string& path,
                                                     const std::string& interchange_config) {
  if (fs::is_directory(path)) check_config(path, interchange_config);
  std::map<std::string, at::Tensor> all;
  for (const auto& [file, expected] : weight_files(path)) {
    auto weights = read_weights(file);
    for (const auto& tensor : expected) {
      if (!weights.count(tensor)) {
        throw UserError(
            fmt::format("the index places tensor '{}' in '{}', which does not hold "
                        "it",
                        tensor, file));
      }
    }
    for (auto& [name, tensor] : weights) {
      if (!expected.empty() && !expected.count(name)) continue;  // the index's word is final
      // A NaN or an infinity would train on as NaN losses from step 1: named here.
      if (tensor.is_floating_point() && !tensor.isfinite().all().item<bool>()) {
        const int64_t bad = tensor.numel() - tensor.isfinite().sum().item<int64_t>();
        throw UserError(fmt::format(
            "tensor '{}' in '{}' holds {} value(s) that are NaN or infinite: these weights are "
            "damaged; export them again from a run or a checkpoint that trained without diverging",
            name, file, bad));
      }
      if (!all.emplace(name, std::move(tensor)).second) {
        throw UserError(fmt::format("tensor '{}' is in more than one file of '{}'", name, path));
      }
    }
  }
  return all;
}

void check_model_weights(const std::string& path) {
  for (const auto& entry : weight_files(path))
    SafetensorsFile header(entry.first);
}

void write_peft_directory(const std::string& dir,
                          const std::vector<std::pair<std::string, at::Tensor>>& weights,
                          const std::string& config,
                          const std::map<std::string, std::string>& metadata) {
  fs::create_directories(dir);
  write_weights(dir + "/" + kAdapterWeightsFile, weights, metadata);
  write_file_atomic(dir + "/" + kAdapterConfigFile, config);
}

}  // namespace kiln
