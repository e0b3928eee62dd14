// parallel "pipeline": the model's layer sequence (embedding, blocks, head) cut into `pp` stages,
// one per rank, fed `microbatches` micro-batches per step so that the stages work at once, and
// the whole pipeline replicated `dp` times. Ranks form a dp x pp mesh, rank = replica x pp +
// stage. Activations go forward and their gradients back with c10d send/recv; the last stage
// computes the loss. Within each stage, the replicas average their gradients with ddp's
// bucketed all-reduce, overlapping the last micro-batch's backward.
//   schedule "gpipe": every micro-batch forward, then every one backward: each stage holds all
//                     micro-batches' activations at the end of the forwards.
//   schedule "1f1b":  after pp - stage - 1 warm-up forwards, one forward, one backward: a stage
//                     holds at most pp - stage micro-batches' activations.
//
// Every rank builds the whole model (rank 0's weights are broadcast) but computes and updates only
// its stage's layers; layers it does not touch go back to host memory. A weight tied across
// stages (gpt's token embedding, also its output projection) lives on both stages, and their
// gradients are summed between the two, so both copies take the same update. In a snapshot the
// first replica of every stage writes its weights and optimizer state (state_slices), so a
// pipelined run resumes at any shape (or under ddp, or on one process) and kiln eval / sample /
// export read its snapshots as any other.
#include <chrono>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/api/data_source.h"
#include "core/api/model.h"
#include "core/distributed/data_parallel.h"
#include "core/distributed/expert_placement.h"
#include "core/distributed/pipeline_stages.h"
#include "core/distributed/shaped_messages.h"
#include "core/layers/low_rank.h"
#include "core/layers/random_draws.h"
#include "core/util/error.h"

namespace kiln {
namespace {

// Point-to-point tags: per micro-batch an activation's shape, the activation, its gradient;
// tied-weight gradients above all of those.
enum Message { kShape = 0, kActivation = 1, kGradient = 2 };
int tag(int64_t micro, Message kind) {
  return static_cast<int>(micro * 3 + kind);
}
ShapedTags activation_tags(int64_t micro) {
  return {tag(micro, kShape), tag(micro, kActivation)};
}
constexpr int kTiedTag = 1 << 24;

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The stages average the gradients of their layers' parameters only (with the adapter tensors
// on their weights, core/api/adapter.h): a trainable parameter registered elsewhere would train
// apart on each replica.
void refuse_parameters_outside(const Model& model,
                               const std::vector<std::shared_ptr<Layer>>& layers) {
  std::unordered_set<const void*> in_layers;
  for (const auto& layer : layers) {
    for (const auto& p : with_low_rank_parameters(layer->parameters()))
      in_layers.insert(p.unsafeGetTensorImpl());
  }
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad() || in_layers.count(item.value().unsafeGetTensorImpl()))
      continue;
    throw UserError(
        fmt::format("parallel 'pipeline' trains the parameters of the model's layers, and '{}' is "
                    "registered outside them: use parallel.type = \"ddp\"",
                    item.key()));
  }
}

class Pipeline : public DataParallel {
 public:
  Pipeline(const Params& p, c10::DeviceType device)
      : DataParallel(p, device),
        pp_(static_cast<int>(p.integer("pp"))),
        dp_(static_cast<int>(p.integer("dp"))),
        microbatches_(p.integer("microbatches")),
        one_f_one_b_(p.text("schedule") == "1f1b"),
        split_points_(p.text("split_points")) {
    pipeline_world_shape(p, comm().size());
    stage_ = comm().rank() % pp_;
    replica_ = comm().rank() / pp_;
  }

  int data_rank() const override { return replica_; }
  int data_world() const override { return dp_; }
  int64_t micro_batches() const override { return microbatches_; }
  double loss_share() const override { return last() ? 1.0 / dp_ : 0.0; }
  int stages() const override { return pp_; }
  PassTimes pass_times() const override { return times_; }
  bool replicates_gradients() const override { return pp_ == 1; }
  void check_layer_count(int64_t layer_count) const override {
    // Parameter counts do not matter for whether the cuts fit.
    pipeline_stage_starts(std::vector<int64_t>(static_cast<size_t>(layer_count), 1), pp_,
                          split_points_);
  }

