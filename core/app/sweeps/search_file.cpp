// Reading a sweep file's [search] and [space] tables (the format is in
// core/app/sweeps/spec_file.h).
#include "core/app/sweeps/search_file.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/app/sweeps/file_nodes.h"
#include "core/util/text.h"

namespace kiln {

namespace {

using namespace sweep_file;  // NOLINT: where, toml_text, key_path, put_by_key

const std::vector<std::string>& distribution_names() {
  static const std::vector<std::string> names = {"log_uniform", "uniform", "int_uniform", "choice"};
  return names;
}

// `[low, high]` of a numeric distribution: two numbers (integers for int_uniform), low <= high,
// and low > 0 for log_uniform.
void read_bounds(const toml::node& node, const std::string& path, SweepDistribution& out) {
  const auto* list = node.as_array();
  const bool whole = out.kind == SweepDistribution::Kind::kIntUniform;
  const auto number = [&](const toml::node& n) { return whole ? n.is_integer() : n.is_number(); };
  if (!list || list->size() != 2 || !number(*list->get(0)) || !number(*list->get(1))) {
    throw UserError(fmt::format("{}: '{}' takes [low, high], two {}", where(node.source()), path,
                                whole ? "integers" : "numbers"));
  }
  out.low = list->get(0)->value_or(0.0);
  out.high = list->get(1)->value_or(0.0);
  if (out.low > out.high) {
    throw UserError(fmt::format("{}: '{}' has low {} above high {}: write [low, high]",
                                where(node.source()), path, format_value(out.low),
                                format_value(out.high)));
  }
  if (out.kind == SweepDistribution::Kind::kLogUniform && out.low <= 0) {
    throw UserError(fmt::format(
        "{}: '{}' is log-uniform, so its bounds must be above 0 (it has {}): use uniform for a "
        "range that reaches 0",
        where(node.source()), path, format_value(out.low)));
  }
}

// One [space] key: `{ log_uniform = [a, b] }`, `{ uniform = [a, b] }`, `{ int_uniform = [a, b] }`
// or `{ choice = [...] }`.
SweepDistribution read_distribution(const toml::node& node, const std::string& path) {
  const auto* table = node.as_table();
  const std::string forms =
      "{ log_uniform = [low, high] }, { uniform = [low, high] }, { int_uniform = [low, high] } or "
      "{ choice = [...] }";
  if (!table || table->size() != 1) {
    throw UserError(
        fmt::format("{}: '{}' must be one distribution: {}", where(node.source()), path, forms));
  }
  const toml::key& name = table->cbegin()->first;
  const toml::node& value = table->cbegin()->second;
  SweepDistribution out{path, SweepDistribution::Kind::kUniform, 0, 0, {}, where(node.source())};
  const std::string kind(name.str());
  if (kind == "choice") {
    out.kind = SweepDistribution::Kind::kChoice;
    const auto* list = value.as_array();
    if (!list || list->empty()) {
      throw UserError(fmt::format("{}: '{}' choice must be a non-empty list of values",
                                  where(value.source()), path));
    }
    for (const auto& element : *list)
      out.choices.push_back(toml_text(element));
    return out;
  }
  if (kind == "log_uniform") {
    out.kind = SweepDistribution::Kind::kLogUniform;
  } else if (kind == "int_uniform") {
    out.kind = SweepDistribution::Kind::kIntUniform;
  } else if (kind != "uniform") {
    const std::string hint = nearest(kind, distribution_names());
    throw UserError(fmt::format("{}: '{}' is not a distribution{}: use {}", where(name.source()),
                                kind, hint.empty() ? "" : " (did you mean '" + hint + "'?)",
                                forms));
  }
  read_bounds(value, path, out);
  return out;
}

// A whole number of at least `least` for [search] key `key`.
int64_t whole_number(const toml::node& node, const std::string& key, int64_t least) {
  const auto value = node.value<int64_t>();
  if (!node.is_integer() || !value || *value < least) {
    throw UserError(fmt::format(
        "{}: {} must be a whole number, at least {}{}", where(node.source()), key, least,
        key == "reduction_factor" ? " (each rung keeps 1/reduction_factor of the trials)" : ""));
  }
  return *value;
}

// A string [search] key: type, sampler, metric or mode.
void read_word(const toml::node& node, const std::string& key, SweepSearch& out) {
  const std::string text = node.value_or(std::string());
  if (key == "type" || key == "sampler") {
    static const std::vector<std::string> types = {"grid", "random", "tpe", "asha"};
    const std::vector<std::string> allowed =
        key == "type" ? types : std::vector<std::string>{"random", "tpe"};
    const auto known = std::find(allowed.begin(), allowed.end(), text);
    if (known == allowed.end()) {
      throw UserError(fmt::format("{}: {} '{}' is not one this Kiln has: use {}",
                                  where(node.source()), key == "type" ? "search type" : "sampler",
                                  text, join(allowed, ", ")));
    }
    if (key == "type") out.type = static_cast<SweepSearch::Type>(known - allowed.begin());
    if (key == "sampler") out.tpe_sampler = text == "tpe";
    return;
  }
  if (key == "metric" ? text.empty() : text != "min" && text != "max") {
    throw UserError(fmt::format("{}: {}", where(node.source()),
                                key == "metric" ? "metric must be a metric's name: \"val_loss\""
                                                : "mode must be \"min\" or \"max\""));
  }
  if (key == "mode") out.maximize = text == "max";
  if (key == "metric")
    std::tie(out.metric, out.metric_where) = std::pair(text, where(node.source()));
}

}  // namespace

// [space] optimizer.lr = { ... } parses as space.optimizer.lr: section tables (and a family's
// entries, data.sources.web: tables of tables), then the distribution of each key.
void read_space(const toml::table& table, const std::string& prefix,
                std::vector<SweepDistribution>& out) {
  for (auto&& [key, node] : table) {
    const std::string path = key_path(prefix, key);
    const auto* section = node.as_table();
    const bool level = section && !section->empty() &&
                       std::all_of(section->begin(), section->end(),
                                   [](auto&& kv) { return kv.second.is_table(); });
    if (prefix.empty() || level) {
      const auto is_distribution = [&](const std::string& name) { return section->contains(name); };
      if (!section ||
          std::any_of(distribution_names().begin(), distribution_names().end(), is_distribution)) {
        throw UserError(
            fmt::format("{}: '{}' is not section.key: [space] gives distributions "
                        "of config keys, e.g. optimizer.lr = {{ log_uniform = "
                        "[1e-4, 3e-2] }}",
                        where(node.source()), path));
      }
      read_space(*section, path, out);
      continue;
    }
    put_by_key(out, read_distribution(node, path));
  }
}

void read_search(const toml::table& table, SweepSearch& out) {
  out.where = where(table.source());
  static const std::vector<std::string> keys = {
      "type",    "trials",    "seed",      "startup",          "metric", "mode",
      "sampler", "min_steps", "max_steps", "reduction_factor", "grace",  "rung_cooldown"};
  for (auto&& [key, node] : table) {
    const std::string k(key.str());
    if (k == "type" || k == "sampler" || k == "metric" || k == "mode") {
      read_word(node, k, out);
    } else if (k == "rung_cooldown") {
      const std::optional<double> fraction = node.value<double>();
      if (!fraction || !(*fraction > 0 && *fraction < 1)) {
        throw UserError(fmt::format(
            "{}: rung_cooldown must be a number above 0 and below 1, the share of a rung's steps "
            "its cooldown branch trains (0.2: 20%, as Hägele et al. 2024 found enough)",
            where(node.source())));
      }
      out.rung_cooldown = *fraction;
      out.rung_cooldown_where = where(node.source());
    } else if (std::find(keys.begin(), keys.end(), k) != keys.end()) {
      const int64_t least = k == "seed" || k == "grace" ? 0 : k == "reduction_factor" ? 2 : 1;
      const int64_t value = whole_number(node, k, least);
      if (k == "min_steps") out.min_steps_where = where(node.source());
      int64_t* target = k == "trials"      ? &out.trials
                        : k == "seed"      ? &out.seed
                        : k == "startup"   ? &out.startup
                        : k == "min_steps" ? &out.min_steps
                        : k == "max_steps" ? &out.max_steps
                        : k == "grace"     ? &out.grace
                                           : &out.reduction_factor;
      *target = value;
    } else {
      const std::string hint = nearest(k, keys);
      throw UserError(fmt::format(
          "{}: unknown [search] key '{}': {}", where(key.source()), k,
          hint.empty() ? "[search] takes " + join(keys, ", ") : "did you mean '" + hint + "'?"));
    }
  }
}

}  // namespace kiln
