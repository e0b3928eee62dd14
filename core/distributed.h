// The distributed runtime: who this process is (from torchrun's or Slurm's environment) and a
// c10d process group to talk to the others: Gloo on the CPU, NCCL on CUDA when LibTorch has it.
// Rendezvous is a c10d TCPStore served by rank 0 at MASTER_ADDR:MASTER_PORT.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kiln {

struct WorldEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torchrun), or SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID; a UserError naming what is missing when only part is set.
// No variables at all means a world of one.
WorldEnv read_world_env();

class Communicator {
 public:
  // Blocks until every rank has arrived or `timeout` passes (then a UserError).
  Communicator(const WorldEnv& env, const std::string& backend, std::chrono::milliseconds timeout);
  ~Communicator();

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const std::string& backend() const { return backend_; }

  // In place, on every rank; waits for completion.
  void all_reduce_sum(std::vector<at::Tensor>& tensors);
  void broadcast(std::vector<at::Tensor>& tensors, int root);
  void barrier();

 private:
  struct Impl;
  WorldEnv env_;
  std::string backend_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