  void attach(Model& model) override {
    DataParallel::attach(model);  // rank 0's weights everywhere
    const auto& layers = model.layers();
    refuse_parameters_outside(model, layers);
    std::vector<int64_t> sizes;
    for (auto& layer : layers) {
      int64_t count = 0;
      for (auto& p : layer->parameters())
        count += p.numel();
      sizes.push_back(count);
    }
    const std::vector<size_t> starts = pipeline_stage_starts(sizes, pp_, split_points_);
    std::unordered_map<const void*, int> owner;  // parameter -> the stage that registers it
    for (int s = 0; s < pp_; ++s) {
      for (size_t i = starts[s]; i < starts[s + 1]; ++i) {
        for (auto& p : layers[i]->parameters())
          owner[p.unsafeGetTensorImpl()] = s;
      }
    }
    for (size_t i = starts[stage_]; i < starts[stage_ + 1]; ++i)
      mine_.push_back(layers[i]);
    std::unordered_set<const void*> lenders;  // layers whose weights my layers borrow
    for (int s = 0; s < pp_; ++s) {
      for (size_t i = starts[s]; i < starts[s + 1]; ++i) {
        for (auto& b : layers[i]->borrowed_parameters()) {
          const int from = owner.at(b.unsafeGetTensorImpl());
          if (from == s) continue;
          if (s == stage_) tied_.push_back({b, from, false});
          if (from == stage_) tied_.push_back({b, s, true});
        }
      }
    }
    std::vector<at::Tensor> stage_parameters;
    for (auto& layer : mine_) {
      for (auto& p : with_low_rank_parameters(layer->parameters()))
        stage_parameters.push_back(p);
    }
    for (auto& t : tied_) {
      if (!t.owned) stage_parameters.push_back(t.parameter);
    }
    for (auto& p : stage_parameters)
      keep_.insert(p.unsafeGetTensorImpl());
    for (size_t i = 0; i < layers.size(); ++i) {
      bool used = i >= starts[stage_] && i < starts[stage_ + 1];
      for (auto& p : layers[i]->parameters())
        used = used || keep_.count(p.unsafeGetTensorImpl());
      if (!used) layers[i]->to(at::kCPU);
    }
    if (dp_ > 1) {
      std::vector<int> replicas;
      for (int r = 0; r < dp_; ++r)
        replicas.push_back(r * pp_ + stage_);
      stage_group_ = comm().subgroup(fmt::format("stage{}", stage_), replicas);
      all_reduce_ =
          std::make_unique<OverlappedAllReduce>(*stage_group_, stage_parameters, bucket_bytes());
    }
  }

  std::optional<at::Tensor> run_passes(PassContext& context) override {
    Passes passes(*this, context);
    const int64_t m = context.micro_batches;
    if (!context.train) {
      for (int64_t i = 0; i < m; ++i)
        passes.forward();
    } else if (!one_f_one_b_) {
      for (int64_t i = 0; i < m; ++i)
        passes.forward();
      for (int64_t i = 0; i < m; ++i)
        passes.backward();
    } else {
      const int64_t warmup = std::min<int64_t>(pp_ - 1 - stage_, m);
      for (int64_t i = 0; i < warmup; ++i)
        passes.forward();
      for (int64_t i = warmup; i < m; ++i) {
        passes.forward();
        passes.backward();
      }
      for (int64_t i = 0; i < warmup; ++i)
        passes.backward();
    }
    return passes.finish();
  }

