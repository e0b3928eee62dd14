// Jobs that cross a node boundary, on a Slurm cluster of three nodes that are three slurmd of
// this machine (tests/support/slurm_cluster.h; SKIP where they cannot start, FAIL under CI). A
// sweep member submitted with --nodes 2 is one job whose two ranks sit on two different nodes (the
// job's node list says so), meet at the first node's NodeAddr (the node names kiln1..kiln3 resolve
// to no host), and follow the single-process curve within 1e-4 with dropout 0.1 under ddp and fsdp;
// a run under srun as docs/slurm.md writes it does under tensor parallelism, and one `kiln run
// --launcher slurm` submits under tensor x data parallelism. A rank that hangs, or a node lost
// mid-run, ends in a requeued task that resumes the member to the same curve (on other nodes, for
// the lost one); with --nodes 1-2 a lost node's member goes on at once on the node left, at world
// 1, without a requeue. An asha search's workers, one a node, finish the search when one of their
// nodes is lost.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include "server_unavailable.h"
#include "slurm_cluster.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::scalar;
using testing::shell;
using testing::wait_for;

constexpr int kMemberSteps = 120;  // the steps of the members the tests below lose a rank of

class SlurmNodes : public testing::TinyRun {
 protected:
  static void SetUpTestSuite() { cluster_ = testing::SlurmCluster::start(why_, 3); }
  static void TearDownTestSuite() { cluster_.reset(); }

  void SetUp() override {
    if (!cluster_) KILN_SERVER_UNAVAILABLE("a three-node Slurm cannot start here: " + why_);
    TinyRun::SetUp();
  }

  // Submits `args` as a sweep under Slurm and waits for its job to leave the queue; its job id.
  std::string run_sweep(const std::string& name, const std::string& args) {
    auto submitted = run_kiln("sweep " + experiment() + " --name " + name + args);
    EXPECT_EQ(submitted.exit_code, 0) << submitted.output;
    const std::string job = testing::job_of(submitted.output);
    EXPECT_TRUE(
        wait_for([&] { return shell("squeue -h -j " + job).output.find(job) == std::string::npos; },
                 std::chrono::seconds(300)))
        << story(name);
    return job;
  }

  // The nodes each task of the job ran on, as slurmctld recorded them.
  std::vector<std::set<std::string>> nodes_of(const std::string& job) {
    std::vector<std::set<std::string>> tasks;
    const std::string shown = shell("scontrol show job " + job).output;
    const std::regex list(R"( NodeList=(\S+))");
    for (auto it = std::sregex_iterator(shown.begin(), shown.end(), list);
         it != std::sregex_iterator(); ++it) {
      std::set<std::string> names;
      const std::string hosts = shell("scontrol show hostnames " + (*it)[1].str()).output;
      for (size_t start = 0, end; (end = hosts.find('\n', start)) != std::string::npos;
           start = end + 1)
        names.insert(hosts.substr(start, end - start));
      tasks.push_back(names);
    }
    return tasks;
  }

