#include "core/app/sweeps/check.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/config/config.h"
#include "core/train/assemble.h"
#include "core/util/error.h"
#include "core/util/table.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The keys the sweep varies, each once: the variants' keys, then the grid's, then the zip's.
std::vector<std::string> varied_keys(const SweepSpec& spec) {
  std::vector<std::string> keys;
  auto add = [&](const std::string& key) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  };
  for (const auto& variant : spec.variants) {
    for (const auto& assignment : variant.overrides)
      add(assignment.substr(0, assignment.find('=')));
  }
  for (const auto& axis : spec.grid)
    add(axis.key);
  for (const auto& axis : spec.zip)
    add(axis.key);
  return keys;
}

// A flattened value as a table shows it: strings without their quotes.
std::string cell(const std::map<std::string, std::string>& values, const std::string& key) {
  auto it = values.find(key);
  if (it == values.end()) return "-";
  const std::string& v = it->second;
  return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
}

// 4752, 12.3M, 1.56B: a parameter count at a glance.
std::string format_count(double n) {
  if (n < 1e6) return fmt::format("{:.0f}", n);
  if (n < 1e9) return fmt::format("{:.1f}M", n / 1e6);
  return fmt::format("{:.2f}B", n / 1e9);
}

}  // namespace

std::vector<MemberCheck> check_members(const SweepSpec& spec,
                                       const std::vector<SweepMember>& members) {
  std::vector<MemberCheck> checks;
  for (const auto& member : members) {
    try {
      const ResolvedConfig config = load_config(spec.base, member.overrides);
      const AssembledRun run = assemble(config, Assembly::kCheck);
      checks.push_back({member.name, config.flat(), run.model_plan->parameters, run.batch_tokens,
                        run.train.steps, run.memory.total(), config.notes});
    } catch (const UserError& e) {
      throw UserError(fmt::format("sweep member '{}': {}", member.name, e.what()));
    }
  }
  return checks;
}

std::string members_table(const SweepSpec& spec, const std::vector<MemberCheck>& checks) {
  Table table;
  table.header.push_back("member");
  table.numeric.push_back(false);
  const std::vector<std::string> keys = varied_keys(spec);
  for (const auto& key : keys) {
    table.header.push_back(key);
    table.numeric.push_back(true);
  }
  for (const char* column : {"parameters", "tokens/step", "steps", "min memory"}) {
    table.header.push_back(column);
    table.numeric.push_back(true);
  }
  for (const auto& check : checks) {
    std::vector<std::string> row = {check.name};
    for (const auto& key : keys)
      row.push_back(cell(check.values, key));
    row.push_back(format_count(check.parameters));
    row.push_back(std::to_string(check.tokens_per_step));
    row.push_back(std::to_string(check.steps));
    row.push_back(format_bytes(check.memory));
    table.rows.push_back(std::move(row));
  }
  return render_text_table(table);
}

}  // namespace kiln