  void finish_gradients(Model&) override {
    if (all_reduce_) all_reduce_->finish();
    // Tied weights: each of the two stages adds the other's gradient to its own.
    std::vector<Communicator::Pending> pending;
    std::vector<at::Tensor> theirs;
    for (size_t i = 0; i < tied_.size(); ++i) {
      const at::Tensor& grad = tied_[i].parameter.grad();
      const int peer = replica_ * pp_ + tied_[i].peer_stage;
      theirs.push_back(at::empty_like(grad));
      pending.push_back(comm().start_send(grad, peer, kTiedTag + static_cast<int>(i)));
      pending.push_back(comm().start_recv(theirs.back(), peer, kTiedTag + static_cast<int>(i)));
    }
    for (auto& p : pending)
      p.wait();
    for (size_t i = 0; i < tied_.size(); ++i)
      tied_[i].parameter.grad().add_(theirs[i]);
  }

  // Stages hold different gradients; a tied weight's second copy is not counted again, and
  // the replicas of a stage hold the same ones.
  at::Tensor global_norm(const at::Tensor& local_norm) override {
    at::Tensor squares = local_norm * local_norm;
    for (auto& t : tied_) {
      if (!t.owned) squares = squares - t.parameter.grad().to(at::kFloat).norm().pow(2);
    }
    return (sum(squares.clamp_min(0)) / static_cast<double>(dp_)).sqrt();
  }

  // Every rank reads the whole model (a stage's copy of another's layers stays unused) and the
  // optimizer state of its stage; the first replica's stage writes the weights its layers
  // register and their state (a tied weight: the stage that registers it), rank 0 the buffers.
  std::vector<StateSlice> state_slices(Model& model, torch::optim::Optimizer* optimizer) override {
    std::unordered_set<const void*> borrowed;
    for (const auto& t : tied_) {
      if (!t.owned) borrowed.insert(t.parameter.unsafeGetTensorImpl());
    }
    std::vector<StateSlice> slices;
    for (auto& slice : whole_state_slices(model, optimizer, rank() == 0)) {
      if (!slice.parameter.defined()) {
        slices.push_back(std::move(slice));
        continue;
      }
      const void* param = slice.parameter.unsafeGetTensorImpl();
      const bool state = slice.tensor.rfind("optimizer/", 0) == 0;
      if (state && !keep_.count(param)) continue;
      slice.writes = replica_ == 0 && keep_.count(param) && !borrowed.count(param);
      slices.push_back(std::move(slice));
    }
    return slices;
  }

  void shard_state(Model&, torch::optim::Optimizer& optimizer) override {
    keep_optimizer_state(optimizer, keep_);
  }

 private:
  struct Tied {
    at::Tensor parameter;
    int peer_stage;
    bool owned;  // registered by this stage's layers (else a replica of the peer's)
  };

  // One step's (or one evaluation's) passes on this stage.
  class Passes {
   public:
    Passes(Pipeline& pipeline, PassContext& context)
        : p_(pipeline),
          c_(context),
          start_(Clock::now()),
          loss_sum_(at::zeros({}, at::TensorOptions().device(context.device))) {}

    void forward() {
      const int64_t micro = forwards_++;
      Batch batch = c_.data.next();  // every stage reads, so all keep the same data position
      at::Tensor input =
          p_.first() ? batch.inputs.to(c_.device, /*non_blocking=*/true)
                     : receive_shaped(p_.comm(), p_.rank() - 1, activation_tags(micro), c_.device);
      if (!p_.first() && c_.train) input.requires_grad_(true);
      const auto start = Clock::now();
      InFlight f{input, {}, {}};
      {
        auto scope = c_.forward_scope();
        DrawScope draws(c_.draws(micro));
        at::Tensor x = input;
        for (auto& layer : p_.mine_)
          x = layer->forward(x);
        f.output = x;
        if (p_.last()) {
          const double per = c_.train ? static_cast<double>(c_.micro_batches) : 1.0;
          f.loss = c_.loss(x, batch.targets.to(c_.device, /*non_blocking=*/true)) / per;
        }
      }
      compute_ms_ += ms_since(start);
      if (p_.last()) {
        loss_sum_ += f.loss.detach();
      } else {
        start_shaped_send(p_.comm(), f.output.detach(), p_.rank() + 1, activation_tags(micro),
                          sends_);
      }
      if (!c_.train) return;
      live_.push_back(std::move(f));
      peak_ = std::max<int64_t>(peak_, static_cast<int64_t>(live_.size()));
    }

