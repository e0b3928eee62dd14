#include "core/app/slurm/sbatch.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/process.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// `word` as one shell word: single-quoted unless it is plainly safe.
std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string("/._-=:,@%+").find(c) != std::string::npos;
  });
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Rows of `|`-separated fields that a squeue or sacct format printed; none when it failed.
std::vector<std::vector<std::string>> rows_of(const std::vector<std::string>& argv) {
  std::vector<std::vector<std::string>> rows;
  CapturedRun result;
  try {
    result = run_slurm_tool(argv);
  } catch (const UserError&) {
    return rows;  // not installed: states unknown, which the caller shows as such
  }
  if (result.code != 0) return rows;
  for (const auto& line : lines_of(result.output))
    rows.push_back(split(line, '|'));
  return rows;
}

bool is_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// `option` as an #SBATCH line's argument. sbatch splits a directive into words as a shell would
// in part (src/sbatch/opt.c, _get_argument): quotes group, a backslash escapes the next
// character, an unquoted '#' starts a comment. So a word with anything but plain characters goes
// in double quotes with its backslashes and double quotes escaped.
std::string sbatch_word(const std::string& option) {
  const bool plain = std::all_of(option.begin(), option.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./:=@%+,-", c) != nullptr;
  });
  if (plain && !option.empty()) return option;
  std::string word = "\"";
  for (char c : option) {
    if (c == '\\' || c == '"') word += '\\';
    word += c;
  }
  return word + "\"";
}

void refuse_newline(const std::string& text, const char* what) {
  if (text.find_first_of("\n\r") == std::string::npos) return;
  std::string shown = text;
  for (size_t at; (at = shown.find_first_of("\n\r")) != std::string::npos;)
    shown.replace(at, 1, shown[at] == '\n' ? "\\n" : "\\r");
  throw UserError(fmt::format(
      "{} '{}' holds a line break, which would end an #SBATCH line and start a line of the "
      "script: use a folder and a run store path without one",
      what, shown));
}

}  // namespace

namespace {

// One task per node unless asked, or each node runs a rank per GPU.
int ranks_per_node(const SlurmOptions& options) {
  return options.ntasks_per_node > 0 ? options.ntasks_per_node : std::max(1, options.gpus_per_node);
}

}  // namespace

int ranks_per_job(const SlurmOptions& options) {
  return options.nodes * ranks_per_node(options);
}

std::vector<std::string> sbatch_options(const SlurmOptions& options, const std::string& job_name,
                                        const std::string& folder, const std::string& workdir) {
  std::vector<std::string> args = {"--job-name=" + job_name,
                                   "--nodes=" + std::to_string(options.nodes)};
  // A member of one task runs as the batch script's child, one of several under srun.
  args.push_back(fmt::format("--ntasks-per-node={}", ranks_per_node(options)));
  args.push_back(fmt::format("--cpus-per-task={}", options.cpus_per_task));
  if (options.min_nodes > 0 && options.min_nodes < options.nodes) {
    args.push_back(fmt::format("--export=ALL,KILN_MIN_NODES={}", options.min_nodes));
  }
  if (options.gpus_per_node > 0) {
    args.push_back(fmt::format("--gpus-per-node={}", options.gpus_per_node));
  }
  if (!options.partition.empty()) args.push_back("--partition=" + options.partition);
  if (!options.time.empty()) args.push_back("--time=" + options.time);
  args.push_back("--chdir=" + workdir);
  args.push_back("--output=" + folder + "/%A_%a.out");
  args.push_back("--open-mode=append");  // a requeued task adds to its log
  args.push_back(fmt::format("--signal=B:USR1@{}", options.signal_seconds));
  args.push_back("--requeue");
  args.insert(args.end(), options.sbatch_args.begin(), options.sbatch_args.end());
  return args;
}

std::string array_spec(const std::vector<int64_t>& tasks, int max_parallel) {
  std::vector<std::string> ranges;
  for (size_t i = 0; i < tasks.size();) {
    size_t j = i;
    while (j + 1 < tasks.size() && tasks[j + 1] == tasks[j] + 1)
      ++j;
    ranges.push_back(j == i ? std::to_string(tasks[i]) : fmt::format("{}-{}", tasks[i], tasks[j]));
    i = j + 1;
  }
  std::string spec = join(ranges, ",");
  if (max_parallel > 0) spec += fmt::format("%{}", max_parallel);
  return spec;
}

