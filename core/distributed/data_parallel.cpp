#include "core/distributed/data_parallel.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

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
    // Weights kept in bf16 (an adapter's frozen base) go as fp32, which holds them exactly:
    // not every backend broadcasts bf16.
    if (flat[0].scalar_type() == at::kBFloat16) flat[0] = flat[0].to(at::kFloat);
    comm_->broadcast(flat, 0);
    copy_from_flat(flat[0], bucket);
  }
}

std::vector<std::string> DataParallel::gather_bytes(const std::string& bytes) {
  return gather_bytes_at(fmt::format("bytes/{}/", byte_gathers_++), bytes);
}

std::vector<std::string> DataParallel::gather_bytes_at(const std::string& key,
                                                       const std::string& bytes) {
  if (comm_->size() == 1) return {bytes};
  if (comm_->rank() != 0) {
    comm_->put(key + std::to_string(comm_->rank()), bytes);
    return {bytes};
  }
  std::vector<std::string> all = {bytes};
  for (int r = 1; r < comm_->size(); ++r)
    all.push_back(comm_->take(key + std::to_string(r)));
  return all;
}

std::string DataParallel::broadcast_bytes(const std::string& bytes) {
  const std::string key = fmt::format("broadcast/{}/", byte_gathers_++);
  if (comm_->rank() != 0) return comm_->take(key + std::to_string(comm_->rank()));
  for (int r = 1; r < comm_->size(); ++r)
    comm_->put(key + std::to_string(r), bytes);
  return bytes;
}

at::Tensor DataParallel::sum(const at::Tensor& value) {
  std::vector<at::Tensor> one = {value.detach().clone()};
  comm_->all_reduce_sum(one);
  return one[0];
}

OverlappedAllReduce::OverlappedAllReduce(Communicator& comm,
                                         const std::vector<at::Tensor>& parameters,
                                         int64_t bucket_bytes) {
  if (comm.size() == 1) return;  // nothing to average
  std::vector<at::Tensor> trained;
  for (const auto& p : parameters) {
    if (p.requires_grad()) trained.push_back(p);
  }
  GradientBuckets::Rules rules;
  const std::vector<at::Tensor> reversed(trained.rbegin(), trained.rend());
  size_t index = trained.size();
  for (const auto& group : make_buckets(reversed, bucket_bytes)) {
    GradientBuckets::Members members;
    for (size_t k = 0; k < group.size(); ++k)
      members.push_back(--index);
    rules.buckets.push_back(std::move(members));
  }
  rules.send = [&comm](at::Tensor& flat, size_t) {
    std::vector<at::Tensor> one = {flat};
    return comm.start_all_reduce_sum(one);
  };
  const double scale = 1.0 / static_cast<double>(comm.size());
  rules.land = [trained, scale](const GradientBuckets::Members& members, size_t,
                                const at::Tensor& flat) {
    flat.mul_(scale);
    int64_t offset = 0;
    for (size_t i : members) {
      const at::Tensor& p = trained[i];
      if (p.grad().defined()) p.grad().detach().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
  };
  buckets_ = std::make_unique<GradientBuckets>(trained, std::move(rules));
}

OverlappedAllReduce::~OverlappedAllReduce() = default;

void OverlappedAllReduce::arm(bool final_micro_step) {
  if (buckets_) buckets_->arm(final_micro_step);
}

void OverlappedAllReduce::finish() {
  if (!buckets_) return;
  buckets_->flush();
  buckets_->arm(false);
}

}  // namespace kiln
