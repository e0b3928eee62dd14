// The mixture-of-experts layer (core/layers/moe.h) forward and backward, its grouped products
// (tokens sorted by expert, one batched matmul per projection) against a loop over experts (one
// small product per expert and projection, as transformers' eager MixtralExperts runs), at 8
// experts, top 2, on one micro-batch. Arguments: tokens, n_embd, expert width. The figures are in
// docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <torch/torch.h>

#include "core/layers/moe.h"

namespace kiln {
namespace {

MixtureOfExperts eight_experts(const benchmark::State& state) {
  MoeOptions o;
  o.n_embd = state.range(1);
  o.experts = 8;
  o.top_k = 2;
  o.ffn_dim = state.range(2);
  torch::manual_seed(0);
  MixtureOfExperts layer(o);
  torch::NoGradGuard no_grad;
  for (auto& p : layer->parameters())
    p.normal_(0.0, 0.02);
  return layer;
}

template <bool grouped>
void BM_MoeStep(benchmark::State& state) {
  MixtureOfExperts layer = eight_experts(state);
  layer->eval();  // the measures' bookkeeping is not what is timed
  const at::Tensor x = torch::randn({1, state.range(0), state.range(1)}).requires_grad_();
  for (auto _ : state) {
    const at::Tensor y = grouped ? layer->forward(x) : layer->forward_by_loop(x);
    y.sum().backward();
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_MoeGrouped(benchmark::State& state) {
  BM_MoeStep<true>(state);
}
void BM_MoeLoop(benchmark::State& state) {
  BM_MoeStep<false>(state);
}

// Tokens of a micro-batch, n_embd, expert width: a small model's and a wider one's.
BENCHMARK(BM_MoeGrouped)->Args({2048, 256, 512})->Args({4096, 512, 1024})->UseRealTime();
BENCHMARK(BM_MoeLoop)->Args({2048, 256, 512})->Args({4096, 512, 1024})->UseRealTime();

}  // namespace
}  // namespace kiln
