#include "core/sweep.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/options.h"
#include "core/run_history.h"
#include "core/run_store.h"
#include "core/text.h"

namespace kiln {

namespace {

std::string where(const std::string& file, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", file, region.begin.line, region.begin.column);
}

// A TOML value as --set takes it (strings keep their quotes, so "1e-3" stays a string).
std::string toml_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](auto&& v) {
    if constexpr (toml::is_value<decltype(v)>) out << v;
  });
  return out.str();
}

// The label of a value in a member's name: strings without their quotes.
std::string label_of(const std::string& value_text) {
  if (value_text.size() >= 2 && value_text.front() == '"' && value_text.back() == '"') {
    return value_text.substr(1, value_text.size() - 2);
  }
  return value_text;
}

// [grid] optimizer.lr = [...] parses as grid.optimizer.lr: flattened back to "optimizer.lr".
void flatten_axes(const std::string& file, const toml::table& table, const std::string& prefix,
                  std::vector<SweepAxis>& out) {
  for (auto&& [key, node] : table) {
    const std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* nested = node.as_table()) {
      flatten_axes(file, *nested, path, out);
      continue;
    }
    const auto* list = node.as_array();
    if (!list || list->empty()) {
      throw UserError(
          fmt::format("{}: '{}' must be a non-empty list of values, e.g. {} = [1e-3, "
                      "3e-3]",
                      where(file, node.source()), path, path));
    }
    SweepAxis axis{path, {}};
    for (const auto& element : *list) {
      if (element.is_table() || element.is_array()) {
        throw UserError(fmt::format("{}: the values of '{}' must be numbers, strings or booleans",
                                    where(file, element.source()), path));
      }
      axis.values.push_back(toml_text(element));
    }
    out.push_back(std::move(axis));
  }
}

void add_fixed(const std::string& file, const toml::table& table, const std::string& prefix,
               std::vector<std::string>& out) {
  for (auto&& [key, node] : table) {
    const std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* nested = node.as_table()) {
      add_fixed(file, *nested, path, out);
    } else if (node.is_array()) {
      throw UserError(fmt::format("{}: [set] takes single values; put lists of '{}' under [grid]",
                                  where(file, node.source()), path));
    } else {
      out.push_back(path + "=" + toml_text(node));
    }
  }
}

// Members are runs, and run names become folders under run.out_dir: the rules of `kiln run`,
// checked before any member starts rather than by each member's process.
void check_name(const std::string& what, const std::string& name) {
  if (!is_contained_name(name)) {
    throw UserError(fmt::format(
        "{} '{}' cannot be used: members are runs named <sweep>/<key=value,...>, names become "
        "folders under run.out_dir, so they take at most 200 characters, no '..', no empty "
        "part, no leading '/' and no control characters: rename the sweep (name = \"...\" or "
        "--name) or vary other values",
        what, name));
  }
}

// Far more runs than anyone sweeps by hand: a grid this big is a mistake, and expanding it would
// take the machine's memory before the first member starts.
constexpr size_t kMaxMembers = 10000;

std::atomic<int> g_sweep_signal{0};
void on_sweep_signal(int signal) {
  g_sweep_signal = signal;
}

