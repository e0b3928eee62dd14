#include "core/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include <torch/utils.h>

#include "core/api/kernel_choice.h"
#include "core/api/optimizer.h"
#include "core/kernels/fused_cross_entropy.h"
#include "core/layers/document_positions.h"
#include "core/train/phase_clock.h"
#include "core/train/run_device.h"
#include "core/util/fault.h"

namespace kiln {

Trainer::Trainer(AssembledRun& run)
    : run_(run),
      parameters_(run.model->parameters()),
      masked_(run.train_data && run.train_data->masks_loss()),
      fused_loss_(run.config.params("model").has("kernels") &&
                  uses_fused_kernels(run.config.params("model"))),
      trace_(SampleTrace::from_environment(run.parallel->rank())),
      threads_follow_share_(fixed_threads(run.options) == 0 && run.options.share_cores) {
  if (run.train.cuda_graphs) {
    graph_ = std::make_unique<CapturedMicroStep>(
        run, [this](const at::Tensor& inputs, const at::Tensor& targets) {
          at::Tensor loss = micro_loss(inputs, targets);
          run_.precision->scale_loss(loss).backward();
          return loss.detach();
        });
  }
}

Trainer::~Trainer() = default;

namespace {

// The target value cross_entropy skips: what a target the loss mask leaves out becomes.
constexpr int64_t kUncounted = -100;

}  // namespace

at::Tensor Trainer::loss_of(const Batch& batch) {
  return forward_loss(batch.inputs.to(run_.device, /*non_blocking=*/true),
                      batch.targets.to(run_.device, /*non_blocking=*/true));
}

at::Tensor Trainer::forward_loss(const at::Tensor& inputs, const at::Tensor& targets) {
  auto scope = run_.precision->forward_scope();
  return loss_from_logits(run_.model->forward(inputs), targets);
}

at::Tensor Trainer::loss_from_logits(at::Tensor logits, const at::Tensor& targets, bool sum) const {
  const int64_t vocab = run_.model->vocab_size();
  if (logits.size(-1) != vocab) logits = logits.narrow(-1, 0, vocab);  // padded vocabulary
  return cross_entropy(logits.reshape({-1, vocab}).to(at::kFloat), targets.reshape(-1), kUncounted,
                       sum, fused_loss_);
}

PassContext Trainer::pass_context(DataSource& data, int64_t micro_batches, bool train) {
  return PassContext{*run_.model,
                     data,
                     micro_batches,
                     run_.device,
                     train,
                     [this](const at::Tensor& logits, const at::Tensor& targets) {
                       return loss_from_logits(logits, targets);
                     },
                     [this]() -> std::shared_ptr<void> { return run_.precision->forward_scope(); },
                     [this](const at::Tensor& loss) { return run_.precision->scale_loss(loss); },
                     [this](int64_t micro) { return draws_of(micro); }};
}

DrawKey Trainer::draws_of(int64_t micro) const {
  const int64_t window = micro * run_.parallel->data_world() + run_.parallel->data_rank();
  return {static_cast<uint64_t>(run_.options.seed), step_, window * run_.train.micro_batch};
}

at::Tensor Trainer::clip_gradients(double max_norm) {
  std::vector<at::Tensor> norms;
  for (const auto& p : parameters_) {
    if (p.grad().defined()) norms.push_back(p.grad().detach().to(at::kFloat).norm(2));
  }
  // Ranks that hold only a shard of the gradients (zero) see none at all in a small model.
  at::Tensor local = norms.empty() ? at::zeros({}, at::TensorOptions().device(run_.device))
                                   : at::stack(norms).norm(2);
  at::Tensor total = run_.parallel->global_norm(local);
  if (max_norm > 0) {
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / norm only when that is below 1.
    at::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
    for (auto& p : parameters_) {
      if (p.grad().defined()) p.grad().detach().mul_(coef.to(p.grad().dtype()));
    }
  }
  return total;
}

void Trainer::poison_gradients() {
  for (auto& p : parameters_) {
    if (p.grad().defined()) {
      p.grad().view(-1)[0].fill_(std::numeric_limits<float>::infinity());
      return;
    }
  }
}

at::Tensor Trainer::masked_loss_sum(const Batch& batch) {
  // Filled on the device, so that the copies stay asynchronous from pinned batches.
  auto inputs = batch.inputs.to(run_.device, /*non_blocking=*/true);
  auto mask = batch.loss_mask.to(run_.device, /*non_blocking=*/true);
  auto targets = batch.targets.to(run_.device, /*non_blocking=*/true)
                     .masked_fill(mask.logical_not(), kUncounted);
  auto scope = run_.precision->forward_scope();
  PositionScope positions(batch.positions, run_.device);
  return loss_from_logits(run_.model->forward(inputs), targets, /*sum=*/true);
}

int64_t Trainer::masked_micro_steps(at::Tensor& loss_sum, PhaseClock& clock) {
  std::vector<Batch> batches;
  int64_t local = 0;  // counted on the host, from the CPU masks: no device sync
  for (int64_t micro = 0; micro < run_.grad_accum; ++micro) {
    batches.push_back(run_.train_data->next());
    if (trace_) trace_->record(step_, batches.back().inputs);
    local += batches.back().loss_mask.sum().item<int64_t>();
  }
  int64_t counted = local;
  if (run_.parallel->world_size() > 1) {
    at::Tensor all = at::tensor({static_cast<double>(local)}, at::kDouble).to(run_.device);
    counted = std::llround(run_.parallel->sum(all).item<double>());
  }
  clock.lap(phases_.data_ms);
  // The ranks' gradients are combined with weight loss_share (ddp and zero average them), so
  // dividing by counted x loss_share makes the combined gradient that of the counted tokens'
  // summed loss over their global count. A step that counts nothing (possible only for empty
  // rows on every rank) contributes zero rather than 0/0.
  const double divisor =
      static_cast<double>(std::max<int64_t>(counted, 1)) * run_.parallel->loss_share();
  for (int64_t micro = 0; micro < run_.grad_accum; ++micro) {
    run_.parallel->begin_micro_step(micro == run_.grad_accum - 1);
    DrawScope draws(draws_of(micro));
    at::Tensor loss = run_.model->with_auxiliary_loss(
        masked_loss_sum(batches[static_cast<size_t>(micro)]) / divisor, run_.grad_accum);
    loss_sum += loss.detach();
    clock.lap(phases_.forward_ms);
    run_.precision->scale_loss(loss).backward();
    clock.lap(phases_.backward_ms);
  }
  return counted;
}

at::Tensor Trainer::micro_loss(const at::Tensor& inputs, const at::Tensor& targets) {
  // Each micro-batch's mean loss is divided by the number of micro-batches, so the summed
  // gradients equal those of one big batch; a model's auxiliary losses are divided alike.
  const double micro_steps = static_cast<double>(run_.grad_accum);
  return run_.model->with_auxiliary_loss(forward_loss(inputs, targets) / micro_steps, micro_steps);
}

StepStats Trainer::train_step(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  auto& optimizer = *run_.optimizer;
  StepStats stats;
  stats.step = step;
  step_ = step;
  if (run_.core_share && threads_follow_share_) run_.core_share->rebalance();
  stats.source_tokens = run_.train_data->source_tokens();  // so far: the step's are the change
  stats.lr = run_.schedule->lr(step - 1);
  set_lr(optimizer, stats.lr);
  if (graph_) {
    graph_->zero_gradients();  // in place: the captured backward writes into them
  } else {
    optimizer.zero_grad();
  }

  phases_ = PhaseTimes{};
  PhaseClock clock(profile_, run_.device);
  PassContext passes = pass_context(*run_.train_data, run_.grad_accum, /*train=*/true);
  std::optional<at::Tensor> piped = run_.parallel->run_passes(passes);
  at::Tensor loss_sum = piped ? *piped : at::zeros({}, at::TensorOptions().device(run_.device));
  if (piped) clock.lap(phases_.forward_ms);  // a pipeline's passes interleave both directions
  if (masked_) stats.counted_tokens = masked_micro_steps(loss_sum, clock);
  for (int64_t micro = 0; !piped && !masked_ && micro < run_.grad_accum; ++micro) {
    run_.parallel->begin_micro_step(micro == run_.grad_accum - 1);
    DrawScope draws(draws_of(micro));
    Batch batch = run_.train_data->next();
    if (trace_) trace_->record(step, batch.inputs);
    if (graph_) {  // the copies to the device are part of the replay
      loss_sum += graph_->run(batch.inputs, batch.targets);
      clock.lap(phases_.forward_ms);
      continue;
    }
    auto inputs = batch.inputs.to(run_.device, /*non_blocking=*/true);
    auto targets = batch.targets.to(run_.device, /*non_blocking=*/true);
    clock.lap(phases_.data_ms);
    at::Tensor loss = micro_loss(inputs, targets);
    loss_sum += loss.detach();
    clock.lap(phases_.forward_ms);
    run_.precision->scale_loss(loss).backward();
    clock.lap(phases_.backward_ms);
  }
  run_.parallel->finish_gradients(*run_.model);
  if (fault_due("grad.nonfinite")) poison_gradients();
  clock.lap(phases_.communication_ms);
  stats.loss_scale = run_.precision->loss_scale();
  stats.skipped = !run_.precision->prepare_step(parameters_);
  at::Tensor norm = clip_gradients(run_.train.grad_clip);
  clock.lap(phases_.optimizer_ms);

  // One all-reduce and one host transfer per step carry the loss (each rank's share), the norm
  // (the same on every rank) and per rank: the time to here, and a pipeline's pass times. It
  // comes before the update because the update needs it: a non-finite norm means some gradient
  // is inf or NaN, and that update would poison the weights, so it is never applied.
  const int world = run_.parallel->world_size();
  const int rank = run_.parallel->rank();
  const double local_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const auto pass = run_.parallel->pass_times();
  std::vector<float> per_rank(4 * static_cast<size_t>(world), 0.0f);  // built on the host
  per_rank[0 * world + rank] = static_cast<float>(local_ms);
  per_rank[1 * world + rank] = static_cast<float>(pass.compute_ms);
  per_rank[2 * world + rank] = static_cast<float>(pass.total_ms);
  per_rank[3 * world + rank] = static_cast<float>(pass.peak_live);
  at::Tensor host = run_.parallel
                        ->sum(at::cat({at::stack({loss_sum * run_.parallel->loss_share(),
                                                  norm.to(loss_sum.dtype()) / double(world)}),
                                       at::tensor(per_rank).to(loss_sum.device())}))
                        .to(at::kDouble)
                        .cpu();  // the step's one host sync
  clock.lap(phases_.communication_ms);
  stats.grad_norm = host[1].item<double>();
  if (!stats.skipped && !std::isfinite(stats.grad_norm)) stats.skipped = stats.nonfinite = true;
  if (!stats.skipped) optimizer.step();
  run_.parallel->finish_update(*run_.model);
  clock.lap(phases_.optimizer_ms);

  stats.loss = host[0].item<double>();
  auto times = host.narrow(0, 2, 4 * world).reshape({4, world});
  if (world > 1) stats.rank_skew_ms = (times[0].max() - times[0].min()).item<double>();
  if (const int stages = run_.parallel->stages(); stages > 1) {
    // Stage s of the first replica is rank s.
    auto compute = times[1].narrow(0, 0, stages), total = times[2].narrow(0, 0, stages);
    for (int s = 0; s < stages; ++s) {
      stats.stage_compute_ms.push_back(compute[s].item<double>());
      stats.stage_peak_live.push_back(times[3][s].item<int64_t>());
    }
    stats.bubble = 1.0 - (compute.sum() / total.sum()).item<double>();
  }
  const std::vector<int64_t> source_tokens = run_.train_data->source_tokens();
  for (size_t k = 0; k < source_tokens.size(); ++k)
    stats.source_tokens[k] = source_tokens[k] - stats.source_tokens[k];
  tokens_seen_ += run_.batch_tokens;
  stats.tokens_seen = tokens_seen_;
  stats.dt_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  stats.tokens_per_sec = static_cast<double>(run_.batch_tokens) / (stats.dt_ms / 1000.0);
  if (trace_) trace_->flush();
  return stats;
}

EvalResult Trainer::evaluate(DataSource& data, int64_t batches) {
  const AveragedIterateScope averaged(run_.optimizer.get());  // the model an optimizer averages
  if (data.masks_loss()) return masked_evaluate(data, batches);
  torch::NoGradGuard no_grad;
  run_.model->eval();
  data.reset();
  PassContext passes = pass_context(data, batches, /*train=*/false);
  std::optional<at::Tensor> piped = run_.parallel->run_passes(passes);
  at::Tensor total =
      piped ? piped->to(at::kDouble)
            : at::zeros({}, at::TensorOptions().device(run_.device).dtype(at::kDouble));
  for (int64_t i = 0; !piped && i < batches; ++i)
    total += loss_of(data.next()).to(at::kDouble);
  run_.model->train();
  const double share = run_.parallel->loss_share();
  const double loss =
      run_.parallel->sum(total * (share / static_cast<double>(batches))).item<double>();
  return {loss,
          batches * run_.train.micro_batch * run_.train.seq_len * run_.parallel->data_world()};
}

EvalResult Trainer::masked_evaluate(DataSource& data, int64_t batches) {
  torch::NoGradGuard no_grad;
  run_.model->eval();
  data.reset();
  at::Tensor loss = at::zeros({}, at::TensorOptions().device(run_.device).dtype(at::kDouble));
  int64_t counted = 0;
  for (int64_t i = 0; i < batches; ++i) {
    Batch batch = data.next();
    counted += batch.loss_mask.sum().item<int64_t>();
    loss += masked_loss_sum(batch).to(at::kDouble);
  }
  run_.model->train();
  at::Tensor local = at::stack({loss, at::full({}, static_cast<double>(counted), loss.options())});
  at::Tensor total = run_.parallel->sum(local).cpu();
  const double tokens = total[1].item<double>();
  return {total[0].item<double>() / std::max(tokens, 1.0), std::llround(tokens)};
}

}  // namespace kiln
