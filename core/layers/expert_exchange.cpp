#include "core/layers/expert_exchange.h"

#include <ATen/ATen.h>

#include "core/layers/moe.h"

namespace kiln {

namespace {

std::vector<int64_t> values_of(const at::Tensor& counts) {
  const auto host = counts.to(at::kLong).cpu().contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
}

}  // namespace

at::Tensor grouped_swiglu(const at::Tensor& rows, const Dispatch& d, const at::Tensor& gate_up,
                          const at::Tensor& down) {
  const int64_t experts = gate_up.size(0), n_embd = rows.size(1);
  // Rows past an expert's count stay zero and are never read back.
  const auto batch = at::zeros({experts * d.width, n_embd}, rows.options())
                         .index_copy(0, d.slot, rows)
                         .view({experts, d.width, n_embd});
  const auto halves = at::bmm(batch, gate_up.transpose(1, 2)).chunk(2, -1);
  return at::bmm(at::silu(halves[0]) * halves[1], down.transpose(1, 2))
      .reshape({experts * d.width, n_embd})
      .index_select(0, d.slot);
}

at::Tensor experts_over_group(const at::Tensor& rows, const Dispatch& d, const at::Tensor& gate_up,
                              const at::Tensor& down, const ExpertParallelGroup& group) {
  const int64_t local = gate_up.size(0);
  const std::vector<int64_t> per_rank(static_cast<size_t>(group.size), local);
  // The kept assignments per expert, which rows.sort by expert makes contiguous per rank.
  const auto kept = d.counts.clamp_max(d.width);
  const std::vector<int64_t> sent = values_of(kept.view({group.size, local}).sum(1));
  // What each rank sends this one, per local expert: [size, local].
  const auto arriving = group.exchange(kept, per_rank, per_rank).view({group.size, local});
  const std::vector<int64_t> received = values_of(arriving.sum(1));
  const auto arrived = group.exchange(rows, sent, received);
  // Rows arrive by sender, then by expert: sorted again by expert for the grouped products.
  const auto experts = at::arange(local, kept.options()).repeat({group.size});
  const Dispatch mine =
      dispatch(at::repeat_interleave(experts, arriving.reshape(-1)).unsqueeze(1), local, -1);
  const auto out = grouped_swiglu(arrived.index_select(0, mine.order), mine, gate_up, down);
  const auto back =
      at::zeros({arrived.size(0), out.size(1)}, out.options()).index_copy(0, mine.order, out);
  return group.exchange(back, received, sent);
}

}  // namespace kiln
