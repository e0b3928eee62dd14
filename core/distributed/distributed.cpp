#include "core/distributed/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <thread>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "core/distributed/backend_choice.h"
#include "core/distributed/roll_call.h"
#include "core/util/env.h"
#include "core/util/error.h"
#include "core/util/text.h"
#include "core/util/torch_compat.h"

namespace kiln {

struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  std::chrono::milliseconds timeout{0};
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#ifdef USE_C10D_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif

  // Calls fn(process group) and waits for the work it returns.
  template <class Fn>
  void run(Fn&& fn) {
#ifdef USE_C10D_NCCL
    if (nccl) {
      fn(*nccl);
      return;
    }
#endif
    fn(*gloo);
  }

  // What waits for `work`, then runs `then`. Gloo's worker thread marks a collective finished
  // before it drops the work, and with it the work's tensors: on Gloo the wait also lasts until
  // it has (50 ms at most), so a finished collective's buffers are freed when the wait returns,
  // not a thread switch later (which made the memory measured between steps vary with load).
  template <class Work>
  std::function<void()> awaiting(c10::intrusive_ptr<Work> work, std::function<void()> then = {}) {
    return [work = std::move(work), then = std::move(then), settle = gloo != nullptr] {
      work->wait();
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      while (settle && work.use_count() > 1 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      if (then) then();
    };
  }
};

Communicator::Communicator(const WorldEnv& env, const std::string& backend, bool on_cuda,
                           std::chrono::milliseconds timeout)
    : env_(env), impl_(std::make_unique<Impl>()) {
  if (env.world_size == 1) {  // nothing to talk to: no store, no port, no-op collectives
    backend_ = choose_backend(backend, on_cuda ? 0 : -1, on_cuda ? -1 : 0);
    return;
  }
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(env.master_port);
    options.isServer = env.rank == 0;
    options.numWorkers = env.world_size;
    options.waitWorkers = true;
    options.timeout = timeout;
    compat::use_classic_store_server(options);
    impl_->store = c10::make_intrusive<c10d::PrefixStore>(
        "kiln", c10::make_intrusive<c10d::TCPStore>(env.master_addr, options));
  } catch (const c10::Error& e) {
    throw UserError(
        fmt::format("rank {} of {} could not join the others at {}:{} within {} s: "
                    "{} (is every rank started, and the port free?)",
                    env.rank, env.world_size, env.master_addr, env.master_port,
                    timeout.count() / 1000, e.what_without_backtrace()));
  }
  backend_ = agree_on_backend(*impl_->store, env_, backend, on_cuda);
  join(timeout);
}

Communicator::Communicator(const WorldEnv& env, const std::string& backend,
                           std::unique_ptr<Impl> impl)
    : env_(env), backend_(backend), impl_(std::move(impl)) {}

// The process group over impl_->store, for env_'s rank and size.
void Communicator::join(std::chrono::milliseconds timeout) {
  impl_->timeout = timeout;
  publish_whereabouts(*impl_->store, env_.rank);
  try {
    if (backend_ == "nccl") {
#ifdef USE_C10D_NCCL
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env_.rank,
                                                                env_.world_size, nccl_options);
      return;
#else
      throw UserError(
          "parallel.backend = \"nccl\" but this LibTorch was built without NCCL: use \"gloo\"");
#endif
    }
    using Gloo = c10d::ProcessGroupGloo;
    auto gloo_options = Gloo::Options::create(timeout);
    gloo_options->devices.push_back(env_.bind_address.empty()
                                        ? Gloo::createDefaultDevice()
                                        : Gloo::createDeviceForHostname(env_.bind_address));
    impl_->gloo = c10::make_intrusive<Gloo>(impl_->store, env_.rank, env_.world_size, gloo_options);
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("rank {} of {} could not set up its {} process group: {}",
                                env_.rank, env_.world_size, backend_, e.what_without_backtrace()));
  }
}

std::unique_ptr<Communicator> Communicator::subgroup(const std::string& name,
                                                     const std::vector<int>& ranks) {
  WorldEnv env = env_;
  env.world_size = static_cast<int>(ranks.size());
  env.rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), env_.rank) - ranks.begin());
  if (env.rank == env.world_size) throw std::logic_error("subgroup without this rank");
  auto impl = std::make_unique<Impl>();
  std::unique_ptr<Communicator> group(new Communicator(env, backend_, std::move(impl)));
  if (env.world_size == 1) return group;
  group->impl_->store = c10::make_intrusive<c10d::PrefixStore>(name, impl_->store);
  group->join(impl_->timeout);
  return group;
}

Communicator::~Communicator() = default;

void Communicator::Pending::wait() {
  try {
    for (auto& w : waits_)
      w();
  } catch (const PeerLostError&) {
    throw;
  } catch (const std::exception& e) {  // c10's errors, and Gloo's (an IoException on a timeout)
    waits_.clear();
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    if (owner_) owner_->explain_failure(c10_error ? c10_error->what_without_backtrace() : e.what());
    throw;
  }
  waits_.clear();
}

void Communicator::explain_failure(const std::string& what) const {
  if (!impl_->store) return;
  const std::vector<std::string> silent = silent_ranks(impl_->store, env_.rank, env_.world_size);
  if (silent.empty()) return;
  throw PeerLostError(fmt::format(
      "rank {} of {}: {} stopped answering within parallel.timeout_s = {} s ({}): this rank "
      "stops too; once every rank runs again, `kiln resume` continues from the latest snapshot",
      env_.rank, env_.world_size, kiln::join(silent, ", "), impl_->timeout.count() / 1000,
      what.substr(0, what.find('\n'))));
}

