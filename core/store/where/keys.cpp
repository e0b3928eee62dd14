#include "core/store/where/keys.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

const std::vector<std::string>& aggregates() {
  static const std::vector<std::string> names = {"min", "max", "mean", "first", "last"};
  return names;
}

std::vector<std::string> names_of(const std::map<std::string, std::string>& entries) {
  std::vector<std::string> names;
  for (const auto& entry : entries)
    names.push_back(entry.first);
  return names;
}

std::vector<std::string> metric_names(const KeySpace& keys) {
  std::vector<std::string> names = names_of(keys.metrics);
  for (const auto& name : names_of(keys.eval_splits))
    names.push_back(name);
  for (const auto& name : names_of(keys.task_metrics))
    names.push_back(name);
  for (const auto& name : names_of(keys.probe_values))
    names.push_back(name);
  for (const auto& name : names_of(keys.layer_metrics))
    names.push_back(name);
  return names;
}

bool is_metric(const std::string& name, const KeySpace& keys) {
  return keys.metrics.count(name) || keys.eval_splits.count(name) ||
         keys.task_metrics.count(name) || keys.probe_values.count(name) ||
         keys.layer_metrics.count(name);
}

std::string lowercase(std::string word) {
  for (char& c : word)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string guess = nearest(word, candidates);
  return guess.empty() ? "" : fmt::format("did you mean '{}'? ", guess);
}

// What to write instead of a key that is neither a column nor `section.key`.
std::string unknown_key_hint(const std::string& key, const KeySpace& keys) {
  if (is_metric(key, keys)) {
    return fmt::format(
        "'{0}' is a metric: name it at a point of the run ({0}@step=100) or through an aggregate "
        "over it (max({0}))",
        key);
  }
  return fmt::format(
      "{}keys are {}, a config key such as optimizer.lr, a metric at a point such as "
      "val_loss@step=400 or an aggregate such as max(grad_norm)",
      did_you_mean(key, names_of(keys.columns)), join(names_of(keys.columns), ", "));
}

void require_metric(const WhereScanner& in, const std::string& name, size_t column,
                    const KeySpace& keys) {
  if (is_metric(name, keys)) return;
  throw UserError(fmt::format("{}: unknown metric '{}' at column {}: {}metrics are {}",
                              in.context(), name, column, did_you_mean(name, metric_names(keys)),
                              join(metric_names(keys), ", ")));
}

// The number after `@step=` (a whole number) or `@tokens=` (any), at least 0 and finite.
SqlValue parse_point(WhereScanner& in, bool tokens) {
  static const std::regex whole("[+]?[0-9]+");
  static const std::regex real("[+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  const size_t start = in.next_token();
  const std::string word = in.scan_bare("<>=!~,");
  if (tokens && std::regex_match(word, real)) {
    const double count = std::strtod(word.c_str(), nullptr);
    if (std::isfinite(count)) return count;
  }
  if (!tokens && std::regex_match(word, whole)) {
    try {
      return static_cast<int64_t>(std::stoll(word));
    } catch (const std::out_of_range&) {
      // Beyond any step: refused below.
    }
  }
  in.set_pos(start);
  in.fail(tokens ? "a token count (a number such as 1e6) after '@tokens='"
                 : "a step (a whole number such as 400) after '@step='");
}

// After `METRIC@`: `step=N` or `tokens=N`.
void parse_point_of(WhereScanner& in, WhereKey& key, const KeySpace& keys) {
  require_metric(in, key.name, key.column, keys);
  const size_t axis_at = in.pos();
  const std::string axis = in.scan_word();
  if (axis != "step" && axis != "tokens") {
    in.set_pos(axis_at);
    in.fail(fmt::format("step or tokens after '{}@' (as in {}@step=100)", key.name, key.name));
  }
  if (!in.accept("=")) in.fail(fmt::format("'=' after '@{}'", axis));
  key.kind = WhereKey::Kind::kPoint;
  key.at_tokens = axis == "tokens";
  key.at = parse_point(in, key.at_tokens);
}

// After `FUNCTION(`: `METRIC)`.
void parse_aggregate_of(WhereScanner& in, WhereKey& key, const std::string& function,
                        const KeySpace& keys) {
  key.kind = WhereKey::Kind::kAggregate;
  key.function = lowercase(function);
  const auto& known = aggregates();
  if (std::find(known.begin(), known.end(), key.function) == known.end()) {
    throw UserError(fmt::format("{}: unknown aggregate '{}' at column {}: {}aggregates are {}",
                                in.context(), function, key.column,
                                did_you_mean(key.function, known), join(known, ", ")));
  }
  const size_t metric_at = in.next_token();
  if (!is_word_start(in.peek())) {
    in.fail(fmt::format("a metric (such as loss or grad_norm) after '{}('", function));
  }
  key.name = in.scan_word();
  if (in.peek() == '.') {  // a task's metric: TASK.METRIC
    in.set_pos(in.pos() + 1);
    if (!is_word_start(in.peek())) in.fail("a task metric after the '.' (as in max(cloze.acc))");
    key.name += '.';
    key.name += in.scan_word();
  }
  require_metric(in, key.name, metric_at + 1, keys);
  if (!in.accept(")")) in.fail(fmt::format("')' to close '{}('", function));
}

}  // namespace

WhereKey parse_key(WhereScanner& in, const KeySpace& keys) {
  WhereKey key;
  key.column = in.next_token() + 1;
  if (!is_word_start(in.peek())) {
    in.fail("a key (a column such as best_loss, or a config key such as optimizer.lr)");
  }
  key.name = in.scan_word();
  if (in.peek() == '.') {
    in.set_pos(in.pos() + 1);
    if (!is_word_start(in.peek())) in.fail("a key name after the '.'");
    key.name += '.';
    key.name += in.scan_word();
    if (in.peek() == '@') {  // a task's metric at a point: TASK.METRIC@step=N
      in.set_pos(in.pos() + 1);
      parse_point_of(in, key, keys);
      return key;
    }
    key.kind = WhereKey::Kind::kConfig;
    return key;
  }
  if (in.peek() == '@') {
    in.set_pos(in.pos() + 1);
    parse_point_of(in, key, keys);
    return key;
  }
  const size_t after = in.pos();
  if (in.accept("(")) {
    const std::string function = key.name;
    parse_aggregate_of(in, key, function, keys);
    return key;
  }
  in.set_pos(after);
  if (!keys.columns.count(key.name)) {
    throw UserError(fmt::format("{}: unknown key '{}' at column {}: {}{}", in.context(), key.name,
                                key.column, unknown_key_hint(key.name, keys),
                                in.sorting() ? "; prefix '-' to sort descending" : ""));
  }
  return key;
}

}  // namespace kiln