std::string sbatch_script(const std::vector<std::string>& options, const std::string& array,
                          const std::vector<std::string>& command, const std::string& comment) {
  refuse_newline(comment, "the Slurm script's comment");
  std::string script = "#!/bin/bash\n# " + comment + "\n";
  for (const auto& option : options) {
    refuse_newline(option, "sbatch option");
    script += "#SBATCH " + sbatch_word(option) + "\n";
  }
  script += "#SBATCH --array=" + array + "\n";
  std::vector<std::string> words;
  for (const auto& word : command)
    words.push_back(shell_quote(word));
  // exec: the task is Kiln itself, so the signals Slurm sends the batch shell reach it.
  return script + "exec " + join(words, " ") + "\n";
}

CapturedRun run_slurm_tool(const std::vector<std::string>& argv) {
  ProcessOptions options;
  options.program = argv.front();
  options.argv = argv;
  try {
    return run_captured(options);
  } catch (const ProcessStartError& e) {
    if (e.error() != ENOENT) throw;
    throw UserError(fmt::format(
        "{} is not on PATH: Kiln drives Slurm with its own commands; run this on a host of "
        "the Slurm cluster (a login node), or add Slurm's bin folder to PATH",
        argv.front()));
  }
}

void require_sbatch() {
  const char* path = std::getenv("PATH");
  for (const auto& dir : split(path ? path : "", ':')) {
    if (!dir.empty() && ::access((dir + "/sbatch").c_str(), X_OK) == 0) return;
  }
  throw UserError(
      "sbatch is not on PATH: --launcher slurm submits the sweep with Slurm's sbatch; run it on "
      "a host of the Slurm cluster (a login node), or add Slurm's bin folder to PATH");
}

std::string submit_batch(const std::string& script_path) {
  const CapturedRun result = run_slurm_tool({"sbatch", "--parsable", script_path});
  const std::vector<std::string> lines = lines_of(result.output);
  const std::string last = lines.empty() ? "" : lines.back();
  const std::string job = last.substr(0, last.find(';'));  // "JOB" or "JOB;CLUSTER"
  if (result.code == 0 && is_digits(job)) return job;
  std::vector<std::string> said;
  for (auto line : lines) {
    for (const char* prefix : {"sbatch: error: ", "sbatch: "}) {
      if (line.rfind(prefix, 0) == 0) line = line.substr(std::string(prefix).size());
    }
    said.push_back(line);
  }
  throw UserError(
      fmt::format("sbatch refused {}: {}", script_path,
                  said.empty() ? fmt::format("exit code {}", result.code) : join(said, "; ")));
}

std::map<int64_t, std::string> array_task_states(const std::vector<std::string>& job_ids) {
  std::map<std::string, size_t> order;  // a later submission's task wins
  for (size_t i = 0; i < job_ids.size(); ++i)
    order[job_ids[i]] = i;
  std::map<int64_t, std::pair<size_t, std::string>> found;
  auto add = [&](const std::string& job, const std::string& task, const std::string& state) {
    if (!order.count(job) || !is_digits(task)) return;
    const int64_t index = std::stoll(task);
    auto it = found.find(index);
    if (it == found.end() || it->second.first <= order[job]) found[index] = {order[job], state};
  };
  const std::string jobs = join(job_ids, ",");
  // sacct first (jobs that ended, where accounting is on), squeue after: it is the newer word.
  for (const auto& row : rows_of({"sacct", "-n", "-P", "-X", "-j", jobs, "-o", "JobID,State"})) {
    if (row.size() < 2) continue;
    const size_t underscore = row[0].find('_');
    if (underscore == std::string::npos) continue;
    add(row[0].substr(0, underscore), row[0].substr(underscore + 1), split(row[1], ' ').front());
  }
  for (const auto& row : rows_of({"squeue", "--me", "-h", "-r", "-t", "all", "-o", "%F|%K|%T"})) {
    if (row.size() == 3) add(row[0], row[1], row[2]);
  }
  std::map<int64_t, std::string> states;
  for (const auto& [task, state] : found)
    states[task] = state.second;
  return states;
}

std::vector<std::string> queued_jobs(const std::vector<std::string>& job_ids) {
  std::set<std::string> queued;
  for (const auto& row : rows_of({"squeue", "--me", "-h", "-r", "-o", "%F"})) {
    if (std::find(job_ids.begin(), job_ids.end(), row[0]) != job_ids.end()) queued.insert(row[0]);
  }
  return {queued.begin(), queued.end()};
}

}  // namespace kiln