// c10d's tensor lists mean one tensor per local device, so each tensor is its own collective:
// all are launched, then all awaited, so they overlap in the backend's threads.
Communicator::Pending Communicator::start_all_reduce_sum(std::vector<at::Tensor>& tensors) {
  Pending pending(this);
  if (env_.world_size == 1) return pending;
  impl_->run([&](auto& group) {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one = {t};
      pending.add(impl_->awaiting(group.allreduce(one)));
    }
  });
  return pending;
}

void Communicator::all_reduce_max(std::vector<at::Tensor>& tensors) {
  if (env_.world_size == 1) return;
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  Pending pending(this);
  impl_->run([&](auto& group) {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one = {t};
      pending.add(impl_->awaiting(group.allreduce(one, options)));
    }
  });
  pending.wait();
}

void Communicator::broadcast(std::vector<at::Tensor>& tensors, int root) {
  if (env_.world_size == 1) return;
  c10d::BroadcastOptions options;
  options.rootRank = root;
  Pending pending(this);
  impl_->run([&](auto& group) {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one = {t};
      pending.add(impl_->awaiting(group.broadcast(one, options)));
    }
  });
  pending.wait();
}

Communicator::Pending Communicator::start_all_gather(const at::Tensor& shard,
                                                     const std::vector<at::Tensor>& slots) {
  Pending pending(this);
  if (env_.world_size == 1) {
    slots.front().copy_(shard);
    return pending;
  }
  // Gloo gathers no bf16 or fp16: such a shard (a frozen base kept in bf16, adapter.base_dtype)
  // travels widened to fp32, which holds it exactly, and lands narrowed into its slots.
  const auto type = shard.scalar_type();
  const bool widen = backend_ == "gloo" && (type == at::kBFloat16 || type == at::kHalf);
  std::vector<at::Tensor> wire = slots;
  if (widen) {
    for (at::Tensor& slot : wire)
      slot = at::empty(slot.sizes(), slot.options().dtype(at::kFloat));
  }
  std::vector<std::vector<at::Tensor>> outputs = {wire};
  std::vector<at::Tensor> inputs = {widen ? shard.to(at::kFloat) : shard};
  impl_->run([&](auto& group) {
    pending.add(impl_->awaiting(group.allgather(outputs, inputs), [inputs, wire, slots, widen] {
      for (size_t r = 0; widen && r < slots.size(); ++r)
        slots[r].copy_(wire[r]);
    }));
  });
  return pending;
}

Communicator::Pending Communicator::start_reduce_sum(const at::Tensor& tensor, int root) {
  Pending pending(this);
  if (env_.world_size == 1) return pending;
  c10d::ReduceOptions options;
  options.rootRank = root;
  std::vector<at::Tensor> one = {tensor};
  impl_->run([&](auto& group) {
    pending.add(impl_->awaiting(group.reduce(one, options), [keep = tensor] {}));
  });
  return pending;
}

at::Tensor Communicator::all_to_all(const at::Tensor& input, std::vector<int64_t> sent,
                                    std::vector<int64_t> received) {
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] = std::accumulate(received.begin(), received.end(), int64_t{0});
  at::Tensor output = at::empty(shape, input.options());
  if (env_.world_size == 1) return output.copy_(input);
  at::Tensor wire = input.contiguous();
  Pending pending(this);
  impl_->run([&](auto& group) {
    pending.add(impl_->awaiting(group.all_to_all_single(output, wire, received, sent)));
  });
  pending.wait();
  return output;
}

void Communicator::barrier() {
  if (env_.world_size == 1) return;
  Pending pending(this);
  impl_->run([&](auto& group) { pending.add(impl_->awaiting(group.barrier())); });
  pending.wait();
}

Communicator::Pending Communicator::start_send(const at::Tensor& tensor, int peer, int tag) {
  Pending pending(this);
  std::vector<at::Tensor> one = {tensor};
  impl_->run([&](auto& group) {
    pending.add(impl_->awaiting(group.send(one, peer, tag), [keep = tensor] {}));
  });
  return pending;
}

Communicator::Pending Communicator::start_recv(const at::Tensor& tensor, int peer, int tag) {
  Pending pending(this);
  std::vector<at::Tensor> one = {tensor};
  impl_->run([&](auto& group) {
    pending.add(impl_->awaiting(group.recv(one, peer, tag), [keep = tensor] {}));
  });
  return pending;
}

void Communicator::put(const std::string& key, const std::string& bytes) {
  if (env_.world_size == 1) throw std::logic_error("Communicator::put in a world of one");
  impl_->store->set(key, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

std::string Communicator::take(const std::string& key) {
  if (env_.world_size == 1) throw std::logic_error("Communicator::take in a world of one");
  std::vector<uint8_t> bytes;
  try {
    bytes = impl_->store->get(key);  // waits up to the store's timeout
  } catch (const c10::Error& e) {
    // The rank that was to put it may be gone: the roll call names it.
    explain_failure(e.what_without_backtrace());
    throw;
  }
  impl_->store->deleteKey(key);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace kiln