  // A kiln process that Slurm started: its pid and the node it runs on.
  struct RankProcess {
    pid_t pid = 0;
    std::string node;
  };
  // The kiln processes whose environment holds every one of `entries` ("NAME=VALUE").
  static std::vector<RankProcess> kiln_processes(const std::vector<std::string>& entries) {
    std::vector<RankProcess> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string pid = entry.path().filename();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string environ = "\n" + testing::read_file(entry.path() / "environ");
      std::replace(environ.begin(), environ.end(), '\0', '\n');
      const std::string cmdline = testing::read_file(entry.path() / "cmdline");
      if (cmdline.rfind(KILN_BINARY, 0) != 0 ||
          !std::all_of(entries.begin(), entries.end(), [&](const std::string& e) {
            return environ.find("\n" + e + "\n") != std::string::npos;
          }))
        continue;
      const std::string key = "\nSLURMD_NODENAME=";
      const size_t at = environ.find(key);
      const size_t start = at == std::string::npos ? environ.size() : at + key.size();
      found.push_back({std::stoi(pid), environ.substr(start, environ.find('\n', start) - start)});
    }
    return found;
  }
  // Rank `rank` of job `job`'s member (a kiln process srun started): pid 0 while there is none.
  static RankProcess rank_process(const std::string& job, int rank) {
    const auto found = kiln_processes(
        {"SLURM_JOB_ID=" + job, "SLURM_PROCID=" + std::to_string(rank), "SLURM_STEP_ID=0"});
    return found.empty() ? RankProcess{} : found.front();
  }

  // The IPv4 addresses at either end of process `pid`'s established TCP connections, those on
  // port `left_out` (the rendezvous store's) left out: from its open files and the kernel's
  // socket tables (an IPv4 peer of an IPv6 socket is mapped: ::ffff:a.b.c.d).
  static std::set<std::string> connection_addresses(pid_t pid, int left_out) {
    const std::filesystem::path proc = "/proc/" + std::to_string(pid);
    std::set<std::string> inodes;
    for (const auto& fd : std::filesystem::directory_iterator(proc / "fd")) {
      std::error_code error;
      const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
      if (!error && target.rfind("socket:[", 0) == 0)
        inodes.insert(target.substr(8, target.size() - 9));
    }
    // "0100007F:1F90" (or its 32-digit IPv6 form): the address in the host's byte order, then
    // the port; nullopt for a port left out or an IPv6 address that is not a mapped IPv4 one.
    const auto endpoint = [&](const std::string& field) -> std::optional<std::string> {
      const std::string address = field.substr(0, field.find(':'));
      if (std::stoi(field.substr(field.find(':') + 1), nullptr, 16) == left_out) return {};
      if (address.size() == 32 && address.substr(0, 24) != "0000000000000000FFFF0000") return {};
      const auto ip =
          static_cast<uint32_t>(std::stoul(address.substr(address.size() - 8), nullptr, 16));
      return fmt::format("{}.{}.{}.{}", ip & 255, (ip >> 8) & 255, (ip >> 16) & 255, ip >> 24);
    };
    std::set<std::string> addresses;
    for (const char* table_name : {"net/tcp", "net/tcp6"}) {
      std::istringstream table(testing::read_file(proc / table_name));
      std::string line;
      std::getline(table, line);  // the header
      while (std::getline(table, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
        fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
            timeout >> inode;
        if (state != "01" || inodes.count(inode) == 0) continue;  // 01: ESTABLISHED
        const auto here = endpoint(local), there = endpoint(remote);
        if (!here || !there) continue;
        addresses.insert({*here, *there});
      }
    }
    return addresses;
  }

  static std::string node_address(const std::string& node) {
    const std::string shown = shell("scontrol show node " + node).output;
    std::smatch found;
    return std::regex_search(shown, found, std::regex(R"(NodeAddr=(\S+))")) ? found[1].str() : "";
  }

  // From a rank's loss (now) to the member's first step after its snapshot, polled until it
  // completes (at most 400 s): one line of seconds after the loss for each event.
  std::string recovery_timeline(const std::string& job, const std::string& member) {
    const auto lost = std::chrono::steady_clock::now();
    const std::string of_member = " from runs where name = '" + member + "'";
    std::vector<std::pair<std::string, double>> events;
    const auto seen = [&](const std::string& event) {
      return std::any_of(events.begin(), events.end(),
                         [&](const auto& e) { return e.first == event; });
    };
    const auto mark = [&](const std::string& event) {
      if (seen(event)) return;
      events.emplace_back(
          event, std::chrono::duration<double>(std::chrono::steady_clock::now() - lost).count());
    };
    int64_t lowest_step = INT64_MAX;
    while (std::chrono::steady_clock::now() - lost < std::chrono::seconds(400)) {
      const std::string status = scalar(db(), "select status" + of_member);
      if (status == "completed") break;
      const bool running =
          shell("squeue -h -j " + job + " -o %T").output.find("RUNNING") != std::string::npos;
      if (status == "interrupted") mark("rank 0 stopped");
      if (seen("rank 0 stopped") && !running) mark("task requeued");
      if (seen("task requeued") && running) mark("task running again");
      if (seen("task running again") && status == "running") {
        mark("run resumed");
        const std::string step = scalar(db(),
                                        "select max(m.step) from metrics m join runs r on r.id = "
                                        "m.run_id where r.name = '" +
                                            member + "'");
        const int64_t now = step.empty() ? 0 : std::stoll(step);
        lowest_step = std::min(lowest_step, now);
        if (now > lowest_step) mark("first step after its snapshot");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::string line = "recovery timeline, seconds after the rank's loss:";
    for (const auto& [event, at] : events)
      line += fmt::format(" | {} {:.1f}", event, at);
    return line;
  }

  // A ddp member on two nodes that the tests below lose a rank of (parallel.timeout_s = 5), once
  // rank `rank` runs and 15 of its kMemberSteps are stored: the job, the member and that rank,
  // after the single process's run of the same steps ("single"). Rows are stored at each
  // snapshot (every 10 steps), so the member is seen at step 20 and still has 100 steps to go
  // while the test stops or kills a rank: a fast machine cannot finish it first.
  struct RunningMember {
    std::string job, name;
    RankProcess rank;
  };
  // `member_extra`: --set values of the member alone.
  RunningMember two_node_member_at_step_15(const std::string& sweep, int rank,
                                           const std::string& nodes = "2",
                                           const std::string& member_extra = "") {
    const std::string steps =
        " --set train.steps=" + std::to_string(kMemberSteps) +
        " --set eval.every=0 --set run.seed=1 --set train.micro_batch=4 "
        "--set train.batch_tokens=256 --set model.dropout=0.1 --set checkpoint.every=10";
    EXPECT_EQ(run_kiln("run " + experiment() + " --name single" + steps).exit_code, 0);
    auto submitted =
        run_kiln("sweep " + experiment() + " --name " + sweep + " --grid run.seed=1" + steps +
                 " --set parallel.type=ddp --set parallel.timeout_s=5 "
                 "--launcher slurm --nodes " +
                 nodes + member_extra);
    EXPECT_EQ(submitted.exit_code, 0) << submitted.output;
    RunningMember member{testing::job_of(submitted.output), sweep + "/run.seed=1", {}};
    EXPECT_TRUE(wait_for(
        [&] {
          member.rank = rank_process(member.job, rank);
          const std::string counted = scalar(db(), step_rows(member.name));
          return member.rank.pid > 0 && counted.size() > 2 && std::stoi(counted) >= 15;
        },
        std::chrono::seconds(300)))
        << story(sweep);
    return member;
  }

  // A node drained (lost, to Slurm) for as long as this lives, then resumed.
  struct DrainedNode {
    explicit DrainedNode(std::string name) : node(std::move(name)) {
      EXPECT_EQ(shell("scontrol update NodeName=" + node + " State=DRAIN Reason=lost").exit_code,
                0);
    }
    ~DrainedNode() { shell("scontrol update NodeName=" + node + " State=RESUME"); }
    DrainedNode(const DrainedNode&) = delete;
    DrainedNode& operator=(const DrainedNode&) = delete;
    std::string node;
  };

  // "distinct steps, rows" of a run's metrics: "40 40" when no step was stored twice.
  static std::string step_rows(const std::string& run) {
    return "select count(distinct m.step) || ' ' || count(*) from metrics m join runs r on r.id "
           "= m.run_id where r.name = '" +
           run + "'";
  }

  std::string story(const std::string& sweep) {
    return shell("cat " + (dir_ / "runs/") + sweep + "/slurm/*.out").output + cluster_->logs();
  }

  inline static std::unique_ptr<testing::SlurmCluster> cluster_;
  inline static std::string why_;
};

// The same global batch on one process and on two ranks: 256 tokens a step.
const std::string kSteps =
    " --set train.steps=8 --set eval.every=0 --set run.seed=1 --set train.micro_batch=4 "
    "--set train.batch_tokens=256 --set model.dropout=0.1";

TEST_F(SlurmNodes, AMemberOnTwoNodesFollowsTheSingleProcessUnderEachStrategy) {
  ASSERT_EQ(run_kiln("run " + experiment() + " --name single" + kSteps).exit_code, 0);
  const std::string job =
      run_sweep("d", " --grid parallel.type=ddp,fsdp" + kSteps + " --launcher slurm --nodes 2");
  const auto tasks = nodes_of(job);
  ASSERT_EQ(tasks.size(), 2u) << shell("scontrol show job " + job).output;
  for (const auto& nodes : tasks)
    EXPECT_EQ(nodes.size(), 2u) << "job " << job << ": " << story("d");
  for (const std::string member : {"d/parallel.type=ddp", "d/parallel.type=fsdp"}) {
    SCOPED_TRACE(member);
    ASSERT_EQ(scalar(db(), "select status from runs where name = '" + member + "'"), "completed")
        << story("d");
    EXPECT_EQ(scalar(db(), "select world_size from runs where name = '" + member + "'"), "2");
    expect_same_curve("single", member, 8);
  }
}

// One multi-node run with no launcher of Kiln's, as docs/slurm.md writes it: sbatch on two
// nodes, MASTER_ADDR the first node's NodeAddr, srun starting the ranks. Tensor parallelism
// across the node boundary follows the single process.
TEST_F(SlurmNodes, ARunUnderSrunSplitsItsTensorsAcrossTwoNodes) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp + " --name single" + kSteps).exit_code, 0);
  const std::string script = dir_ / "tp.sh";
  testing::write_text(
      script,
      fmt::format("#!/bin/bash\n"
                  "first=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -1)\n"
                  "export MASTER_ADDR=$(scontrol show node $first | grep -oP 'NodeAddr=\\K\\S+')"
                  " MASTER_PORT={}\n"
                  "srun '{}' run '{}' --name tp --set parallel.type=tensor --set parallel.tp=2{}\n",
                  testing::free_local_port(), KILN_BINARY, exp, kSteps));
  const auto submitted =
      shell(fmt::format("sbatch --parsable --nodes 2 --ntasks-per-node 1 "
                        "--output '{}' '{}'",
                        dir_ / "tp.out", script));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = submitted.output.substr(0, submitted.output.find_first_of(";\n"));
  ASSERT_TRUE(
      wait_for([&] { return shell("squeue -h -j " + job).output.find(job) == std::string::npos; },
               std::chrono::seconds(300)))
      << testing::read_file(dir_ / "tp.out");
  const auto tasks = nodes_of(job);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].size(), 2u) << shell("scontrol show job " + job).output;
  ASSERT_EQ(scalar(db(), "select status from runs where name = 'tp'"), "completed")
      << testing::read_file(dir_ / "tp.out") << cluster_->logs();
  EXPECT_EQ(scalar(db(), "select world_size from runs where name = 'tp'"), "2");
  expect_same_curve("single", "tp", 8);
}

