#include "core/data/task_file.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "core/config/toml_text.h"
#include "core/data/chat_records.h"
#include "core/util/counter_hash.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

using nlohmann::json;

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

std::string field_text(const json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end()) throw BadRecord(fmt::format("the item has no \"{}\"", key));
  if (!it->is_string()) throw BadRecord(fmt::format("\"{}\" is not a string", key));
  return it->get<std::string>();
}

std::vector<std::string> field_texts(const json& record, const char* key, bool required) {
  auto it = record.find(key);
  if (it == record.end()) {
    if (required) throw BadRecord(fmt::format("the item has no \"{}\"", key));
    return {};
  }
  if (!it->is_array()) throw BadRecord(fmt::format("\"{}\" is not a list of strings", key));
  std::vector<std::string> out;
  for (const json& element : *it) {
    if (!element.is_string()) throw BadRecord(fmt::format("\"{}\" holds a non-string", key));
    out.push_back(element.get<std::string>());
  }
  return out;
}

TaskItem parse_item(const std::string& line, TaskKind kind) {
  json record;
  try {
    record = json::parse(line);
  } catch (const json::exception& e) {  // syntax, or a number out of double's range (1e999)
    throw BadRecord("not a JSON object: " + json_reason(e.what()));
  }
  if (!record.is_object()) throw BadRecord("not a JSON object");
  TaskItem item;
  if (kind == TaskKind::kGenerate) {
    item.context = field_text(record, "prompt");
    item.answer = field_text(record, "answer");
    item.stop = field_texts(record, "stop", false);
    return item;
  }
  item.context = field_text(record, "context");
  item.choices = field_texts(record, "choices", true);
  if (item.choices.empty()) throw BadRecord("\"choices\" is empty: an item needs two or more");
  for (const auto& choice : item.choices)
    if (choice.empty()) throw BadRecord("a choice is empty: a choice needs at least one character");
  auto label = record.find("label");
  if (label == record.end()) throw BadRecord("the item has no \"label\"");
  if (!label->is_number_integer()) throw BadRecord("\"label\" is not a whole number");
  item.label = label->get<int64_t>();
  const auto n = static_cast<int64_t>(item.choices.size());
  if (item.label < 0 || item.label >= n) {
    throw BadRecord(fmt::format("\"label\" is {}, and the item has {} choices: use 0 to {}",
                                item.label, n, n - 1));
  }
  return item;
}

std::vector<TaskItem> read_items(const std::string& path, TaskKind kind, int64_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read the task items '{}': check the path", path));
  std::vector<TaskItem> items;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      TaskItem item = parse_item(line, kind);
      item.line = number;
      items.push_back(std::move(item));
    } catch (const BadRecord& e) {
      throw UserError(fmt::format("{}:{}: {}: fix the item", path, number, e.what()));
    }
    if (limit > 0 && static_cast<int64_t>(items.size()) == limit) break;
  }
  if (items.empty()) throw UserError(fmt::format("{}: no item in the file: add items", path));
  return items;
}

// `count` distinct indices of [0, pool), without `skip` (-1: none), by partial Fisher-Yates with
// splitmix64 steps from `seed`: an item's examples are a pure function of (seed, item), whatever
// the batch or shard.
std::vector<int64_t> draw(int64_t pool, int64_t count, int64_t skip, uint64_t seed) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < pool; ++i)
    if (i != skip) order.push_back(i);
  uint64_t state = seed;
  for (int64_t i = 0; i < count; ++i) {
    state = splitmix64(state);
    const auto left = static_cast<uint64_t>(order.size()) - static_cast<uint64_t>(i);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(i + state % left)]);
  }
  order.resize(static_cast<size_t>(count));
  return order;
}

std::string answer_of(const TaskItem& item) {
  return item.choices.empty() ? item.answer : item.choices[static_cast<size_t>(item.label)];
}

// The text asked: examples then the item, as the template lays them out.
std::string lay_out(const TaskSpec& spec, const std::vector<const TaskItem*>& shots,
                    const TaskItem& item) {
  if (spec.chat_template != "none") {
    const ChatTemplate chat = chat_template(spec.chat_template);
    std::string text;
    for (const TaskItem* shot : shots) {
      text += chat.user_prefix + shot->context + chat.user_suffix + chat.assistant_prefix +
              answer_of(*shot) + chat.assistant_suffix;
    }
    return text + chat.user_prefix + item.context + chat.user_suffix + chat.assistant_prefix;
  }
  std::string text;
  for (const TaskItem* shot : shots)
    text += shot->context + answer_of(*shot) + spec.delimiter;
  return text + item.context;
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

Task load_task(const TaskSpec& spec) {
  Task task{spec, {}};
  const std::vector<TaskItem> items = read_items(spec.items, spec.kind, spec.limit);
  std::vector<TaskItem> separate_pool;
  if (!spec.few_shot.empty() && spec.num_fewshot > 0) {
    separate_pool = read_items(spec.few_shot, spec.kind, 0);
  }
  // Without a pool of its own an item's examples are the task's other items.
  const std::vector<TaskItem>& pool = spec.few_shot.empty() ? items : separate_pool;
  const bool same = spec.few_shot.empty();
  const int64_t available = static_cast<int64_t>(pool.size()) - (same ? 1 : 0);
  if (spec.num_fewshot > available) {
    throw UserError(fmt::format(
        "{}: num_fewshot = {} but the pool ({}) has {} item{} to draw from: lower num_fewshot, or "
        "give a larger few_shot file",
        spec.file, spec.num_fewshot, same ? spec.items + ", less the item asked" : spec.few_shot,
        available, available == 1 ? "" : "s"));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const auto index = static_cast<int64_t>(i);
    const uint64_t seed =
        splitmix64(static_cast<uint64_t>(spec.seed) ^ splitmix64(static_cast<uint64_t>(index)));
    std::vector<const TaskItem*> shots;
    for (int64_t k :
         draw(static_cast<int64_t>(pool.size()), spec.num_fewshot, same ? index : -1, seed)) {
      shots.push_back(&pool[static_cast<size_t>(k)]);
    }
    const TaskItem& item = items[i];
    TaskRequest request{index,
                        item.line,
                        lay_out(spec, shots, item),
                        item.choices,
                        item.label,
                        item.answer,
                        item.stop.empty() ? spec.stop : item.stop};
    task.requests.push_back(std::move(request));
  }
  return task;
}

std::string normalize_answer(const std::string& text, const std::vector<std::string>& steps) {
  std::string out = text;
  for (const auto& step : steps) {
    if (step == "lower") {
      for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (step == "punctuation") {
      out.erase(std::remove_if(out.begin(), out.end(),
                               [](char c) { return std::ispunct(static_cast<unsigned char>(c)); }),
                out.end());
    } else if (step == "collapse") {
      std::string collapsed;
      for (char c : out) {
        const bool space = std::isspace(static_cast<unsigned char>(c));
        if (space && !collapsed.empty() && collapsed.back() == ' ') continue;
        collapsed += space ? ' ' : c;
      }
      out = collapsed;
    }
    if (step == "strip" || step == "collapse") {
      const size_t begin = out.find_first_not_of(" \t\r\n");
      const size_t end = out.find_last_not_of(" \t\r\n");
      out = begin == std::string::npos ? "" : out.substr(begin, end - begin + 1);
    }
  }
  return out;
}

std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop) {
  size_t cut = text.size();
  for (const auto& s : stop) {
    if (s.empty()) continue;
    cut = std::min(cut, text.find(s));
  }
  return text.substr(0, cut);
}

}  // namespace kiln
