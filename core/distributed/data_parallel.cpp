#include "core/distributed/data_parallel.h"

#include <algorithm>
#include <mutex>
#include <sstream>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "core/api/model.h"
#include "core/util/torch_compat.h"

namespace kiln {

std::vector<ParamSpec> data_parallel_params() {
  return {ParamSpec::text("backend", "auto", "c10d backend; auto = nccl on CUDA, gloo on CPU")
              .one_of({"auto", "gloo", "nccl"}),
          ParamSpec::real("bucket_mb", 25.0, "gradient bucket size for the collectives")
              .at_least(0.001),
          ParamSpec::integer("timeout_s", 300, "seconds to wait for peers and collectives")
              .at_least(1)};
}

void gather_optimizer_state(Communicator& comm, torch::optim::Optimizer& optimizer,
                            const std::vector<int>& senders, const std::string& key) {
  if (comm.rank() != 0) {
    if (std::find(senders.begin(), senders.end(), comm.rank()) == senders.end()) return;
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    std::ostringstream bytes;
    archive.save_to(bytes);
    comm.put(key + std::to_string(comm.rank()), bytes.str());
    return;
  }
  // Load each part into an emptied state and move its entries aside, then put all back.
  auto& state = optimizer.state();
  std::vector<std::pair<std::decay_t<decltype(state.begin()->first)>,
                        std::decay_t<decltype(state.begin()->second)>>>
      whole;
  auto move_aside = [&] {
    for (auto& [k, v] : state) {
      if (v) whole.emplace_back(k, std::move(v));
    }
    state.clear();
  };
  move_aside();
  const at::Device device = optimizer.param_groups().front().params().front().device();
  for (int sender : senders) {
    std::istringstream bytes(comm.take(key + std::to_string(sender)));
    torch::serialize::InputArchive archive;
    archive.load_from(bytes, device);
    optimizer.load(archive);
    move_aside();
  }
  for (auto& [k, v] : whole)
    state[k] = std::move(v);
}

void keep_optimizer_state(torch::optim::Optimizer& optimizer,
                          const std::unordered_set<const void*>& keep) {
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      if (!keep.count(p.unsafeGetTensorImpl()))
        optimizer.state().erase(compat::optimizer_state_key(p));
    }
  }
}

namespace {

std::unique_ptr<Communicator> open_communicator(const Params& p, c10::DeviceType device) {
  return std::make_unique<Communicator>(read_world_env(), p.text("backend"),
                                        device == c10::DeviceType::CUDA,
                                        std::chrono::seconds(p.integer("timeout_s")));
}

}  // namespace

DataParallel::DataParallel(const Params& params, c10::DeviceType device)
    : comm_(open_communicator(params, device)),
      bucket_bytes_(static_cast<int64_t>(params.real("bucket_mb") * (1 << 20))) {}

void DataParallel::attach(Model& model) {
  if (comm_->size() == 1) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors = model.parameters();
  for (auto& b : model.buffers())
    tensors.push_back(b);
  for (auto& bucket : make_buckets(tensors, bucket_bytes_)) {
    std::vector<at::Tensor> flat = {flatten(bucket)};
    comm_->broadcast(flat, 0);
    copy_from_flat(flat[0], bucket);
  }
}

std::vector<std::string> DataParallel::gather_bytes(const std::string& bytes) {
  const std::string key = fmt::format("bytes/{}/", byte_gathers_++);
  if (comm_->rank() != 0) {
    comm_->put(key + std::to_string(comm_->rank()), bytes);
    return {bytes};
  }
  std::vector<std::string> all = {bytes};
  for (int r = 1; r < comm_->size(); ++r)
    all.push_back(comm_->take(key + std::to_string(r)));
  return all;
}

at::Tensor DataParallel::sum(const at::Tensor& value) {
  std::vector<at::Tensor> one = {value.detach().clone()};
  comm_->all_reduce_sum(one);
  return one[0];
}