// A snapshot that fsdp wrote on two nodes, each rank its own shards, resumed on three: a job of
// two nodes trains 12 steps under srun, one of three resumes it to 20 (each rank reads the parts
// of the shards its row blocks overlap, and says how many bytes), and the run follows the single
// process's curve within 1e-4 (768 tokens a step: 3 micro-steps a rank on two, 2 on three).
TEST_F(SlurmNodes, AnFsdpSnapshotOfTwoNodesResumesOnThree) {
  const std::string exp = experiment();
  const std::string steps =
      " --set eval.every=0 --set run.seed=1 --set train.micro_batch=4 "
      "--set train.batch_tokens=768 --set checkpoint.every=6";
  ASSERT_EQ(run_kiln("run " + exp + " --name single --set train.steps=20" + steps).exit_code, 0);
  const auto under_srun = [&](int nodes, const std::string& args, const std::string& out) {
    const std::string script = dir_ / (out + ".sh");
    testing::write_text(
        script, fmt::format("#!/bin/bash\n"
                            "first=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -1)\n"
                            "export MASTER_ADDR=$(scontrol show node $first | "
                            "grep -oP 'NodeAddr=\\K\\S+') MASTER_PORT={}\n"
                            "srun '{}' {}\n",
                            testing::free_local_port(), KILN_BINARY, args));
    const auto submitted =
        shell(fmt::format("sbatch --parsable --nodes {} --ntasks-per-node 1 --output '{}' '{}'",
                          nodes, dir_ / (out + ".out"), script));
    EXPECT_EQ(submitted.exit_code, 0) << submitted.output;
    const std::string job = submitted.output.substr(0, submitted.output.find_first_of(";\n"));
    EXPECT_TRUE(
        wait_for([&] { return shell("squeue -h -j " + job).output.find(job) == std::string::npos; },
                 std::chrono::seconds(300)))
        << testing::read_file(dir_ / (out + ".out"));
    const auto tasks = nodes_of(job);  // one task, on `nodes` different nodes
    EXPECT_EQ(tasks.size() == 1 ? tasks[0].size() : 0, static_cast<size_t>(nodes))
        << shell("scontrol show job " + job).output;
    return testing::read_file(dir_ / (out + ".out"));
  };
  const std::string two = under_srun(
      2, "run '" + exp + "' --name f --set parallel.type=fsdp --set train.steps=12" + steps, "two");
  ASSERT_EQ(scalar(db(), "select status || ' ' || world_size from runs where name = 'f'"),
            "completed 2")
      << two << cluster_->logs();
  const std::string three =
      under_srun(3, "resume f --db '" + db() + "' --set train.steps=20", "three");
  ASSERT_EQ(scalar(db(), "select status || ' ' || world_size from runs where name = 'f'"),
            "completed 3")
      << three << cluster_->logs();
  EXPECT_NE(three.find("resuming after step 12 "), std::string::npos) << three;
  std::smatch read;
  ASSERT_TRUE(std::regex_search(
      three, read,
      std::regex("snapshot of step 12: bytes of tensors read by rank: ([1-9]\\d*) ([1-9]\\d*) "
                 "([1-9]\\d*)\n")))
      << three;
  expect_same_curve("single", "f", 20);
}

