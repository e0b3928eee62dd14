// Which c10d backend the ranks use (parallel.backend), agreed through the rendezvous store before
// any process group exists, so that every rank reaches the same backend or the same error.
#pragma once

#include <string>

#include "core/distributed/world_env.h"

namespace c10d {
class Store;
}

namespace kiln {

// The c10d backend for parallel.backend `requested` ("auto", "gloo", "nccl"), given a rank that
// trains on CUDA and one that trains on the CPU (-1: none does); a UserError for a world that
// mixes the two, or for "nccl" with a rank on the CPU.
std::string choose_backend(const std::string& requested, int a_cuda_rank, int a_cpu_rank);

// Every rank publishes whether it trains on CUDA (`on_cuda`) and reads the others', then
// chooses as above.
std::string agree_on_backend(c10d::Store& store, const WorldEnv& env, const std::string& requested,
                             bool on_cuda);

}  // namespace kiln
