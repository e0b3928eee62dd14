#include "core/data/task_file.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/data/chat_records.h"
#include "core/util/counter_hash.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

using nlohmann::json;

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
    throw BadRecord(is_valid_utf8(line) ? "not a JSON object: " + json_reason(e.what())
                                        : json_line_problem(line, 0));
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
  // One choice is always right: its accuracy would say nothing about the model.
  if (item.choices.size() < 2) {
    throw BadRecord(fmt::format("\"choices\" has {}: an item needs two or more",
                                item.choices.empty() ? "none" : "one"));
  }
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