// `kiln run --launcher slurm`: one job of two nodes and two ranks a node, tensor parallelism
// within each node (tp = 2) and data parallelism across them, on the single process's curve;
// `kiln sweep status` follows it by the run's name.
TEST_F(SlurmNodes, ARunSubmittedByKilnSplitsTensorsWithinNodesAndDataAcrossThem) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp + " --name single" + kSteps).exit_code, 0);
  auto submitted =
      run_kiln("run " + exp + " --name txd --launcher slurm --nodes 2 " +
               "--ntasks-per-node 2 --set parallel.type=tensor --set parallel.tp=2" + kSteps);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  EXPECT_NE(submitted.output.find("kiln sweep status txd"), std::string::npos) << submitted.output;
  const std::string job = testing::job_of(submitted.output);
  ASSERT_TRUE(
      wait_for([&] { return shell("squeue -h -j " + job).output.find(job) == std::string::npos; },
               std::chrono::seconds(300)))
      << story("txd");
  const auto tasks = nodes_of(job);
  ASSERT_EQ(tasks.size(), 1u) << story("txd");
  EXPECT_EQ(tasks[0].size(), 2u) << shell("scontrol show job " + job).output;
  ASSERT_EQ(scalar(db(), "select status from runs where name = 'txd'"), "completed")
      << story("txd");
  EXPECT_EQ(scalar(db(), "select world_size from runs where name = 'txd'"), "4");
  expect_same_curve("single", "txd", 8);
  auto status = run_kiln("sweep status txd --db " + db());
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("completed"), std::string::npos) << status.output;
  // Submitted again under the same name: refused, nothing submitted.
  auto again = run_kiln("run " + exp + " --name txd --launcher slurm" + kSteps);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("run 'txd' is in run store"), std::string::npos) << again.output;
}

