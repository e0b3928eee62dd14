// The training loss, cross-entropy over a vocabulary's logits, as one CPU kernel per direction
// (model.kernels = "fused"). LibTorch's cross_entropy is log_softmax then nll_loss: forward writes
// a log-probability tensor as large as the logits, and backward zero-fills another for nll_loss's
// gradient, then reads both to write a third. With GPT-2's 50257-token vocabulary those are the
// largest tensors of a small model's step. Here forward reads each row twice (its max, then its
// sum of exponentials) and keeps one log-sum-exp per row; backward writes softmax - one-hot once.
// llm.c fuses its classifier the same way. docs/benchmarks.md has its timings.
#pragma once

#include <ATen/core/Tensor.h>

namespace kiln {

// Whether the fused kernel serves these tensors: float32 CPU logits [rows, vocab] whose last
// dimension is contiguous, and int64 targets [rows].
bool fused_cross_entropy_applies(const at::Tensor& logits, const at::Tensor& targets);

// The cross-entropy of `logits` [rows, vocab] against `targets` [rows], skipping the targets equal
// to `ignore`: their sum with `sum`, else their mean (NaN when every target is skipped, as
// LibTorch's), differentiable in the logits. With `fused`, Kiln's kernel where
// fused_cross_entropy_applies() holds; otherwise LibTorch's cross_entropy.
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore,
                         bool sum, bool fused);

}  // namespace kiln
