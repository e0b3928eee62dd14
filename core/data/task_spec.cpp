#include "core/data/task_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/config/toml_text.h"
#include "core/data/chat_records.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

const std::vector<std::string>& task_keys() {
  static const std::vector<std::string> keys = {"name",
                                                "kind",
                                                "items",
                                                "target_delimiter",
                                                "fewshot_delimiter",
                                                "fewshot_file",
                                                "num_fewshot",
                                                "seed",
                                                "fewshot_sampler",
                                                "limit",
                                                "template",
                                                "until",
                                                "max_gen_toks",
                                                "temperature",
                                                "filter",
                                                "ignore_case",
                                                "ignore_punctuation",
                                                "regexes_to_ignore"};
  return keys;
}

// Keys only a generate task reads: on a choice task they would be ignored without a word.
const std::vector<std::string>& generate_keys() {
  static const std::vector<std::string> keys = {
      "until",       "max_gen_toks",       "temperature",      "filter",
      "ignore_case", "ignore_punctuation", "regexes_to_ignore"};
  return keys;
}

// Keys of task files before they followed the harness's names, and what replaced each.
const std::vector<std::pair<std::string, std::string>>& renamed_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"delimiter", "fewshot_delimiter"},
      {"few_shot", "fewshot_file"},
      {"stop", "until"},
      {"max_tokens", "max_gen_toks"},
      {"normalize", "filter, ignore_case, ignore_punctuation and regexes_to_ignore"}};
  return keys;
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

  bool flag(const std::string& key) const {
    const toml::node* node = find(key);
    if (!node) return false;
    if (!node->is_boolean()) fail(*node, fmt::format("{} must be true or false", key));
    return node->value_or(false);
  }

  // One of `allowed`, else an error naming them.
  std::string choice(const std::string& key, const std::vector<std::string>& allowed) const {
    const std::string value = text(key, allowed.front());
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      fail(*find(key),
           fmt::format("{} '{}' is not one: use {}", key, value, join(allowed, " or ")));
    }
    return value;
  }

  // Each element checked by `check`, which returns what is wrong with it ("" when nothing).
  template <class Check>
  std::vector<std::string> texts(const std::string& key, Check check) const {
    const toml::node* node = find(key);
    if (!node) return {};
    const toml::array* array = node->as_array();
    if (!array) fail(*node, fmt::format("{} must be a list of strings, e.g. [\"\\n\"]", key));
    std::vector<std::string> out;
    for (const toml::node& element : *array) {
      if (!element.is_string())
        fail(element, fmt::format("{} holds a value that is not a string", key));
      out.push_back(element.value_or(std::string()));
      const std::string wrong = check(out.back());
      if (!wrong.empty()) fail(element, fmt::format("{}: {}", key, wrong));
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
    for (const auto& [old, now] : renamed_keys()) {
      if (name != old) continue;
      reader.fail(key.source(), fmt::format("task key '{}' is now {} (lm-evaluation-harness's "
                                            "names; docs/tasks.md): rename it",
                                            name, now));
    }
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
  spec.target_delimiter = reader.text("target_delimiter", spec.target_delimiter);
  spec.fewshot_delimiter = reader.text("fewshot_delimiter", spec.fewshot_delimiter);
  spec.fewshot_file = reader.path("fewshot_file");
  spec.num_fewshot = reader.whole("num_fewshot", 0, 0);
  spec.seed = reader.whole("seed", 0, 0);
  spec.fewshot_sampler = reader.choice("fewshot_sampler", {"random", "first_n"}) == "first_n"
                             ? FewshotSampler::kFirstN
                             : FewshotSampler::kRandom;
  spec.limit = reader.whole("limit", 0, 0);
  spec.chat_template = reader.text("template", "none");
  if (spec.chat_template != "none") {
    const auto& names = chat_template_names();
    if (std::find(names.begin(), names.end(), spec.chat_template) == names.end()) {
      reader.fail(*reader.find("template"), fmt::format("no template named '{}': use none, {}",
                                                        spec.chat_template, join(names, " or ")));
    }
    // As the harness under a chat template: the answer is the assistant's turn, right after
    // the turn's opening.
    if (const toml::node* node = reader.find("target_delimiter")) {
      reader.fail(*node,
                  "target_delimiter does not apply under a template (the choice or answer "
                  "starts the assistant's turn): remove it, or set template = \"none\"");
    }
    spec.target_delimiter = "";
  }
  if (spec.kind == TaskKind::kChoice) {
    for (const auto& key : generate_keys()) {
      if (const toml::node* node = reader.find(key)) {
        reader.fail(*node, fmt::format("{} is a generate task's key: remove it, or set kind = "
                                       "\"generate\"",
                                       key));
      }
    }
    return spec;
  }
  spec.until = reader.texts("until", [](const std::string& stop) -> std::string {
    return stop.empty() ? "a stop string is empty: give each at least one character" : "";
  });
  spec.max_gen_toks = reader.whole("max_gen_toks", spec.max_gen_toks, 1);
  spec.temperature = reader.real("temperature", 0);
  spec.remove_whitespace = reader.choice("filter", {"none", "remove_whitespace"}) != "none";
  spec.ignore_case = reader.flag("ignore_case");
  spec.ignore_punctuation = reader.flag("ignore_punctuation");
  spec.regexes_to_ignore = reader.texts("regexes_to_ignore", [](const std::string& pattern) {
    try {
      std::regex compiled(pattern);
      return std::string();
    } catch (const std::regex_error& e) {
      return fmt::format("'{}' is not a regular expression ({}): fix the pattern", pattern,
                         e.what());
    }
  });
  return spec;
}

}  // namespace kiln
