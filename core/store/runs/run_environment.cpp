#include "core/store/runs/run_environment.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/store/runs/lookup.h"
#include "core/util/text.h"

namespace kiln {

void write_run_environment(Connection& db, int64_t run_id, const RunEnvironment& environment) {
  Statement insert(db,
                   "INSERT OR REPLACE INTO run_environment (run_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : environment) {
    insert.bind(1, run_id).bind(2, key).bind(3, value);
    insert.step();
    insert.reset();
  }
}

RunEnvironment read_run_environment(Connection& db, int64_t run_id) {
  RunEnvironment environment;
  if (!has_table(db, "run_environment")) return environment;
  Statement q(db, "SELECT key, value FROM run_environment WHERE run_id = ? ORDER BY key", {run_id});
  while (q.step())
    environment[q.text(0)] = q.text(1);
  return environment;
}

std::string environment_differences(const RunEnvironment& a, const RunEnvironment& b) {
  std::set<std::string> keys;
  for (const auto& entry : a)
    keys.insert(entry.first);
  for (const auto& entry : b)
    keys.insert(entry.first);
  std::vector<std::string> differing;
  for (const std::string& key : keys) {
    const auto x = a.find(key), y = b.find(key);
    const std::string left = x == a.end() ? "-" : x->second;
    const std::string right = y == b.end() ? "-" : y->second;
    if (left != right) differing.push_back(fmt::format("{} {} vs {}", key, left, right));
  }
  return join(differing, ", ");
}

}  // namespace kiln
