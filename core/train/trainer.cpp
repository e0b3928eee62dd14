#include "core/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <torch/utils.h>

#include "core/api/kernel_choice.h"
#include "core/api/optimizer.h"
#include "core/kernels/fused_cross_entropy.h"
#include "core/layers/document_positions.h"
#include "core/train/expert_balance.h"
#include "core/train/gradients.h"
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

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

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

at::Tensor Trainer::micro_loss(const at::Tensor& inputs, const at::Tensor& targets) {
  // Each micro-batch's mean loss is divided by the number of micro-batches, so the summed
  // gradients equal those of one big batch; a model's auxiliary losses are divided alike.
  const double micro_steps = static_cast<double>(run_.grad_accum);
  return run_.model->with_auxiliary_loss(forward_loss(inputs, targets) / micro_steps, micro_steps);
}

// One step, top to bottom as llm.c's: the micro-steps' forward and backward passes, the
// gradients made whole and clipped, the step's figures to the host (the update needs the norm
// among them), the update, and what the step read and how long it took.
StepStats Trainer::train_step(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  StepStats stats = begin_step(step);
  phases_ = PhaseTimes{};
  PhaseClock clock(profile_, run_.device);
  const at::Tensor loss_sum = micro_steps(stats, clock);
  const at::Tensor norm = sync_gradients(stats, clock);
  gather_step_figures(*run_.parallel, loss_sum, norm, elapsed_ms(start), stats);
  clock.lap(phases_.communication_ms);
  update(stats, clock);
  count_step(stats, start);
  if (trace_) trace_->flush();
  return stats;
}

// The schedule's lr for the step, and gradients zeroed for its micro-steps to add into.
StepStats Trainer::begin_step(int64_t step) {
  StepStats stats;
  stats.step = step;
  step_ = step;
  if (run_.core_share && threads_follow_share_) run_.core_share->rebalance();
  stats.source_tokens = run_.train_data->source_tokens();  // so far: the step's are the change
  stats.lr = run_.schedule->lr(step - 1);
  set_lr(*run_.optimizer, stats.lr);
  if (graph_) {
    graph_->zero_gradients();  // in place: the captured backward writes into them
  } else {
    run_.optimizer->zero_grad();
  }
  return stats;
}

// The step's passes, by the one path that fits the run (assemble() refuses masked data with a
// pipeline or a captured graph): a pipeline runs its stages' passes itself. Returns this rank's
// summed loss, on the device.
at::Tensor Trainer::micro_steps(StepStats& stats, PhaseClock& clock) {
  PassContext passes = pass_context(*run_.train_data, run_.grad_accum, /*train=*/true);
  if (std::optional<at::Tensor> piped = run_.parallel->run_passes(passes)) {
    clock.lap(phases_.forward_ms);  // a pipeline's passes interleave both directions
    return *piped;
  }
  at::Tensor loss_sum = at::zeros({}, at::TensorOptions().device(run_.device));
  if (masked_) {
    stats.counted_tokens = masked_micro_steps(loss_sum, clock);
  } else {
    streamed_micro_steps(loss_sum, clock);
  }
  return loss_sum;
}

// Masked data reads the step's batches first: each micro-step's loss is divided by the targets
// counted over all of them and every rank.
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

// Unmasked data needs no count up front, so each micro-step reads its own batch: one held at a
// time.
void Trainer::streamed_micro_steps(at::Tensor& loss_sum, PhaseClock& clock) {
  for (int64_t micro = 0; micro < run_.grad_accum; ++micro) {
    run_.parallel->begin_micro_step(micro == run_.grad_accum - 1);
    DrawScope draws(draws_of(micro));
    Batch batch = run_.train_data->next();
    if (trace_) trace_->record(step_, batch.inputs);
    if (graph_) {
      replayed_micro_step(batch, loss_sum, clock);
    } else {
      eager_micro_step(batch, loss_sum, clock);
    }
  }
}

// train.cuda_graphs: the micro-step captured once and replayed, which saves its kernel launches;
// the copies to the device are part of the replay.
void Trainer::replayed_micro_step(const Batch& batch, at::Tensor& loss_sum, PhaseClock& clock) {
  loss_sum += graph_->run(batch.inputs, batch.targets);
  clock.lap(phases_.forward_ms);
}

void Trainer::eager_micro_step(const Batch& batch, at::Tensor& loss_sum, PhaseClock& clock) {
  auto inputs = batch.inputs.to(run_.device, /*non_blocking=*/true);
  auto targets = batch.targets.to(run_.device, /*non_blocking=*/true);
  clock.lap(phases_.data_ms);
  at::Tensor loss = micro_loss(inputs, targets);
  loss_sum += loss.detach();
  clock.lap(phases_.forward_ms);
  run_.precision->scale_loss(loss).backward();
  clock.lap(phases_.backward_ms);
}

// The gradients made whole across ranks (the parallel strategy), unscaled and checked (the
// precision policy), then clipped. Returns their global pre-clip norm, still on the device.
at::Tensor Trainer::sync_gradients(StepStats& stats, PhaseClock& clock) {
  run_.parallel->finish_gradients(*run_.model);
  if (fault_due("grad.nonfinite")) poison_gradients(parameters_);
  clock.lap(phases_.communication_ms);
  stats.loss_scale = run_.precision->loss_scale();
  stats.skipped = !run_.precision->prepare_step(parameters_);
  at::Tensor norm = clip_gradients(parameters_, *run_.parallel, run_.device, run_.train.grad_clip);
  clock.lap(phases_.optimizer_ms);
  return norm;
}

// A non-finite norm means some gradient is inf or NaN beyond what the precision policy expects:
// that update would poison the weights, so it is never applied.
void Trainer::update(StepStats& stats, PhaseClock& clock) {
  if (!stats.skipped && !std::isfinite(stats.grad_norm)) stats.skipped = stats.nonfinite = true;
  if (!stats.skipped) run_.optimizer->step();
  run_.parallel->finish_update(*run_.model);
  balance_expert_biases(*run_.model, *run_.parallel);
  clock.lap(phases_.optimizer_ms);
}

// What the step read (a blend's tokens per source: the change since begin_step) and its time.
void Trainer::count_step(StepStats& stats, std::chrono::steady_clock::time_point start) {
  const std::vector<int64_t> source_tokens = run_.train_data->source_tokens();
  for (size_t k = 0; k < source_tokens.size(); ++k)
    stats.source_tokens[k] = source_tokens[k] - stats.source_tokens[k];
  tokens_seen_ += run_.batch_tokens;
  stats.tokens_seen = tokens_seen_;
  stats.dt_ms = elapsed_ms(start);
  stats.tokens_per_sec = static_cast<double>(run_.batch_tokens) / (stats.dt_ms / 1000.0);
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
