#include "core/layers/fused_attention.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "core/kernels/attention_kernel.h"
#include "core/layers/document_positions.h"
#include "core/layers/dropout.h"
#include "core/layers/kv_cache.h"
#include "core/layers/rotary.h"

namespace kiln {
namespace {

namespace kernel = attention_kernel;

// `x`'s rows, which need only be contiguous within themselves: a column-strided input is copied
// once.
at::Tensor as_rows(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.scalar_type() == at::kFloat && x.device().is_cpu(),
              "fused attention wants float32 CPU [batch, time, width] tensors, got ", x.sizes());
  return x.stride(2) == 1 ? x : x.contiguous();
}

template <class T>
kernel::Rows<T> rows_of(const at::Tensor& x, int64_t column = 0) {
  return {x.data_ptr<float>() + column, x.stride(0), x.stride(1)};
}

const int64_t* positions_of(const at::Tensor& positions, const at::Tensor& q) {
  if (!positions.defined()) return nullptr;
  TORCH_CHECK(positions.scalar_type() == at::kLong && positions.device().is_cpu() &&
                  positions.is_contiguous() && positions.dim() == 2 &&
                  positions.size(0) == q.size(0) && positions.size(1) == q.size(1),
              "fused attention wants int64 CPU positions [batch, time], got ", positions.sizes());
  return positions.data_ptr<int64_t>();
}

// Packed rows' positions and the rotation, or none: wrapped, because Function::apply takes no
// undefined tensor among its inputs, and they need no gradient.
struct Extras {
  at::Tensor positions;
  at::Tensor inv_freq;  // undefined: no rotation
};

// The kernel's problem for q, k and v; `cos` and `sin` [time, head_dim / 2] its rotation, or
// undefined for none.
kernel::Problem problem_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           int64_t n_head, int64_t head_dim, const at::Tensor& positions,
                           const at::Tensor& cos, const at::Tensor& sin) {
  return {rows_of<const float>(q),
          rows_of<const float>(k),
          rows_of<const float>(v),
          q.size(0),
          q.size(1),
          n_head,
          k.size(2) / head_dim,
          head_dim,
          positions_of(positions, q),
          cos.defined() ? cos.data_ptr<float>() : nullptr,
          sin.defined() ? sin.data_ptr<float>() : nullptr};
}

// q, k and v: views of one tensor (gpt's qkv) or three (llama's projections). Saves what the
// backward pass needs and returns y [batch, time, n_head * head_dim].
at::Tensor attend(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                  const at::Tensor& v, int64_t n_head, const Extras& extras) {
  const int64_t head_dim = q.size(2) / n_head;
  at::Tensor cos, sin;
  if (extras.inv_freq.defined()) {
    const auto angles = rotary_angles(q.size(1), extras.inv_freq);  // as apply_rotary's
    cos = angles.cos().contiguous(), sin = angles.sin().contiguous();
  }
  const auto problem = problem_of(q, k, v, n_head, head_dim, extras.positions, cos, sin);
  at::Tensor y = at::empty({q.size(0), q.size(1), n_head * head_dim}, q.options());
  at::Tensor lse = at::empty({q.size(0), n_head, q.size(1)}, q.options());
  kernel::forward(problem, rows_of<float>(y), lse.data_ptr<float>());
  ctx->save_for_backward({q, k, v, y, lse, extras.positions, cos, sin});
  ctx->saved_data["n_head"] = n_head;
  return y;
}

// The gradients of the saved q, k and v: into `dq`, `dk` and `dv`, laid out as they are.
void attend_backward(torch::autograd::AutogradContext* ctx, const at::Tensor& dy,
                     kernel::Rows<float> dq, kernel::Rows<float> dk, kernel::Rows<float> dv) {
  const auto saved = ctx->get_saved_variables();
  const int64_t n_head = ctx->saved_data["n_head"].toInt();
  const at::Tensor &q = saved[0], &y = saved[3], &lse = saved[4];
  const auto problem =
      problem_of(q, saved[1], saved[2], n_head, q.size(2) / n_head, saved[5], saved[6], saved[7]);
  const at::Tensor rows = dy.contiguous();
  kernel::backward(problem, rows_of<const float>(y), rows_of<const float>(rows),
                   lse.data_ptr<float>(), dq, dk, dv);
}

// gpt's: q, k and v side by side in one [batch, time, 3 * width] tensor.
struct FusedAttention : torch::autograd::Function<FusedAttention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                            int64_t n_head, const Extras& extras) {
    TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * n_head) == 0,
                "fused attention wants [batch, time, 3 * n_head * head_dim], got ", qkv.sizes());
    const at::Tensor rows = as_rows(qkv);
    const int64_t width = qkv.size(2) / 3;
    return attend(ctx, rows.narrow(2, 0, width), rows.narrow(2, width, width),
                  rows.narrow(2, 2 * width, width), n_head, extras);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor q = ctx->get_saved_variables()[0];
    const int64_t width = q.size(2);
    at::Tensor grad = at::empty({q.size(0), q.size(1), 3 * width}, q.options());
    attend_backward(ctx, grad_outputs[0], rows_of<float>(grad), rows_of<float>(grad, width),
                    rows_of<float>(grad, 2 * width));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