    void backward() {
      const int64_t micro = backwards_++;
      InFlight f = std::move(live_.front());
      live_.pop_front();
      if (p_.all_reduce_) p_.all_reduce_->arm(micro == c_.micro_batches - 1);
      at::Tensor grad;
      if (!p_.last()) {
        grad = at::empty_like(f.output);
        p_.comm().start_recv(grad, p_.rank() + 1, tag(micro, kGradient)).wait();
      }
      const auto start = Clock::now();
      if (p_.last()) {
        c_.scale_loss(f.loss).backward();
      } else {
        f.output.backward(grad);
      }
      compute_ms_ += ms_since(start);
      if (!p_.first()) {
        sends_.push_back(p_.comm().start_send(f.input.grad().contiguous(), p_.rank() - 1,
                                              tag(micro, kGradient)));
      }
    }

    at::Tensor finish() {
      for (auto& s : sends_)
        s.wait();
      if (c_.train) p_.times_ = PassTimes{compute_ms_, ms_since(start_), peak_};
      return loss_sum_;
    }

   private:
    struct InFlight {
      at::Tensor input, output, loss;
    };

    Pipeline& p_;
    PassContext& c_;
    Clock::time_point start_;
    at::Tensor loss_sum_;
    std::deque<InFlight> live_;
    std::vector<Communicator::Pending> sends_;
    int64_t forwards_ = 0, backwards_ = 0, peak_ = 0;
    double compute_ms_ = 0;
  };

  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == pp_ - 1; }

  int pp_, dp_;
  int64_t microbatches_;
  bool one_f_one_b_;
  std::string split_points_;
  int stage_ = 0, replica_ = 0;
  std::vector<std::shared_ptr<Layer>> mine_;
  std::vector<Tied> tied_;
  std::unordered_set<const void*> keep_;       // this stage's parameters, tied replicas included
  std::unique_ptr<Communicator> stage_group_;  // the replicas of this stage
  std::unique_ptr<OverlappedAllReduce> all_reduce_;
  PassTimes times_;
};

std::vector<ParamSpec> pipeline_params() {
  std::vector<ParamSpec> params = data_parallel_params();
  params.push_back(ParamSpec::integer("pp", 2, "pipeline stages (ranks per replica)").at_least(1));
  params.push_back(
      ParamSpec::integer("dp", 1, "replicas of the pipeline (data parallel)").at_least(1));
  params.push_back(ParamSpec::integer("microbatches", 8,
                                      "micro-batches per step, each of train.micro_batch "
                                      "sequences; train.batch_tokens must agree or be 0")
                       .at_least(1));
  params.push_back(ParamSpec::text("schedule", "1f1b",
                                   "gpipe = all forwards then all backwards; 1f1b = alternate, "
                                   "holding fewer activations")
                       .one_of({"gpipe", "1f1b"}));
  params.push_back(ParamSpec::text("split_points", "",
                                   "layer indices where stages 2..pp start, e.g. \"3\"; empty = "
                                   "balance the stages' parameter counts"));
  params.push_back(expert_parallel_param(/*built=*/false));
  return params;
}

const bool registered = ParallelRegistry::add(
    {"pipeline",
     "pipeline parallel: layers cut into pp stages fed micro-batches (gpipe or 1f1b), "
     "replicated dp times",
     pipeline_params()},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<ParallelStrategy> {
      refuse_unbuilt_expert_parallel(p, "pipeline");
      return std::make_shared<Pipeline>(p, device);
    });
const bool shaped = add_world_shape_rule("pipeline", pipeline_world_shape);

}  // namespace
}  // namespace kiln