struct Child {
  pid_t pid = 0;
  const SweepMember* member = nullptr;
  std::string log;
  std::chrono::steady_clock::time_point started;
};

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// A member that failed before its run row existed (say, assembly found its data too small):
// the sweep records it as failed, with the member's own error line, so the store has every
// member.
void record_early_failure(RunStore& store, const SweepSpec& spec, const SweepMember& member,
                          const std::vector<std::string>& extra, const std::string& log) {
  std::vector<std::string> overrides = member.overrides;
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  overrides.push_back("run.name=" + format_value(member.name));
  ResolvedConfig config = load_config(spec.base, overrides);
  const RunOptions run = run_options(config);
  const int64_t id =
      store.create_run(NewRun{member.name, spec.base, config.to_toml(), config.hash(), run.seed, 1,
                              train_options(config).steps, "", "", run.sweep});
  std::string error = last_line(log);
  if (error.empty()) error = "the member's process ended before it created its run";
  store.finish_run(id, "failed", error);
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log_path) {
  ensure_parent_dir(log_path);
  pid_t pid = ::fork();
  if (pid < 0)
    throw UserError(fmt::format("cannot start a sweep member: {}", std::strerror(errno)));
  if (pid == 0) {
    // Its own process group: a Ctrl-C reaches the sweep, which passes it on exactly once.
    ::setpgid(0, 0);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  return pid;
}

// The members side by side: what varies, then how each did, best first by `sort`.
std::string sweep_summary(const std::vector<RunRecord>& runs, const std::string& sort) {
  if (runs.empty()) return "no member of the sweep is in the run store";
  Table table;
  const auto varied = differing_config(runs);
  for (const auto& [key, _] : varied) {
    table.header.push_back(key);
    table.numeric.push_back(true);
  }
  for (const char* column : {"final_loss", "best_val", "tok/s", "steps", "status"}) {
    table.header.push_back(column);
    table.numeric.push_back(std::string(column) != "status");
  }
  auto number = [](const std::optional<double>& v, const char* spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> row;
    for (const auto& [_, values] : varied)
      row.push_back(values[i].empty() ? "-" : values[i]);
    const RunRecord& r = runs[i];
    row.push_back(number(r.final_loss, "{:.4f}"));
    row.push_back(number(r.best_val, "{:.4f}"));
    row.push_back(number(r.tokens_per_sec, "{:.0f}"));
    row.push_back(fmt::format("{}/{}", r.steps, r.planned_steps));
    row.push_back(r.status);
    table.rows.push_back(std::move(row));
  }
  return fmt::format("sorted by {}\n{}", sort, render_text_table(table));
}

}  // namespace

namespace {

// The file's text, or nothing when it cannot be read.
std::optional<std::string> read_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

SweepSpec load_sweep_file(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  if (!text) throw UserError(fmt::format("cannot read sweep file '{}': check the path", path));
  if (auto problem = unsafe_toml_text(*text)) {
    throw UserError(fmt::format("{}:{}:{}: TOML syntax error: {}", path, problem->line,
                                problem->column, problem->what));
  }
  toml::table root;
  try {
    root = toml::parse(*text, path);
  } catch (const toml::parse_error& e) {
    throw UserError(
        fmt::format("{}: TOML syntax error: {}", where(path, e.source()), e.description()));
  }
  SweepSpec spec;
  spec.name = std::filesystem::path(path).stem().string();
  const std::vector<std::string> keys = {"base", "name", "seeds", "grid", "zip", "set"};
  for (auto&& [key, node] : root) {
    const std::string k(key.str());
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      std::string hint = nearest(k, keys);
      throw UserError(fmt::format("{}: unknown sweep key '{}': {}", where(path, key.source()), k,
                                  hint.empty() ? "a sweep file takes " + join(keys, ", ")
                                               : "did you mean '" + hint + "'?"));
    }
    const bool table_key = k == "grid" || k == "zip" || k == "set";
    const bool ok =
        table_key ? node.is_table() : (k == "seeds" ? node.is_array() : node.is_string());
    if (!ok) {
      throw UserError(fmt::format("{}: '{}' must be {}", where(path, node.source()), k,
                                  table_key ? "a table ([" + k + "])"
                                            : (k == "seeds" ? "a list of integers" : "a string")));
    }
  }
  if (!root.contains("base")) {
    throw UserError(
        fmt::format("{}: a sweep file needs base = \"experiments/....toml\", the "
                    "experiment its members start from",
                    path));
  }
  spec.base = root["base"].value<std::string>().value_or("");
  spec.name = root["name"].value<std::string>().value_or(spec.name);
  if (auto* grid = root["grid"].as_table()) flatten_axes(path, *grid, "", spec.grid);
  if (auto* zip = root["zip"].as_table()) flatten_axes(path, *zip, "", spec.zip);
  if (auto* fixed = root["set"].as_table()) add_fixed(path, *fixed, "", spec.fixed);
  if (auto* seeds = root["seeds"].as_array()) {
    SweepAxis axis{"run.seed", {}};
    for (const auto& s : *seeds) {
      if (!s.is_integer()) {
        throw UserError(fmt::format("{}: seeds must be integers", where(path, s.source())));
      }
      axis.values.push_back(toml_text(s));
    }
    spec.grid.push_back(std::move(axis));
  }
  return spec;
}

