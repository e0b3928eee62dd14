#include "core/data/task_file.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <utf8proc.h>
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

std::vector<std::string> field_texts(const json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end()) throw BadRecord(fmt::format("the item has no \"{}\"", key));
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
    return item;
  }
  item.context = field_text(record, "context");
  item.choices = field_texts(record, "choices");
  // One choice is always right: its accuracy would say nothing about the model.
  if (item.choices.size() < 2) {
    throw BadRecord(fmt::format("\"choices\" has {}: an item needs two or more",
                                item.choices.empty() ? "none" : "one"));
  }
  for (size_t i = 0; i < item.choices.size(); ++i) {
    if (item.choices[i].empty()) {
      throw BadRecord("a choice is empty: a choice needs at least one character");
    }
    // Two equal choices score alike and a tie goes to the first: the item would measure the order.
    const auto first = std::find(item.choices.begin(), item.choices.end(), item.choices[i]);
    if (first != item.choices.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw BadRecord(fmt::format("choices {} and {} are both {}: the choices must differ",
                                  first - item.choices.begin(), i, json(item.choices[i]).dump()));
    }
  }
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

// The harness warns when a choice or answer starts with whitespace and target_delimiter ends
// with it: the continuation would hold both, a text the model never saw in training.
void check_no_double_space(const TaskSpec& spec, const TaskItem& item) {
  if (python_rstrip(spec.target_delimiter) == spec.target_delimiter) return;
  const std::vector<std::string> targets =
      item.choices.empty() ? std::vector<std::string>{item.answer} : item.choices;
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::u32string points = utf8_code_points(targets[i]);
    if (points.empty() || !is_python_space(points.front())) continue;
    throw BadRecord(fmt::format(
        "{} {} starts with whitespace, and target_delimiter {} ends with it: write it as {} (the "
        "delimiter comes before it), or set target_delimiter = \"\" in the task file",
        item.choices.empty() ? "the answer" : fmt::format("choice {}", i), json(targets[i]).dump(),
        json(spec.target_delimiter).dump(), json(python_strip(targets[i])).dump()));
  }
}

std::vector<TaskItem> read_items(const TaskSpec& spec, const std::string& path, int64_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read the task items '{}': check the path", path));
  std::vector<TaskItem> items;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      TaskItem item = parse_item(line, spec.kind);
      check_no_double_space(spec, item);
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

bool same_item(const TaskItem& a, const TaskItem& b) {
  return a.context == b.context && a.choices == b.choices && a.label == b.label &&
         a.answer == b.answer;
}

// The harness's first_n sampler: the pool's first num_fewshot items, the pool being the task's
// own items less every one equal to the item asked (it compares documents, not places).
std::vector<const TaskItem*> first_shots(const std::vector<TaskItem>& pool, int64_t count,
                                         const TaskItem* asked) {
  std::vector<const TaskItem*> shots;
  for (size_t i = 0; i < pool.size() && static_cast<int64_t>(shots.size()) < count; ++i)
    if (!asked || !same_item(pool[i], *asked)) shots.push_back(&pool[i]);
  return shots;
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
    text += shot->context + spec.target_delimiter + answer_of(*shot) + spec.fewshot_delimiter;
  return text + item.context;
}

}  // namespace

Task load_task(const TaskSpec& spec) {
  Task task{spec, {}};
  // Without a file of its own the pool is the task's items, all of them whatever `limit` says
  // (the harness's pool is the whole split).
  const bool same = spec.fewshot_file.empty();
  const bool whole_file = same && spec.num_fewshot > 0;
  std::vector<TaskItem> items = read_items(spec, spec.items, whole_file ? 0 : spec.limit);
  const std::vector<TaskItem> pool =
      whole_file ? items
                 : (!same && spec.num_fewshot > 0 ? read_items(spec, spec.fewshot_file, 0)
                                                  : std::vector<TaskItem>{});
  if (spec.limit > 0 && spec.limit < static_cast<int64_t>(items.size()))
    items.resize(static_cast<size_t>(spec.limit));
  const int64_t available = static_cast<int64_t>(pool.size()) - (same ? 1 : 0);
  if (spec.num_fewshot > 0 && spec.num_fewshot > available) {
    throw UserError(fmt::format(
        "{}: num_fewshot = {} but the pool ({}) has {} item{} to draw from: lower num_fewshot, or "
        "give a larger fewshot_file",
        spec.file, spec.num_fewshot,
        same ? spec.items + ", less the item asked" : spec.fewshot_file, available,
        available == 1 ? "" : "s"));
  }
  // The harness stops at the fewshot delimiter (its generation_kwargs' default `until`).
  const std::vector<std::string> until =
      spec.until.empty() ? std::vector<std::string>{spec.fewshot_delimiter} : spec.until;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto index = static_cast<int64_t>(i);
    const TaskItem& item = items[i];
    std::vector<const TaskItem*> shots;
    if (spec.fewshot_sampler == FewshotSampler::kFirstN) {
      shots = first_shots(pool, spec.num_fewshot, same ? &item : nullptr);
    } else {
      const uint64_t seed =
          splitmix64(static_cast<uint64_t>(spec.seed) ^ splitmix64(static_cast<uint64_t>(index)));
      for (int64_t k :
           draw(static_cast<int64_t>(pool.size()), spec.num_fewshot, same ? index : -1, seed)) {
        shots.push_back(&pool[static_cast<size_t>(k)]);
      }
    }
    TaskRequest request{index,        item.line, lay_out(spec, shots, item),
                        item.choices, {},        item.label,
                        item.answer,  until};
    for (const std::string& choice : item.choices)
      request.continuations.push_back(spec.target_delimiter + choice);
    task.requests.push_back(std::move(request));
  }
  return task;
}

namespace {

// Python's str.lower() by code point, by utf8proc's Unicode tables (simple case mapping: the
// few characters whose lower case is two code points, as U+0130, map to one here).
std::string lower_case(const std::string& text) {
  std::u32string points = utf8_code_points(text);
  for (char32_t& cp : points)
    cp = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
  return utf8_from_code_points(points);
}

// Python's string.punctuation: the ASCII punctuation characters, as the C locale's ispunct.
std::string without_punctuation(std::string text) {
  text.erase(
      std::remove_if(text.begin(), text.end(),
                     [](char c) { return c > 0 && std::ispunct(static_cast<unsigned char>(c)); }),
      text.end());
  return text;
}

}  // namespace

bool exact_match(const TaskSpec& spec, const std::string& generated, const std::string& answer) {
  std::string prediction = generated, gold = answer;
  if (spec.remove_whitespace) prediction = python_strip(prediction);
  for (const std::string& pattern : spec.regexes_to_ignore) {
    const std::regex ignored(pattern);
    prediction = std::regex_replace(prediction, ignored, "");
    gold = std::regex_replace(gold, ignored, "");
  }
  if (spec.ignore_case) {
    prediction = lower_case(prediction);
    gold = lower_case(gold);
  }
  if (spec.ignore_punctuation) {
    prediction = without_punctuation(prediction);
    gold = without_punctuation(gold);
  }
  return prediction == gold;
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
