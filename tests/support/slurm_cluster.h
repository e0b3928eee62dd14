// A Slurm cluster of this machine, started by the tests themselves (Debian's slurm-wlm and munge:
// tools/setup.sh --tests) and stopped after: munged with its own key, socket and state,
// slurmctld and slurmd in the foreground as this process's children, every state, log, pid and
// spool path in a scratch folder, every daemon on a port of its own below the kernel's ephemeral
// range (daemon_ports). SLURM_CONF points at its slurm.conf in this process's environment while
// it lives, so the kiln and Slurm commands a test runs reach it. It starts in stages, each with
// its deadline: munged answers a credential, slurmctld a ping, every node registers idle. When it
// cannot start, `why` says which stage failed and the daemons' last log lines, for the test's
// SKIP line (its failure under CI=true: server_unavailable.h). Stopped, it leaves no process of
// its own behind: jobs cancelled, then whatever carries its SLURM_CONF killed (a job step's
// slurmstepd, a rank the cancel did not reach), then the daemons.
// With `nodes` > 1, as the Slurm FAQ has it ("Can Slurm emulate a larger cluster?"): one slurmd
// per node (`slurmd -N kilnK`, which Debian's build supports), each node named kiln1..kilnN on
// 127.0.0.1 with a port of its own and %n in its log, pid and spool paths, and each claiming the
// whole machine's CPUs (over-subscribed: a job on two nodes runs both ranks on these cores).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/util/process.h"
#include "test_util.h"

namespace kiln::testing {

// A shell command's output (stdout and stderr) and exit code, with SLURM_CONF as set here.
inline CommandResult shell(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// The job id in `kiln sweep --launcher slurm`'s output ("... as Slurm job 12 (array ...").
inline std::string job_of(const std::string& output) {
  const std::string marker = "as Slurm job ";
  const size_t at = output.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  return output.substr(start, output.find(' ', start) - start);
}

class SlurmCluster {
 public:
  // The running cluster, or null with `why` set.
  static std::unique_ptr<SlurmCluster> start(std::string& why, int nodes = 1) {
    for (const char* tool : {"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel"}) {
      if (shell(fmt::format("PATH=$PATH:/usr/sbin command -v {}", tool)).exit_code != 0) {
        why = fmt::format(
            "{} is not installed (tools/setup.sh --tests installs slurm-wlm and "
            "munge)",
            tool);
        return nullptr;
      }
    }
    // A daemon that lost its port to another program between the choice and its bind is
    // started again on other ports; any other failure is final.
    for (int attempt = 1;; ++attempt) {
      std::unique_ptr<SlurmCluster> cluster(new SlurmCluster());
      cluster->nodes_ = nodes;
      why = cluster->start_daemons();
      if (why.empty()) return cluster;
      if (attempt == 3 || why.find("Address already in use") == std::string::npos) return nullptr;
      std::cerr << "the Slurm cluster starts again on other ports: " << why << std::endl;
    }
  }

  ~SlurmCluster() {
    // Jobs first, so no task outlives its slurmd; then the daemons, newest first.
    if (up_) {
      shell("scancel --me");
      for (int i = 0; i < 300 && !shell("squeue --me -h").output.empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill_leftovers();
    for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
      it->signal(SIGTERM);
      it->wait();
    }
    ::unsetenv("SLURM_CONF");
  }

  // `count` ports that no other daemon of this cluster has, each free when chosen, from 10000 to
  // 19999: below the kernel's ephemeral range (32768 up, ip_local_port_range), so that no
  // client's connection takes one between the choice and the daemon's bind, as it could take a
  // port that a bind to port 0 chose (which may also give one port twice in a row), and below the
  // ranks' rendezvous ports (core/app/slurm/node_range.h). Where to start in the band follows
  // this process's id, so that two test processes beside each other look in different places.
  static std::vector<int> daemon_ports(int count) {
    std::vector<int> ports;
    for (int k = 0; k < 10000 && static_cast<int>(ports.size()) < count; ++k) {
      const int port = 10000 + (static_cast<int>(::getpid()) * 97 + k) % 10000;
      if (port_is_free(port)) ports.push_back(port);
    }
    return ports;
  }

  std::string folder() const { return dir_.str(); }
  const std::vector<std::string>& node_names() const { return node_names_; }
  // The last lines of the daemons' logs, for a failure's message.
  std::string logs() const {
    std::string text;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.str())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("slurm", 0) != 0 || entry.path().extension() != ".log") continue;
      text += fmt::format("--- {}\n{}\n", name, tail(read_file(entry.path().string()), 3000));
    }
    return text;
  }

