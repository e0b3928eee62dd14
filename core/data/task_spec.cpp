// Reading a task file (the format is in core/data/task_file.h): each key checked, each error at
// the key's line and column. Apart from task_file.cpp, which reads the items the file names and
// lays them out as requests.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/config/toml_text.h"
#include "core/data/chat_records.h"
#include "core/data/task_file.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

const std::vector<std::string>& task_keys() {
  static const std::vector<std::string> keys = {
      "name",  "kind",     "items", "few_shot",   "num_fewshot", "seed",     "delimiter",
      "limit", "template", "stop",  "max_tokens", "temperature", "normalize"};
  return keys;
}

const std::vector<std::string>& normalize_steps() {
  static const std::vector<std::string> steps = {"strip", "lower", "collapse", "punctuation"};
  return steps;
}

// Reads one task file's keys, each error at the key's line and column.
class SpecReader {
 public:
  SpecReader(const std::string& path, const toml::table& table) : path_(path), table_(table) {}

  [[noreturn]] void fail(const toml::source_region& region, const std::string& what) const {
    throw UserError(
        fmt::format("{}:{}:{}: {}", path_, region.begin.line, region.begin.column, what));
  }
  [[noreturn]] void fail(const toml::node& node, const std::string& what) const {
    fail(node.source(), what);
  }

  const toml::node* find(const std::string& key) const { return table_.get(key); }

  std::string text(const std::string& key, const std::string& fallback) const {
    const toml::node* node = find(key);
    if (!node) return fallback;
    if (!node->is_string()) fail(*node, fmt::format("{} must be a string", key));
    return node->value_or(std::string());
  }

  int64_t whole(const std::string& key, int64_t fallback, int64_t at_least) const {
    const toml::node* node = find(key);
    if (!node) return fallback;
    if (!node->is_integer()) fail(*node, fmt::format("{} must be a whole number", key));
    const int64_t value = node->value_or(int64_t{0});
    if (value < at_least) fail(*node, fmt::format("{} must be at least {}", key, at_least));
    return value;
  }

  double real(const std::string& key, double fallback) const {
    const toml::node* node = find(key);
    if (!node) return fallback;
    if (!node->is_number()) fail(*node, fmt::format("{} must be a number", key));
    const double value = node->value_or(0.0);
    if (!(value >= 0 && value < 1e6)) fail(*node, fmt::format("{} must be 0 or more", key));
    return value;
  }

  std::vector<std::string> texts(const std::string& key, std::vector<std::string> fallback) const {
    const toml::node* node = find(key);
    if (!node) return fallback;
    const toml::array* array = node->as_array();
    if (!array) fail(*node, fmt::format("{} must be a list of strings, e.g. [\"\\n\"]", key));
    std::vector<std::string> out;
    for (const toml::node& element : *array) {
      if (!element.is_string())
        fail(element, fmt::format("{} holds a value that is not a string", key));
      out.push_back(element.value_or(std::string()));
    }
    return out;
  }

  // A path in the task file, relative to its folder.
  std::string path(const std::string& key) const {
    const std::string given = text(key, "");
    if (given.empty()) return "";
    const std::filesystem::path p(given);
    if (p.is_absolute()) return given;
    return (std::filesystem::path(path_).parent_path() / p).lexically_normal().string();
  }

 private:
  std::string path_;
  const toml::table& table_;
};

void check_keys(const SpecReader& reader, const toml::table& table) {
  for (auto&& [key, value] : table) {
    const std::string name(key.str());
    const auto& keys = task_keys();
    if (std::find(keys.begin(), keys.end(), name) != keys.end()) continue;
    const std::string guess = nearest(name, keys);
    reader.fail(key.source(), fmt::format("unknown task key '{}': {}", name,
                                          guess.empty() ? "keys are " + join(keys, ", ")
                                                        : "did you mean '" + guess + "'?"));
  }
}

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read {} '{}': check the path", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TaskSpec read_task_spec(const std::string& given) {
  const std::string path = absolute_path(given);
  const toml::table table = parse_toml(read_text(path, "the task file"), given);
  SpecReader reader(given, table);
  check_keys(reader, table);
  TaskSpec spec;
  spec.file = path;
  spec.name = reader.text("name", std::filesystem::path(path).stem().string());
  static const std::regex word("[A-Za-z][A-Za-z0-9_]{0,63}");
  if (!std::regex_match(spec.name, word)) {
    const toml::node* node = reader.find("name");
    const std::string what = fmt::format(
        "task name '{}' must be a letter then letters, digits or _ (64 at most): it names the "
        "task's metrics, as {}.acc",
        spec.name, spec.name);
    if (node) reader.fail(*node, what);
    throw UserError(fmt::format("{}: {}: set name in the task file", given, what));
  }
  const std::string kind = reader.text("kind", "");
  if (kind == "generate") {
    spec.kind = TaskKind::kGenerate;
  } else if (kind != "choice") {
    const toml::node* node = reader.find("kind");
    if (!node) throw UserError(given + ": no kind: set kind = \"choice\" or \"generate\"");
    reader.fail(*node, fmt::format("kind '{}' is not a task kind: use choice or generate", kind));
  }
  spec.items = reader.path("items");
  if (spec.items.empty()) {
    throw UserError(given + ": no items: set items = \"FILE.jsonl\" (relative to the task file)");
  }
  spec.few_shot = reader.path("few_shot");
  spec.num_fewshot = reader.whole("num_fewshot", 0, 0);
  spec.seed = reader.whole("seed", 0, 0);
  spec.limit = reader.whole("limit", 0, 0);
  spec.delimiter = reader.text("delimiter", spec.delimiter);
  spec.chat_template = reader.text("template", "none");
  if (spec.chat_template != "none") {
    const auto& names = chat_template_names();
    if (std::find(names.begin(), names.end(), spec.chat_template) == names.end()) {
      reader.fail(*reader.find("template"), fmt::format("no template named '{}': use none, {}",
                                                        spec.chat_template, join(names, " or ")));
    }
  }
  spec.stop = reader.texts("stop", spec.stop);
  spec.max_tokens = reader.whole("max_tokens", spec.max_tokens, 1);
  spec.temperature = reader.real("temperature", 0);
  spec.normalize = reader.texts("normalize", spec.normalize);
  for (const auto& step : spec.normalize) {
    const auto& steps = normalize_steps();
    if (std::find(steps.begin(), steps.end(), step) == steps.end()) {
      reader.fail(*reader.find("normalize"),
                  fmt::format("normalize step '{}' is not one: use {}", step, join(steps, ", ")));
    }
  }
  return spec;
}

}  // namespace kiln
