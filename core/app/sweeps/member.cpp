#include "core/app/sweeps/member.h"

#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "core/config/canonical.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/store/db/connection.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/writer.h"
#include "core/train/memory_check.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

std::vector<std::string> threads_setting(const MemberLaunch& launch) {
  if (launch.threads <= 0) return {};
  return {"--set", fmt::format("run.threads={}", launch.threads)};
}

// `kiln resume` for a member with a run row (interrupted or failed), `kiln run` otherwise.
std::vector<std::string> member_command(const MemberLaunch& launch, const SweepMember& m,
                                        bool exists, const MemberJob& job) {
  const int64_t until = job.until;
  std::vector<std::string> args;
  if (exists) {
    args = {"resume", m.name, "--db", launch.db};
  } else {
    args = {"run", launch.base, "--name", m.name};
    for (const auto& o : m.overrides)
      args.insert(args.end(), {"--set", o});
    for (const auto& o : launch.extra)
      args.insert(args.end(), {"--set", o});
  }
  if (until > 0) args.insert(args.end(), {"--until", std::to_string(until)});
  if (until > 0 && job.probe_cooldown > 0)
    args.insert(args.end(), {"--probe-cooldown", std::to_string(job.probe_cooldown)});
  const std::vector<std::string> threads = threads_setting(launch);
  args.insert(args.end(), threads.begin(), threads.end());
  return args;
}

// The program and argv that run `kiln ARGS`: this binary, or this binary under the wrapper
// (which needs its path: /proc/self/exe is the wrapper's own there).
void set_program(const MemberLaunch& launch, const std::vector<std::string>& args,
                 ProcessOptions& options) {
  if (launch.wrapper.empty()) {
    options.program = "/proc/self/exe";
    options.argv = {"kiln"};
  } else {
    options.program = launch.wrapper.front();
    options.argv = launch.wrapper;
    options.argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  }
  options.argv.insert(options.argv.end(), args.begin(), args.end());
}

}  // namespace

ResolvedConfig member_config(const MemberLaunch& launch, const SweepMember& member) {
  std::vector<std::string> overrides = member.overrides;
  overrides.insert(overrides.end(), launch.extra.begin(), launch.extra.end());
  overrides.push_back("run.name=" + format_value(member.name));
  return load_config(launch.base, overrides);
}

MemberProcess start_member(const MemberLaunch& launch, const MemberJob& job,
                           const std::function<void(const std::string&)>& print) {
  const SweepMember& m = *job.member;
  std::optional<RunRecord> existing = RunStore(launch.db).find_run(m.name);
  const bool exists = existing.has_value();
  ProcessOptions options;
  options.extra_env = launch.env;
  // A new member's identity is chosen here and handed to its `kiln run`, so that its folder,
  // and the console.log in it, are known before it starts.
  std::string uuid;
  std::optional<RunPaths> paths;
  if (existing) {
    paths = require_paths(*existing);
  } else {
    uuid = new_run_uuid();
    paths = RunPaths::for_new_run(run_options(member_config(launch, m)).out_dir, m.name, uuid);
    write_run_marker(*paths, uuid, store_location(launch.db));
    options.extra_env.emplace_back(kChosenRunUuid, uuid);
  }
  if (job.memory_reserved > 0) {
    options.extra_env.emplace_back(kMemoryReserved, fmt::format("{:.0f}", job.memory_reserved));
  }
  set_program(launch, member_command(launch, m, exists, job), options);
  options.output = ProcessOptions::Output::kFile;
  options.output_file = paths->console_log();
  options.own_process_group = true;
  options.dies_with_parent = true;  // a worker SIGKILLed leaves no member training on its own
  options.what = "a sweep member";
  ensure_parent_dir(options.output_file);
  MemberProcess child{
      Process::start(options),         &m, job.until, uuid, paths->folder(), options.output_file,
      std::chrono::steady_clock::now()};
  print(fmt::format("start {} ({}){}", m.name, exists ? "resume" : "new",
                    job.until > 0 ? fmt::format(" to step {}", job.until) : ""));
  return child;
}

std::string last_console_line(const MemberProcess& child) {
  std::ifstream in(child.log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

std::string finished_member_state(const MemberLaunch& launch, const MemberProcess& child) {
  RunStore store(launch.db);
  if (auto r = store.find_run(child.member->name)) return r->status;
  const SweepMember& member = *child.member;
  const ResolvedConfig config = member_config(launch, member);
  const RunOptions run = run_options(config);
  const int64_t id = store.create_run(
      NewRun{member.name, launch.base, config.to_toml(), config.hash(), run.seed, 1,
             train_options(config).steps, "", "", run.sweep, child.uuid, child.folder});
  std::string error = last_console_line(child);
  if (error.empty()) error = "the member's process ended before it created its run";
  store.finish_run(id, "failed", error);
  return "failed";
}

}  // namespace kiln