// A rank that hangs (SIGSTOP) in a member on two nodes: rank 0 stops within parallel.timeout_s
// with a line naming it and its node, the member is marked interrupted, its task requeues itself,
// and the task's next run resumes the member from its latest snapshot to the end, on the single
// process's curve, with every step's row stored once. The member writes its snapshots in the
// background (checkpoint.async; the node lost below, on the training thread), so the latest may
// have been in flight when the rank hung: it is in place and listed before the task requeues,
// and the requeued run resumes from the one the store lists last.
TEST_F(SlurmNodes, AHungRankRequeuesItsTaskWhichResumesToTheSingleProcessCurve) {
  const RunningMember member =
      two_node_member_at_step_15("h", 1, "2", " --set checkpoint.async=true");
  ASSERT_GT(member.rank.pid, 0);
  // The ranks' Gloo connection listened at a node's NodeAddr (each node of the test cluster has
  // an address of its own in 127/8), not at the host name's address, 127.0.0.1 here: one end of
  // it is at the accepting rank's node address. The other end, the connecting socket, takes
  // 127.0.0.1 from the loopback route, as does everything when the ranks listen there.
  const RankProcess rank0 = rank_process(member.job, 0);
  ASSERT_GT(rank0.pid, 0);
  const std::string environ = testing::read_file("/proc/" + std::to_string(rank0.pid) + "/environ");
  const size_t port_at = environ.find("MASTER_PORT=");
  ASSERT_NE(port_at, std::string::npos);
  const int store_port = std::stoi(environ.substr(port_at + 12));
  std::set<std::string> ends = connection_addresses(rank0.pid, store_port);
  const std::set<std::string> rank1_ends = connection_addresses(member.rank.pid, store_port);
  ends.insert(rank1_ends.begin(), rank1_ends.end());
  const std::string addr0 = node_address(rank0.node), addr1 = node_address(member.rank.node);
  EXPECT_NE(addr0, addr1);
  EXPECT_TRUE(ends.count(addr0) + ends.count(addr1) > 0)
      << "rank 0 on " << rank0.node << " (" << addr0 << "), rank 1 on " << member.rank.node << " ("
      << addr1 << "): their connections' ends are at " << fmt::format("{}", ends);
  ASSERT_EQ(::kill(member.rank.pid, SIGSTOP), 0);
  const bool completed = wait_for(
      [&] {
        return scalar(db(), "select status from runs where name = '" + member.name + "'") ==
               "completed";
      },
      std::chrono::seconds(400));
  ::kill(member.rank.pid, SIGKILL);  // where Slurm did not end it
  ASSERT_TRUE(completed) << story("h");
  const std::string tasks = story("h");
  EXPECT_NE(tasks.find("a rank of " + member.name +
                       " stopped answering: requeued to resume from its latest snapshot, "
                       "step_0000"),
            std::string::npos)
      << tasks;
  const std::string console = testing::read_file(folder_of(member.name) + "/console.log");
  EXPECT_NE(console.find(fmt::format("rank 0 of 2: rank 1 (pid {} on host ", member.rank.pid)),
            std::string::npos)
      << console;
  EXPECT_NE(console.find("(Slurm node " + member.rank.node + ")"), std::string::npos) << console;
  std::smatch latest;
  ASSERT_TRUE(std::regex_search(
      tasks, latest, std::regex("requeued to resume from its latest snapshot, step_(\\d+)")))
      << tasks;
  EXPECT_NE(console.find(fmt::format("resuming after step {} ", std::stoi(latest[1].str()))),
            std::string::npos)
      << console;
  expect_same_curve("single", member.name, kMemberSteps);
  EXPECT_EQ(scalar(db(), step_rows(member.name)), fmt::format("{0} {0}", kMemberSteps));
}