bool is_sweep_file(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  // Unreadable or unsafe text: the experiment loader reports it, with its position.
  if (!text || unsafe_toml_text(*text)) return false;
  try {
    return toml::parse(*text, path).contains("base");
  } catch (const toml::parse_error&) {
    return false;  // the experiment loader reports the syntax error with its position
  }
}

SweepAxis parse_axis(const std::string& argument) {
  auto eq = argument.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == argument.size()) {
    throw UserError(
        fmt::format("'{}' is not section.key=v1,v2,...: e.g. --grid "
                    "optimizer.lr=1e-3,3e-3",
                    argument));
  }
  return SweepAxis{argument.substr(0, eq), split(argument.substr(eq + 1), ',')};
}

std::vector<SweepMember> expand_sweep(const SweepSpec& spec) {
  // The base first: a mistake in it (a syntax error, say) is the one to report.
  load_config(spec.base, spec.fixed);
  check_name("sweep name", spec.name);
  if (spec.grid.empty() && spec.zip.empty()) {
    throw UserError("the sweep varies nothing: give [grid], [zip] or seeds (or --grid/--zip)");
  }
  for (const auto& axis : spec.zip) {
    if (axis.values.size() != spec.zip.front().values.size()) {
      throw UserError(fmt::format(
          "[zip] lists must have equal lengths: '{}' has {} values, '{}' "
          "has {}",
          spec.zip.front().key, spec.zip.front().values.size(), axis.key, axis.values.size()));
    }
  }
  double count = spec.zip.empty() ? 1.0 : static_cast<double>(spec.zip.front().values.size());
  for (const auto& axis : spec.grid)
    count *= static_cast<double>(axis.values.size());
  if (count > static_cast<double>(kMaxMembers)) {
    throw UserError(fmt::format(
        "the sweep would have {:.0f} members, more than the {} a sweep may have: vary fewer keys "
        "or fewer values",
        count, kMaxMembers));
  }
  // Each combination: one value per grid axis (odometer order), then one zip position.
  std::vector<std::vector<std::pair<std::string, std::string>>> combos = {{}};
  for (const auto& axis : spec.grid) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& combo : combos) {
      for (const auto& value : axis.values) {
        auto extended = combo;
        extended.emplace_back(axis.key, value);
        next.push_back(std::move(extended));
      }
    }
    combos = std::move(next);
  }
  if (!spec.zip.empty()) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& combo : combos) {
      for (size_t i = 0; i < spec.zip.front().values.size(); ++i) {
        auto extended = combo;
        for (const auto& axis : spec.zip)
          extended.emplace_back(axis.key, axis.values[i]);
        next.push_back(std::move(extended));
      }
    }
    combos = std::move(next);
  }
  std::vector<SweepMember> members;
  for (const auto& combo : combos) {
    SweepMember member{"", spec.fixed};
    std::vector<std::string> labels;
    for (const auto& [key, value] : combo) {
      member.overrides.push_back(key + "=" + value);
      labels.push_back(key + "=" + label_of(value));
    }
    member.name = spec.name + "/" + join(labels, ",");
    check_name("sweep member name", member.name);
    // Every member's config is checked now, so a typo stops the sweep before anything runs.
    load_config(spec.base, member.overrides);
    members.push_back(std::move(member));
  }
  return members;
}

