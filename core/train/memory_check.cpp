#include "core/train/memory_check.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>

#include <fmt/format.h>
#include <torch/optim/optimizer.h>

#if KILN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "core/api/optimizer.h"
#include "core/distributed/data_parallel.h"
#include "core/util/env.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

constexpr double kFloat32 = 4;

// MemAvailable of /proc/meminfo in bytes: what the kernel can give without swapping; 0 when the
// file is missing (not Linux) or unreadable.
double mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    double kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

int local_ranks() {
  return static_cast<int>(env_integer("LOCAL_WORLD_SIZE", 1, 1, 1 << 20));
}

double reserved_by_other_members() {
  return static_cast<double>(env_integer(kMemoryReserved, 0, 0, int64_t{1} << 62));
}

}  // namespace

MemoryFloor training_floor(const ModelPlan& model, double state_per_parameter, int world_size,
                           int64_t logit_rows) {
  const double world = std::max(1, world_size);
  MemoryFloor floor;
  floor.weights = kFloat32 * (model.parameters + model.buffers);
  floor.gradients = kFloat32 * model.parameters / world;
  floor.optimizer_state = kFloat32 * state_per_parameter * model.parameters / world;
  floor.logits =
      2 * kFloat32 * static_cast<double>(logit_rows) * static_cast<double>(model.vocab_size);
  return floor;
}

MemoryFloor loading_floor(const ModelPlan& model) {
  MemoryFloor floor;
  floor.weights = kFloat32 * (model.parameters + model.buffers);
  return floor;
}

double state_per_parameter(torch::optim::Optimizer& optimizer, int64_t parameter_numel) {
  return static_cast<double>(optimizer_state_bytes(optimizer)) /
         (kFloat32 * static_cast<double>(parameter_numel));
}

double usable_memory(const c10::Device& device) {
#if KILN_WITH_CUDA
  if (device.is_cuda()) {
    return static_cast<double>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
  }
#endif
  if (!device.is_cpu()) return 0;
  const double available = mem_available();
  if (available <= 0) return 0;
  return std::max(1.0, available - reserved_by_other_members()) / local_ranks();
}

void check_memory_floor(const ResolvedConfig& config, const ModelPlan& model,
                        const MemoryFloor& floor, const c10::Device& device, double usable) {
  if (usable <= 0 || floor.total() <= usable) return;
  const std::string where = config.where("model.type").str();
  const double reserved = device.is_cuda() ? 0 : reserved_by_other_members();
  const std::string available =
      device.is_cuda()
          ? fmt::format("the {} of memory of {}", format_bytes(usable), device.str())
          : fmt::format("the {} of memory this machine has available (MemAvailable{}{})",
                        format_bytes(usable),
                        reserved > 0 ? fmt::format(" less the {} that the sweep's members running "
                                                   "beside this one are yet to take",
                                                   format_bytes(reserved))
                                     : "",
                        local_ranks() > 1 ? ", shared by its ranks" : "");
  if (reserved > 0 && floor.total() <= usable + reserved / local_ranks()) {
    throw UserError(fmt::format(
        "{}: training {} needs at least {}, more than {}: run fewer members at once (kiln sweep "
        "--jobs), or run the sweep again once they end, which retries this member",
        where, model.description, format_bytes(floor.total()), available));
  }
  if (floor.gradients == 0) {  // loading only
    throw UserError(fmt::format(
        "{}: {} has {:.3g} parameters: its weights alone take {}, more than {}: make the model "
        "smaller",
        where, model.description, model.parameters, format_bytes(floor.weights), available));
  }
  // The logits grow with the batch, the rest with the model: the fix names the larger.
  const bool batch_bound = floor.logits > floor.total() / 2;
  throw UserError(fmt::format(
      "{}: training {} ({:.3g} parameters) needs at least {} (weights {}, gradients {}, "
      "optimizer state {}, logits {}), more than {}: {}",
      where, model.description, model.parameters, format_bytes(floor.total()),
      format_bytes(floor.weights), format_bytes(floor.gradients),
      format_bytes(floor.optimizer_state), format_bytes(floor.logits), available,
      batch_bound ? "lower train.micro_batch or train.seq_len" : "make the model smaller"));
}

int64_t training_state_bytes(Model& model, torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& p : model.parameters()) {
    bytes += static_cast<int64_t>(p.nbytes());
    if (p.grad().defined()) bytes += static_cast<int64_t>(p.grad().nbytes());
    for (const at::Tensor* t : parameter_state(optimizer, p))
      bytes += static_cast<int64_t>(t->nbytes());
  }
  return bytes;
}

TrainableCounts count_trainable(Model& model) {
  TrainableCounts counts;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) {
      counts.trainable += p.numel();
    } else {
      counts.frozen += p.numel();
      counts.frozen_bytes += static_cast<int64_t>(p.nbytes());
    }
  }
  return counts;
}

}  // namespace kiln