// A node lost mid-run: rank 1 killed (its node's processes gone) and its node drained, so that
// nothing lands there again. Rank 0 stops with a line naming the lost rank and its node, the task
// requeues itself, and Slurm runs it on two nodes without the lost one: the member resumes from
// its latest snapshot and ends on the single process's curve, each step's row stored once.
TEST_F(SlurmNodes, ANodeLostMidRunResumesItsMemberOnTheNodesThatRemain) {
  const RunningMember member = two_node_member_at_step_15("l", 1);
  const RankProcess& lost = member.rank;
  ASSERT_GT(lost.pid, 0);
  ASSERT_FALSE(lost.node.empty());
  const DrainedNode drained(lost.node);
  ASSERT_EQ(::kill(lost.pid, SIGKILL), 0);
  const std::string timeline = recovery_timeline(member.job, member.name);
  std::cout << timeline << std::endl;  // tools/bench/recovery.sh reads it
  ASSERT_EQ(scalar(db(), "select status from runs where name = '" + member.name + "'"), "completed")
      << timeline << "\n"
      << story("l");
  const std::string tasks = story("l");
  EXPECT_NE(tasks.find("a rank of " + member.name + " stopped answering: requeued"),
            std::string::npos)
      << tasks;
  const std::string console = testing::read_file(folder_of(member.name) + "/console.log");
  EXPECT_NE(console.find(fmt::format("rank 0 of 2: rank 1 (pid {} on host ", lost.pid)),
            std::string::npos)
      << console;
  EXPECT_NE(console.find("(Slurm node " + lost.node + ")"), std::string::npos) << console;
  // The requeued task's allocation: two nodes, the lost one not among them.
  const auto allocations = nodes_of(member.job);
  ASSERT_EQ(allocations.size(), 1u) << shell("scontrol show job " + member.job).output;
  EXPECT_EQ(allocations[0].size(), 2u);
  EXPECT_EQ(allocations[0].count(lost.node), 0u) << lost.node;
  expect_same_curve("single", member.name, kMemberSteps);
  EXPECT_EQ(scalar(db(), step_rows(member.name)), fmt::format("{0} {0}", kMemberSteps));
}