 private:
  SlurmCluster() = default;

  // Nothing listens at `port` on any address: a bind to it as a daemon's would works.
  static bool port_is_free(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return free;
  }

  // SIGKILL to every process but this one whose environment holds this cluster's SLURM_CONF: the
  // job steps and ranks that outlived the wait for the queue to empty, which would hold CPUs and
  // ports while the next cluster starts.
  void kill_leftovers() const {
    const std::string mine = "SLURM_CONF=" + (dir_ / "slurm.conf");
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
      const std::string pid = entry.path().filename();
      if (pid.find_first_not_of("0123456789") != std::string::npos || std::stoi(pid) == ::getpid())
        continue;
      std::string environ = read_file(entry.path() / "environ");
      std::replace(environ.begin(), environ.end(), '\0', '\n');
      if (("\n" + environ).find("\n" + mine + "\n") != std::string::npos)
        ::kill(std::stoi(pid), SIGKILL);
    }
  }

  static std::string tail(const std::string& text, size_t chars) {
    return text.size() > chars ? text.substr(text.size() - chars) : text;
  }

  // A daemon in the foreground, its output into `log` in the scratch folder.
  void start_daemon(const std::string& program, std::vector<std::string> argv,
                    const std::string& log) {
    ProcessOptions options;
    options.program = program;
    options.argv = std::move(argv);
    options.output = ProcessOptions::Output::kFile;
    options.output_file = dir_ / log;
    options.own_process_group = true;  // a Ctrl-C of the test run stops the tests, then these
    daemons_.push_back(Process::start(options));
  }

  bool wait_until(const std::function<bool()>& ready, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ready()) return true;
      for (auto& d : daemons_) {
        if (d.try_wait()) return false;  // a daemon that exited will not become ready
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // munged, its key made here; an empty string when its socket appears.
  std::string start_munge() {
    std::filesystem::permissions(dir_.str(), std::filesystem::perms(0755));
    std::string key(1024, '\0');
    std::random_device random;
    for (auto& c : key)
      c = static_cast<char>(random());
    write_text(dir_ / "munge.key", key);
    std::filesystem::permissions(dir_ / "munge.key", std::filesystem::perms(0600));
    socket_ = dir_ / "munge.socket";
    start_daemon("/usr/sbin/munged",
                 {"munged", "--foreground", "--force", "--key-file=" + (dir_ / "munge.key"),
                  "--socket=" + socket_, "--pid-file=" + (dir_ / "munged.pid"),
                  "--seed-file=" + (dir_ / "munged.seed"), "--log-file=" + (dir_ / "munged.log")},
                 "munged.out");
    const std::string answers =
        fmt::format("munge -n -S '{0}' | unmunge -S '{0}' >/dev/null", socket_);
    if (wait_until([&] { return shell(answers).exit_code == 0; }, std::chrono::seconds(20))) {
      return "";
    }
    return "munged did not answer a credential within 20 s: " +
           tail(read_file(dir_ / "munged.log"), 500);
  }

  // slurm.conf for this machine: the node line is what `slurmd -C` finds here.
  std::string write_config() {
    const CommandResult node = shell("/usr/sbin/slurmd -C");
    const std::string node_line = node.output.substr(0, node.output.find('\n'));
    if (node.exit_code != 0 || node_line.rfind("NodeName=", 0) != 0) {
      return "slurmd -C cannot describe this machine: " + node.output;
    }
    const std::string host = node_line.substr(9, node_line.find(' ') - 9);
    const std::string hardware = node_line.substr(node_line.find(' '));  // CPUs=2 Boards=1 ...
    const std::string user = shell("id -un").output.substr(0, shell("id -un").output.find('\n'));
    std::filesystem::create_directories(dir_ / "spool-ctld");
    // One node: this machine by its own name. Several: kiln1..kilnN, each slurmd on its port
    // and at an address of its own, 127.0.0.K (all of 127/8 reaches this machine), so that a
    // rank that listens at its node's address is told from one at the host name's.
    const std::vector<int> ports = daemon_ports(2 + nodes_);
    if (static_cast<int>(ports.size()) < 2 + nodes_) return "no free ports from 10000 to 19999";
    std::string node_lines, names;
    for (int k = 1; k <= nodes_; ++k) {
      const std::string name = nodes_ == 1 ? host : fmt::format("kiln{}", k);
      node_names_.push_back(name);
      std::filesystem::create_directories(dir_ / ("spool-d-" + name));
      node_lines += fmt::format(
          "NodeName={}{}{} NodeAddr=127.0.0.{} State=UNKNOWN\n", name,
          nodes_ == 1 ? "" : fmt::format(" NodeHostname={} Port={}", host, ports[1 + k]), hardware,
          nodes_ == 1 ? 1 : k + 1);
      names += (k > 1 ? "," : "") + name;
    }
    const std::string conf = dir_ / "slurm.conf";
    // cred_expire is also how long a requeued task waits before it may start again (default
    // 120 s): short here, so the requeue test does not wait minutes. The scheduler is Slurm's
    // default, backfill, which starts a requeued task at its next pass once it may start (the
    // builtin one waited for its main pass, up to a minute).
    write_text(conf, fmt::format(R"(ClusterName=kilntest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket},cred_expire=5
StateSaveLocation={dir}/spool-ctld
SlurmdSpoolDir={dir}/spool-d-%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=600
KillWait=10
{node_lines}PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP
)",
                                 fmt::arg("host", host), fmt::arg("ctld_port", ports[0]),
                                 fmt::arg("d_port", ports[1]), fmt::arg("user", user),
                                 fmt::arg("socket", socket_), fmt::arg("dir", dir_.str()),
                                 fmt::arg("node_lines", node_lines), fmt::arg("names", names)));
    ::setenv("SLURM_CONF", conf.c_str(), 1);
    return "";
  }

  std::string start_daemons() {
    std::string why = start_munge();
    if (why.empty()) why = write_config();
    if (!why.empty()) return why;
    start_daemon("/usr/sbin/slurmctld", {"slurmctld", "-D", "-c"}, "slurmctld.out");
    // The nodes register with a slurmctld that answers, rather than wait for its next ping.
    if (!wait_until([] { return shell("scontrol ping").output.find("is UP") != std::string::npos; },
                    std::chrono::seconds(30))) {
      return "slurmctld did not answer `scontrol ping` within 30 s: " + stopped_daemons() + logs();
    }
    for (const std::string& name : node_names_) {
      std::vector<std::string> argv = {"slurmd", "-D"};
      if (nodes_ > 1) argv.insert(argv.end(), {"-N", name});
      start_daemon("/usr/sbin/slurmd", argv, "slurmd-" + name + ".out");
    }
    up_ = wait_until(
        [this] {
          return shell("sinfo -h -N -o %t").output == repeat("idle\n", node_names_.size());
        },
        std::chrono::seconds(60));
    if (up_) return "";
    return fmt::format("{} slurmd did not all register idle within 60 s (sinfo: {}): {}{}",
                       node_names_.size(), shell("sinfo -h -N -o '%N %t'").output,
                       stopped_daemons(), logs());
  }

  // The daemons that exited, with how; empty when none did.
  std::string stopped_daemons() {
    std::string text;
    for (auto& daemon : daemons_) {
      const auto status = daemon.try_wait();
      if (status)
        text += fmt::format("a daemon (pid {}) exited with status {}; ", daemon.pid(),
                            status->shell_code());
    }
    return text;
  }

  static std::string repeat(const std::string& text, size_t times) {
    std::string out;
    for (size_t i = 0; i < times; ++i)
      out += text;
    return out;
  }

  int nodes_ = 1;
  std::vector<std::string> node_names_;
  TempDir dir_;
  std::string socket_;
  std::vector<Process> daemons_;
  bool up_ = false;
};

}  // namespace kiln::testing