int run_sweep(const SweepSpec& spec, const SweepOptions& options,
              const std::function<void(const std::string&)>& print) {
  const std::vector<SweepMember> members = expand_sweep(spec);
  const RunOptions base = run_options(load_config(spec.base, spec.fixed));
  const std::string db = options.db.empty() ? base.db : options.db;
  const int jobs = std::max(1, options.jobs);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = std::max(1, static_cast<int>(cores) / jobs);

  std::vector<std::string> extra = {"run.sweep=" + format_value(spec.name)};
  if (!options.db.empty()) extra.push_back("run.db=" + format_value(options.db));
  if (jobs > 1) extra.push_back(fmt::format("run.threads={}", threads));

  std::vector<const SweepMember*> queue;
  {
    RunStore store(db);
    for (const auto& m : members) {
      auto existing = store.find_run(m.name);
      if (existing && existing->status == "completed") {
        print(fmt::format("skip {} (completed)", m.name));
      } else {
        queue.push_back(&m);
      }
    }
  }
  {
    // --sort orders the summary at the end: a key it cannot sort by is reported now, not after
    // every member has run.
    HistoryDb history(db);
    list_runs(history, ListQuery{"", options.sort, 1});
  }
  print(fmt::format(
      "sweep '{}': {} members, {} to run, {} at a time ({} CPU threads each); logs "
      "in {}/<member>/console.log",
      spec.name, members.size(), queue.size(), jobs, jobs > 1 ? threads : cores, base.out_dir));

  struct sigaction action {
  }, old_int{}, old_term{};
  action.sa_handler = on_sweep_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  g_sweep_signal = 0;
  int forwarded = 0;

  std::vector<Child> running;
  size_t next = 0, finished = 0;
  while (next < queue.size() || !running.empty()) {
    while (!g_sweep_signal && next < queue.size() && static_cast<int>(running.size()) < jobs) {
      const SweepMember& m = *queue[next++];
      bool exists = false;
      {
        RunStore store(db);
        exists = store.find_run(m.name).has_value();
      }
      std::vector<std::string> args = {"kiln"};
      if (exists) {
        args.insert(args.end(), {"resume", m.name, "--db", db});
        if (jobs > 1) args.insert(args.end(), {"--set", fmt::format("run.threads={}", threads)});
      } else {
        args.insert(args.end(), {"run", spec.base, "--name", m.name});
        for (const auto& o : m.overrides)
          args.insert(args.end(), {"--set", o});
        for (const auto& o : extra)
          args.insert(args.end(), {"--set", o});
      }
      const std::string log =
          (std::filesystem::path(base.out_dir) / m.name / "console.log").string();
      running.push_back({spawn(args, log), &m, log, std::chrono::steady_clock::now()});
      print(fmt::format("start {} ({})", m.name, exists ? "resume" : "new"));
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno != EINTR) break;
      if (g_sweep_signal && forwarded != g_sweep_signal) {
        forwarded = g_sweep_signal;
        print(
            "stopping: members finish their current step, snapshot and stop; re-run the sweep "
            "to resume them");
        for (const auto& c : running)
          ::kill(c.pid, forwarded);
      }
      continue;
    }
    auto it =
        std::find_if(running.begin(), running.end(), [&](const Child& c) { return c.pid == pid; });
    if (it == running.end()) continue;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - it->started).count();
    std::string state = "failed";
    {
      RunStore store(db);
      if (auto r = store.find_run(it->member->name)) {
        state = r->status;
      } else {
        record_early_failure(store, spec, *it->member, extra, it->log);
      }
    }
    print(fmt::format("[{}/{}] {} {} in {}", ++finished, queue.size(), it->member->name, state,
                      format_duration(seconds)));
    running.erase(it);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  HistoryDb history(db);
  std::vector<RunRecord> records;
  for (const auto& r : list_runs(history, ListQuery{"", options.sort, 0})) {
    if (r.sweep == spec.name) records.push_back(r);
  }
  int incomplete = 0;
  for (const auto& m : members) {
    auto r = std::find_if(records.begin(), records.end(),
                          [&](const RunRecord& x) { return x.name == m.name; });
    if (r == records.end() || r->status != "completed") ++incomplete;
  }
  print("");
  print(sweep_summary(records, options.sort));
  return incomplete;
}

}  // namespace kiln