// --nodes 1-2: a member that loses one of its two nodes goes on at once in the same allocation,
// on the node left, at world 1 (no requeue, no wait for Slurm), and ends on the single process's
// curve with every step stored once. Its train.batch_tokens is the default, 0, which would make
// the batch follow the world: the submission pinned it at 2 ranks' 256 tokens (micro_batch 4 x
// seq_len 32 x 2), which the node left makes of 2 micro-steps.
TEST_F(SlurmNodes, ARangeOfNodesResumesAtOnceOnTheNodeLeft) {
  const RunningMember member =
      two_node_member_at_step_15("r", 1, "1-2", " --set train.batch_tokens=0");
  const RankProcess& lost = member.rank;
  ASSERT_GT(lost.pid, 0);
  const std::string kept = rank_process(member.job, 0).node;  // where the member goes on
  ASSERT_FALSE(kept.empty());
  const DrainedNode drained(lost.node);
  const auto lost_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(lost.pid, SIGKILL), 0);
  ASSERT_TRUE(wait_for(
      [&] {
        return shell("squeue -h -j " + member.job).output.find(member.job) == std::string::npos;
      },
      std::chrono::seconds(300)))
      << story("r");
  std::cout << "from the loss to the member's end: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - lost_at).count()
            << " s" << std::endl;
  ASSERT_EQ(scalar(db(), "select status from runs where name = '" + member.name + "'"), "completed")
      << story("r");
  const std::string tasks = story("r");
  EXPECT_NE(tasks.find("on the 1 node(s) that remain (" + kept +
                       "), world size 2 -> 1: global batch kept at 256 tokens, each rank now 2 "
                       "micro-step(s) of 4 sequences (was 1)"),
            std::string::npos)
      << tasks;
  EXPECT_EQ(tasks.find("requeued"), std::string::npos) << tasks;
  EXPECT_NE(shell("scontrol show job " + member.job).output.find("Restarts=0"), std::string::npos);
  expect_same_curve("single", member.name, kMemberSteps);
  EXPECT_EQ(scalar(db(), step_rows(member.name)), fmt::format("{0} {0}", kMemberSteps));
  EXPECT_EQ(scalar(db(), "select world_size from runs where name = '" + member.name + "'"), "1");
}

