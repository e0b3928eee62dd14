#include "core/distributed/backend_choice.h"

#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "core/util/error.h"

namespace kiln {

std::string choose_backend(const std::string& requested, int a_cuda_rank, int a_cpu_rank) {
  if (a_cuda_rank >= 0 && a_cpu_rank >= 0) {
    throw UserError(fmt::format(
        "rank {} trains on CUDA but rank {} on the CPU (it sees no GPU, or its run.device says "
        "cpu): give every rank a GPU, or set run.device = \"cpu\"",
        a_cuda_rank, a_cpu_rank));
  }
  if (requested == "nccl" && a_cpu_rank >= 0) {
    throw UserError(fmt::format(
        "parallel.backend = \"nccl\" needs every rank on a CUDA device, but rank {} trains on "
        "the CPU (it sees no GPU, or run.device says cpu): use parallel.backend = \"gloo\" or "
        "\"auto\"",
        a_cpu_rank));
  }
  if (requested != "auto") return requested;
#ifdef USE_C10D_NCCL
  if (a_cuda_rank >= 0) return "nccl";
#endif
  return "gloo";
}

std::string agree_on_backend(c10d::Store& store, const WorldEnv& env, const std::string& requested,
                             bool on_cuda) {
  store.set("on_cuda/" + std::to_string(env.rank),
            std::vector<uint8_t>{static_cast<uint8_t>(on_cuda ? '1' : '0')});
  int a_cuda_rank = -1, a_cpu_rank = -1;
  for (int r = 0; r < env.world_size; ++r) {
    const bool cuda =
        store.get("on_cuda/" + std::to_string(r)) == std::vector<uint8_t>{uint8_t{'1'}};
    int& first = cuda ? a_cuda_rank : a_cpu_rank;
    if (first < 0) first = r;
  }
  return choose_backend(requested, a_cuda_rank, a_cpu_rank);
}

}  // namespace kiln