// llama's: separate q, k and v, the rotation applied inside.
struct FusedRotaryAttention : torch::autograd::Function<FusedRotaryAttention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v, int64_t n_head,
                            const Extras& extras) {
    TORCH_CHECK(q.dim() == 3 && q.size(2) % n_head == 0 && (q.size(2) / n_head) % 2 == 0,
                "fused rotary attention wants q [batch, time, n_head * even head_dim], got ",
                q.sizes());
    const int64_t head_dim = q.size(2) / n_head;
    TORCH_CHECK(k.sizes() == v.sizes() && k.dim() == 3 && k.size(0) == q.size(0) &&
                    k.size(1) == q.size(1) && k.size(2) > 0 && k.size(2) % head_dim == 0 &&
                    n_head % (k.size(2) / head_dim) == 0,
                "fused rotary attention wants k and v [batch, time, n_kv_head * head_dim], "
                "n_kv_head dividing n_head, got ",
                k.sizes(), " and ", v.sizes());
    TORCH_CHECK(extras.inv_freq.defined() && extras.inv_freq.device().is_cpu() &&
                    extras.inv_freq.scalar_type() == at::kFloat && extras.inv_freq.dim() == 1 &&
                    extras.inv_freq.size(0) == head_dim / 2,
                "fused rotary attention wants float32 inverse frequencies [head_dim / 2], got ",
                extras.inv_freq.sizes());
    return attend(ctx, as_rows(q), as_rows(k), as_rows(v), n_head, extras);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor dq = at::empty(saved[0].sizes(), saved[0].options());
    at::Tensor dk = at::empty(saved[1].sizes(), saved[1].options());
    at::Tensor dv = at::empty(saved[2].sizes(), saved[2].options());
    attend_backward(ctx, grad_outputs[0], rows_of<float>(dq), rows_of<float>(dk),
                    rows_of<float>(dv));
    return {dq, dk, dv, at::Tensor(), at::Tensor()};
  }
};

at::Tensor contiguous_or_none(const at::Tensor& positions) {
  return positions.defined() ? positions.contiguous() : positions;
}

}  // namespace

bool fused_attention_applies(const at::Tensor& qkv, double dropout, bool training) {
  return qkv.device().is_cpu() && qkv.layout() == at::kStrided && qkv.scalar_type() == at::kFloat &&
         !(training && dropout > 0);
}

at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head,
                                  const at::Tensor& positions) {
  return FusedAttention::apply(qkv, n_head, Extras{contiguous_or_none(positions), {}});
}

at::Tensor fused_rotary_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  int64_t n_head, const at::Tensor& inv_freq,
                                  const at::Tensor& positions) {
  return FusedRotaryAttention::apply(q, k, v, n_head,
                                     Extras{contiguous_or_none(positions), inv_freq});
}

at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t n_head, double dropout,
                                 bool training, bool fused, int64_t site, const SliceOf& heads) {
  // Kiln's kernel reads no cache: with one, the unfused path's causal_attention reads it.
  if (fused && fused_attention_applies(qkv, dropout, training) && !active_kv_cache())
    return fused_causal_attention(qkv, n_head, current_positions());
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3;
  auto split = [&](const at::Tensor& m) {
    return m.view({b, t, n_head, c / n_head}).transpose(1, 2);  // [b, heads, t, head_dim]
  };
  auto parts = qkv.split(c, 2);
  auto y = causal_attention(split(parts[0]), split(parts[1]), split(parts[2]), dropout, training,
                            site, heads);
  return y.transpose(1, 2).contiguous().view({b, t, c});
}

at::Tensor rotary_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 int64_t n_head, const at::Tensor& inv_freq, double dropout,
                                 bool training, bool fused, int64_t site, const SliceOf& heads) {
  const at::Tensor positions = current_positions();  // packed rows: each record from 0
  KvCache* cache = active_kv_cache();
  if (fused && fused_attention_applies(q, dropout, training) &&
      inv_freq.scalar_type() == at::kFloat && !cache)
    return fused_rotary_attention(q, k, v, n_head, inv_freq, positions);
  const int64_t b = q.size(0), t = q.size(1), head_dim = q.size(2) / n_head;
  auto split = [&](const at::Tensor& m) {  // [b, heads, t, head_dim]
    return m.reshape({b, t, m.size(2) / head_dim, head_dim}).transpose(1, 2);
  };
  auto rotated_q = apply_rotary(split(q), inv_freq, positions);
  auto rotated_k = apply_rotary(split(k), inv_freq, positions);
  auto values = split(v);
  if (cache) {  // it keeps the key/value heads as they are, not repeated
    return cache->attend(rotated_q, rotated_k, values)
        .transpose(1, 2)
        .contiguous()
        .view({b, t, n_head * head_dim});
  }
  // Grouped-query attention: query head j reads key/value head j / (n_head / n_kv_head).
  const int64_t group = n_head / rotated_k.size(1);
  if (group > 1) {
    rotated_k = rotated_k.repeat_interleave(group, 1);
    values = values.repeat_interleave(group, 1);
  }
  auto y = causal_attention(rotated_q, rotated_k, values, dropout, training, site, heads);
  return y.transpose(1, 2).contiguous().view({b, t, n_head * head_dim});
}

}  // namespace kiln