// An asha search under Slurm as three worker tasks, each taking a whole node (--cpus-per-task 2,
// the CPUs each test node claims), so that they run on three different nodes; one worker's node
// is lost mid-search (drained, its kiln processes killed). Its claim goes stale and the two other
// workers take its member over and finish the search: every trial has its run, no claim is
// left, and a member went the whole way.
TEST_F(SlurmNodes, AnAshaSearchFinishesWithOneWorkersNodeLost) {
  // A killed worker on this host loses its claims at once (its pid is gone); the timeout is for
  // workers on other hosts, and one as short as 2 s could take claims from a live worker stalled
  // on a busy machine. Below the default (120 s), so that a claim left behind shows as a slow test.
  const testing::ScopedEnv stale("KILN_SWEEP_CLAIM_TIMEOUT", "30");  // sbatch passes it on
  const std::string file = dir_ / "asha.toml";
  testing::write_text(file, "base = \"" + experiment() +
                                "\"\nname = \"an\"\n[set]\ntrain.steps = 27\n"
                                "checkpoint.every = 3\n[search]\ntype = \"asha\"\ntrials = 6\n"
                                "seed = 2\nmetric = \"val_loss\"\nmin_steps = 3\n[space]\n"
                                "optimizer.lr = { log_uniform = [1e-4, 3e-1] }\n");
  auto submitted = run_kiln("sweep " + file +
                            " --launcher slurm --max-parallel 3 --cpus-per-task 2 --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = testing::job_of(submitted.output);
  std::vector<RankProcess> workers;
  ASSERT_TRUE(wait_for(
      [&] {
        workers = kiln_processes({"SLURM_ARRAY_JOB_ID=" + job});
        std::set<std::string> nodes;
        for (const auto& w : workers)
          nodes.insert(w.node);
        const std::string started = scalar(db(), "select count(*) from runs where sweep = 'an'");
        return nodes.size() == 3 && !started.empty() && std::stoi(started) >= 3;
      },
      std::chrono::seconds(300)))
      << story("an");
  const std::string lost = workers.front().node;
  ASSERT_EQ(shell("scontrol update NodeName=" + lost + " State=DRAIN Reason=lost").exit_code, 0);
  struct Undrain {
    std::string node;
    ~Undrain() { shell("scontrol update NodeName=" + node + " State=RESUME"); }
  } undrain{lost};
  std::string lost_pids;  // the worker's and its member's: the worker is named HOST:PID
  for (const auto& w : workers) {
    if (w.node != lost) continue;
    ::kill(w.pid, SIGKILL);
    lost_pids += (lost_pids.empty() ? "'" : ", '") + std::to_string(w.pid) + "'";
  }
  ASSERT_TRUE(
      wait_for([&] { return shell("squeue -h -j " + job).output.find(job) == std::string::npos; },
               std::chrono::seconds(400)))
      << story("an");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'an'"), "6") << story("an");
  EXPECT_EQ(scalar(db(), "select count(*) from sweep_claims"), "0") << story("an");
  // The lost worker had claimed a member, which the others took over (no run is left running).
  EXPECT_NE(scalar(db(),
                   "select count(*) from sweep_decisions where sweep = 'an' and "
                   "substr(worker, instr(worker, ':') + 1) in (" +
                       lost_pids + ")"),
            "0")
      << story("an");
  const std::string whole_way = scalar(db(),
                                       "select count(*) from runs r where sweep = 'an' and "
                                       "(select max(step) from metrics m where m.run_id = r.id) "
                                       "= 27");
  EXPECT_GE(whole_way.empty() ? 0 : std::stoi(whole_way), 1) << story("an");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'an' and status = 'running'"),
            "0")
      << story("an");
}

}  // namespace
}  // namespace kiln