std::vector<std::vector<at::Tensor>> make_buckets(const std::vector<at::Tensor>& tensors,
                                                  int64_t bytes) {
  std::vector<std::vector<at::Tensor>> buckets;
  int64_t filled = 0;
  for (const auto& t : tensors) {
    if (buckets.empty() || (filled > 0 && filled + static_cast<int64_t>(t.nbytes()) > bytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(t);
    filled += static_cast<int64_t>(t.nbytes());
  }
  return buckets;
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> pieces;
  for (const auto& t : tensors)
    pieces.push_back(t.detach().reshape(-1));
  return at::cat(pieces);
}

void copy_from_flat(const at::Tensor& flat, const std::vector<at::Tensor>& into) {
  int64_t offset = 0;
  for (const auto& t : into) {
    t.detach().copy_(flat.narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
}

std::vector<HeldAccumulator> on_gradient_accumulated(const std::vector<at::Tensor>& parameters,
                                                     const std::function<void(size_t)>& ready) {
  std::vector<HeldAccumulator> accumulators;
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters[i]);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [ready, i](const torch::autograd::variable_list& outputs,
                   const torch::autograd::variable_list&) {
          ready(i);
          return outputs;
        }));
    accumulators.push_back(std::make_shared<decltype(accumulator)>(std::move(accumulator)));
  }
  return accumulators;
}

struct OverlappedAllReduce::State {
  struct Bucket {
    std::vector<at::Tensor> parameters;
    size_t waiting = 0;  // gradients not yet complete in this backward
    bool started = false;
    at::Tensor flat;
    Communicator::Pending pending;
  };

  Communicator* comm;
  std::vector<Bucket> buckets;
  std::vector<HeldAccumulator> accumulators;  // keep the hooks alive
  std::mutex mutex;                           // autograd may run hooks on its device threads
  bool armed = false;

  // Starts bucket `b`'s all-reduce over the gradients its parameters have.
  void start(Bucket& bucket) {
    std::vector<at::Tensor> grads;
    for (auto& p : bucket.parameters) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    bucket.started = true;
    if (grads.empty()) return;
    bucket.flat = flatten(grads);
    std::vector<at::Tensor> one = {bucket.flat};
    bucket.pending = comm->start_all_reduce_sum(one);
  }

  void gradient_ready(size_t b) {
    std::lock_guard<std::mutex> lock(mutex);
    Bucket& bucket = buckets[b];
    if (!armed || bucket.started) return;
    if (--bucket.waiting == 0) start(bucket);
  }
};

OverlappedAllReduce::OverlappedAllReduce(Communicator& comm,
                                         const std::vector<at::Tensor>& parameters,
                                         int64_t bucket_bytes)
    : state_(std::make_shared<State>()) {
  state_->comm = &comm;
  std::vector<at::Tensor> reversed;
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    if (it->requires_grad()) reversed.push_back(*it);
  }
  for (auto& group : make_buckets(reversed, bucket_bytes))
    state_->buckets.emplace_back().parameters = std::move(group);
  if (comm.size() == 1) return;  // nothing to overlap with
  for (size_t b = 0; b < state_->buckets.size(); ++b) {
    std::weak_ptr<State> weak = state_;
    auto hooked = on_gradient_accumulated(state_->buckets[b].parameters, [weak, b](size_t) {
      if (auto state = weak.lock()) state->gradient_ready(b);
    });
    state_->accumulators.insert(state_->accumulators.end(), hooked.begin(), hooked.end());
  }
}

OverlappedAllReduce::~OverlappedAllReduce() = default;

void OverlappedAllReduce::arm(bool final_micro_step) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->armed = final_micro_step;
  for (auto& bucket : state_->buckets) {
    bucket.waiting = bucket.parameters.size();
    bucket.started = false;
  }
}

void OverlappedAllReduce::finish() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->armed = false;
  if (state_->comm->size() == 1) return;
  const double scale = 1.0 / static_cast<double>(state_->comm->size());
  for (auto& bucket : state_->buckets) {
    if (!bucket.started) state_->start(bucket);
  }
  for (auto& bucket : state_->buckets) {
    if (!bucket.flat.defined()) continue;
    bucket.pending.wait();
    bucket.flat.mul_(scale);
    std::vector<at::Tensor> grads;
    for (auto& p : bucket.parameters) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    copy_from_flat(bucket.flat, grads);
    bucket.flat = at::Tensor();
  }
}

}  // namespace kiln
