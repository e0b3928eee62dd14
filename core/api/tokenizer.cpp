#include "core/api/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

std::shared_ptr<Tokenizer> new_tokenizer(const std::string& name, const std::string& file) {
  const PluginSpec* spec = Catalog::global().find(TokenizerKind::name, name);
  if (!spec) throw_unknown(TokenizerKind::name, name);
  const bool reads_file = std::any_of(spec->params.begin(), spec->params.end(),
                                      [](const ParamSpec& p) { return p.name == "file"; });
  if (reads_file && file.empty()) {
    throw UserError(
        fmt::format("tokenizer '{}' reads its vocabulary from a file: give "
                    "--tokenizer-file PATH (e.g. a model's tokenizer.json)",
                    name));
  }
  if (!reads_file && !file.empty()) {
    throw UserError(
        fmt::format("--tokenizer-file {}: tokenizer '{}' has its own vocabulary and "
                    "reads no file; use --tokenizer hf for a tokenizer.json",
                    file, name));
  }
  nlohmann::json options = nlohmann::json::object();
  if (reads_file) options["file"] = file;
  return TokenizerRegistry::create(name, options);
}

std::shared_ptr<Tokenizer> load_tokenizer(const std::string& dataset_dir) {
  const std::string path = dataset_dir + "/tokenizer.json";
  std::ifstream in(path);
  if (!in) {
    throw UserError(
        fmt::format("no tokenizer at '{}': the data directory was not made by "
                    "`kiln prepare`",
                    path));
  }
  nlohmann::json saved;
  try {
    in >> saved;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(json_error_text(path, e.what()) + ": not valid JSON: re-run `kiln prepare`");
  }
  if (!saved.is_object() || !saved.contains("type") || !saved["type"].is_string()) {
    throw UserError(fmt::format("'{}' names no tokenizer type: re-run `kiln prepare`", path));
  }
  const std::string type = saved["type"];
  if (!Catalog::global().find(TokenizerKind::name, type)) throw_unknown(TokenizerKind::name, type);
  try {
    return TokenizerRegistry::create(type, saved);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: does not describe a {} tokenizer: re-run `kiln prepare`",
                                json_error_text(path, e.what()), type));
  }
}

void save_tokenizer(const Tokenizer& tokenizer, const std::string& name,
                    const std::string& dataset_dir) {
  nlohmann::json saved = tokenizer.save();
  saved["type"] = name;
  saved["vocab_size"] = tokenizer.vocab_size();
  write_file_atomic(dataset_dir + "/tokenizer.json", saved.dump(1) + "\n");
}

}  // namespace kiln
