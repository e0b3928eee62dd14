// The device and CPU settings of a run (run_device.h).
#include "core/train/run_device.h"

#include <algorithm>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "core/util/env.h"
#include "core/util/error.h"

namespace kiln {

namespace {

// The ranks on this machine (LOCAL_WORLD_SIZE, as torchrun and kiln launch set it).
int ranks_on_this_machine() {
  return static_cast<int>(env_integer("LOCAL_WORLD_SIZE", 1, 1, 1 << 20));
}

}  // namespace

int fixed_threads(const RunOptions& run) {
  if (run.threads > 0) return static_cast<int>(run.threads);
  // torchrun sets OMP_NUM_THREADS=1 for every worker of a multi-process launch (TORCHELASTIC_RUN_ID
  // marks its workers), not the user: its ranks take their share of the cores instead.
  const auto omp = env_text("OMP_NUM_THREADS");
  if (!omp || env_text("TORCHELASTIC_RUN_ID")) return 0;
  // Its first number, as OpenMP reads "4,2"; anything else libgomp has already warned of and
  // ignored when it loaded, and so does Kiln.
  const auto first = parse_integer(omp->substr(0, omp->find(',')), 1, 1024);
  return first ? static_cast<int>(*first) : 0;
}

// Without fixed threads: the usable CPUs divided among this run's ranks on the machine
// (LOCAL_WORLD_SIZE, set by torchrun and kiln launch), which may not all have registered yet; with
// run.share_cores, among every Kiln process registered too. More threads than cores make OpenMP's
// spinning workers fight: steps ran 10-25x slower here with 4 ranks of 2 threads on 2 cores.
std::shared_ptr<CoreShare> apply_runtime_settings(const RunOptions& run) {
  const int cpus = usable_cpus();
  auto share = std::make_shared<CoreShare>(cpus);
  const int processes = std::max(ranks_on_this_machine(), run.share_cores ? share->processes() : 1);
  const int fixed = fixed_threads(run);
  at::set_num_threads(fixed > 0 ? fixed : std::max(1, cpus / processes));
  torch::manual_seed(static_cast<uint64_t>(run.seed));
  return share;
}

torch::Device pick_device(const ResolvedConfig& config, const std::string& wanted,
                          std::string& note) {
  const std::string where = config.where("run.device").str();
  if (wanted == "cpu") return torch::kCPU;
  const int count = static_cast<int>(torch::cuda::device_count());
  // at::hasCUDA() is false without a GPU even in a CUDA LibTorch: the build says what it has.
  const std::string why_none = KILN_WITH_CUDA ? "this Kiln is built with CUDA but sees no GPU"
                                              : "this Kiln was built without CUDA (docs/gpu.md)";
  if (count == 0) {
    if (wanted != "auto") {
      throw UserError(fmt::format("{}: run.device = \"{}\" but {}: use \"cpu\" or \"auto\"", where,
                                  wanted, why_none));
    }
    note = "run.device = auto: " + why_none + ", so the CPU";
    return torch::kCPU;
  }
  const int local_ranks = ranks_on_this_machine();
  const bool numbered = wanted.rfind("cuda:", 0) == 0;  // the schema checked the digits
  if (numbered && local_ranks > 1) {
    throw UserError(
        fmt::format("{}: run.device = \"{}\" would put all {} ranks on this machine "
                    "on one GPU: use \"cuda\" (rank k takes cuda:k)",
                    where, wanted, local_ranks));
  }
  const int index = numbered ? std::stoi(wanted.substr(5))
                             : static_cast<int>(env_integer("LOCAL_RANK", 0, 0, 1 << 20));
  if (index >= count) {
    throw UserError(fmt::format(
        "{}: run.device = \"{}\" needs cuda:{}, but this machine has {} CUDA device(s), "
        "cuda:0 to cuda:{}: {}",
        where, wanted, index, count, count - 1,
        numbered ? "pick one of them" : "start at most one rank per GPU"));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace kiln
