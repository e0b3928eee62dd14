// The distributed runtime: who this process is (core/distributed/world_env.h) and a c10d
// process group to talk to the others: Gloo on the CPU, NCCL on CUDA when LibTorch has it.
// Rendezvous is a c10d TCPStore served by rank 0 at MASTER_ADDR:MASTER_PORT.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/distributed/world_env.h"

namespace kiln {

// A collective failed because ranks stopped answering (killed, stopped, their machine lost):
// its message names them and where they ran. Not a mistake in the input: kiln exits 1 with it.
class PeerLostError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  // Blocks until every rank has arrived or `timeout` passes (then a UserError). `backend` is
  // parallel.backend: "gloo", "nccl" or "auto". The ranks agree on it through the rendezvous
  // store: "auto" is NCCL when every rank trains on CUDA (on_cuda) and Gloo when none does; a
  // world where only some do, or "nccl" where some rank trains on the CPU, is a UserError on
  // every rank, before any of them builds its model.
  Communicator(const WorldEnv& env, const std::string& backend, bool on_cuda,
               std::chrono::milliseconds timeout);
  ~Communicator();

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  const std::string& backend() const { return backend_; }

  // Collectives that were started and may still be running in the backend's threads.
  class Pending {
   public:
    Pending() = default;
    explicit Pending(const Communicator* owner) : owner_(owner) {}
    // Blocks until every one has finished (then runs what was to follow each). A wait the
    // backend fails (a peer that stopped answering within the timeout) becomes the owner's
    // PeerLostError naming the ranks that did not answer its roll call.
    void wait();
    void add(std::function<void()> wait_one) { waits_.push_back(std::move(wait_one)); }

   private:
    const Communicator* owner_ = nullptr;
    std::vector<std::function<void()>> waits_;
  };

  // In place, on every rank. The start_ forms return at once; the others wait for completion.
  Pending start_all_reduce_sum(std::vector<at::Tensor>& tensors);
  void all_reduce_sum(std::vector<at::Tensor>& tensors) { start_all_reduce_sum(tensors).wait(); }
  void all_reduce_max(std::vector<at::Tensor>& tensors);
  void broadcast(std::vector<at::Tensor>& tensors, int root);
  // Every rank's `shard` (the same shape on all) into `slots[r]` for rank r, on every rank. On
  // Gloo, which gathers no bf16 or fp16, such a shard travels as fp32 (exactly).
  Pending start_all_gather(const at::Tensor& shard, const std::vector<at::Tensor>& slots);
  void all_gather(const at::Tensor& shard, const std::vector<at::Tensor>& slots) {
    start_all_gather(shard, slots).wait();
  }
  // Sums `tensor` over the ranks into `root`'s copy (the others' copies are scratch afterwards).
  // Gloo's reduce is a ring reduce-scatter followed by a gather to the root: a rank sends about
  // (world - 1) / world of the tensor in the ring, and the non-roots 1 / world more to the root.
  Pending start_reduce_sum(const at::Tensor& tensor, int root);
  // Rows of `input` to every rank (sent[r] rows, in order, to rank r) and theirs back, into a
  // new tensor holding received[r] rows from rank r, in rank order (c10d's all_to_all_single).
  at::Tensor all_to_all(const at::Tensor& input, std::vector<int64_t> sent,
                        std::vector<int64_t> received);
  void barrier();
  // Point to point (pipeline stages): matched by peer and tag, in order.
  Pending start_send(const at::Tensor& tensor, int peer, int tag);
  Pending start_recv(const at::Tensor& tensor, int peer, int tag);

  // A communicator among `ranks` (this one's ranks, ascending; this rank among them), whose
  // rank numbers are positions in that list. Only the members call it, all with the same name.
  std::unique_ptr<Communicator> subgroup(const std::string& name, const std::vector<int>& ranks);

  // Bytes through the rendezvous store, for what is not a tensor (a serialized optimizer state):
  // put() on one rank, take() (waits, then deletes the key) on another.
  void put(const std::string& key, const std::string& bytes);
  std::string take(const std::string& key);

 private:
  struct Impl;
  Communicator(const WorldEnv& env, const std::string& backend, std::unique_ptr<Impl> impl);
  void join(std::chrono::milliseconds timeout);
  // After a collective failed with `what`: the ranks still running all time out in it too, so
  // each checks in through the store; those that do not within a few seconds are named in a
  // PeerLostError (with the pid, host and Slurm node each published at join()). Returns when
  // every rank checks in: the failure was something else, which the caller rethrows.
  void explain_failure(const std::string& what) const;

  WorldEnv env_;
  std::string backend_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
