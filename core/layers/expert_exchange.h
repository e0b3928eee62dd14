// Experts spread over ranks (expert parallelism): each rank of a group holds an equal share of a
// mixture-of-experts layer's experts, and the tokens routed to another rank's experts travel there
// and back by all-to-all. The layer (core/layers/moe.h) calls these; the communication itself is
// the strategy's (core/distributed/expert_placement.h), which hands it over as functions, so that
// no layer knows a process group.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kiln {

struct Dispatch;

// Where a layer's experts live: this rank holds experts [rank x L, (rank + 1) x L) of the
// layer's E, L = E / size. One process's default: every expert here, nothing exchanged.
struct ExpertParallelGroup {
  int rank = 0;
  int size = 1;
  // Rows to the group's ranks (sent[r] rows, in order, to rank r), returning those received
  // (received[r] from rank r, in rank order); its backward sends the gradients the other way.
  std::function<at::Tensor(const at::Tensor& rows, const std::vector<int64_t>& sent,
                           const std::vector<int64_t>& received)>
      exchange;
};

// The experts' SwiGLU outputs for `rows` (the kept assignments' tokens in d.order's order, sorted
// by expert), in the same order: one batched product per projection over the experts of
// gate_up [L, 2 ffn, n_embd] and down [L, n_embd, ffn], padded to d.width rows each.
at::Tensor grouped_swiglu(const at::Tensor& rows, const Dispatch& d, const at::Tensor& gate_up,
                          const at::Tensor& down);

// grouped_swiglu over the group: each rank's rows go to the ranks holding their experts, which
// run them through their own experts (gate_up, down: this rank's L) and send the outputs back.
at::Tensor experts_over_group(const at::Tensor& rows, const Dispatch& d, const at::Tensor& gate_up,
                              const at::Tensor& down, const ExpertParallelGroup& group);

}  // namespace kiln
