// Tensor parallelism inside one process: two threads play the two ranks of a group, each with
// its own copy of a model split by Model::split_for_tensor_parallel, their sums met in memory.
// Their forward and backward must give the whole model's logits and gradients, as one process
// computes them with LibTorch's ops.
#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/api/model.h"
#include "core/config/config.h"
#include "core/distributed/tensor_parallel_ops.h"
#include "core/util/error.h"

namespace kiln {
namespace {

TEST(TensorParallel, WholeFromSlicesUndoesSliceForRank) {
  const at::Tensor whole = torch::arange(36, torch::kFloat).reshape({6, 6});
  for (const ParameterSplit& split : {ParameterSplit{"qkv", 0, 3}, ParameterSplit{"rows", 0, 1},
                                      ParameterSplit{"columns", 1, 1}}) {
    SCOPED_TRACE(split.name);
    EXPECT_TRUE(torch::equal(
        whole_from_slices({slice_for_rank(whole, split, 0, 2), slice_for_rank(whole, split, 1, 2)},
                          split),
        whole));
  }
}

// The sum over two threads: each call waits for the other rank's call and both get the sum.
class TwoThreadSum {
 public:
  void add(int rank, at::Tensor& x) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t generation = generation_;
    parts_[rank] = x.clone();
    if (++arrived_ == 2) {
      sum_ = parts_[0] + parts_[1];
      arrived_ = 0;
      ++generation_;
      ready_.notify_all();
    } else {
      ready_.wait(lock, [&] { return generation_ != generation; });
    }
    x.copy_(sum_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  at::Tensor parts_[2], sum_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

std::shared_ptr<Model> build(const std::string& type, const std::vector<std::string>& sets) {
  ResolvedConfig c = load_config_text("[model]\ntype = \"" + type + "\"\n", "t.toml", sets);
  torch::manual_seed(7);
  return build_model(*ModelRegistry::create(type, c.params("model")));
}

struct Pass {
  at::Tensor logits;
  std::map<std::string, at::Tensor> grads;
};

Pass forward_backward(Model& model, const at::Tensor& tokens) {
  Pass pass;
  pass.logits = model.forward(tokens);
  (pass.logits * pass.logits).mean().backward();  // any loss that reads every logit
  for (const auto& item : model.named_parameters())
    pass.grads[item.key()] = item.value().grad().clone();
  return pass;
}

void expect_split_equals_whole(const std::string& type, const std::vector<std::string>& sets) {
  const at::Tensor tokens = torch::randint(0, 40, {2, 8}, torch::kLong);
  const Pass whole = forward_backward(*build(type, sets), tokens);
  TwoThreadSum sum;
  Pass ranks[2];
  std::vector<ParameterSplit> splits[2];
  // Built here: the threads would share the global generator that initialises them.
  std::shared_ptr<Model> models[2] = {build(type, sets), build(type, sets)};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto& model = models[rank];
      splits[rank] = model->split_for_tensor_parallel(
          tensor_parallel_group(rank, 2, [&sum, rank](at::Tensor& x) { sum.add(rank, x); }));
      ranks[rank] = forward_backward(*model, tokens);
    });
  }
  for (auto& t : threads)
    t.join();
  ASSERT_FALSE(splits[0].empty());
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(torch::allclose(ranks[rank].logits, whole.logits, 1e-5, 1e-6));
  for (const auto& [name, grad] : whole.grads) {
    SCOPED_TRACE(name);
    auto split = std::find_if(splits[0].begin(), splits[0].end(),
                              [&](const ParameterSplit& s) { return s.name == name; });
    if (split == splits[0].end()) {  // replicated: the whole gradient on both ranks
      EXPECT_TRUE(torch::allclose(ranks[0].grads.at(name), grad, 1e-5, 1e-7));
      EXPECT_TRUE(torch::allclose(ranks[1].grads.at(name), grad, 1e-5, 1e-7));
    } else {
      EXPECT_TRUE(torch::allclose(
          whole_from_slices({ranks[0].grads.at(name), ranks[1].grads.at(name)}, *split), grad, 1e-5,
          1e-7));
    }
  }
}

TEST(TensorParallel, GptSplitOverTwoRanksComputesTheWholeModel) {
  expect_split_equals_whole("gpt", {"model.n_layer=2", "model.n_head=4", "model.n_embd=32",
                                    "model.block_size=8", "model.vocab_size=40"});
}

TEST(TensorParallel, LlamaWithGroupedQueriesSplitOverTwoRanksComputesTheWholeModel) {
  expect_split_equals_whole("llama", {"model.n_layer=2", "model.n_head=4", "model.n_kv_head=2",
                                      "model.n_embd=32", "model.ffn_dim=48", "model.block_size=8",
                                      "model.vocab_size=40", "model.qk_norm=true"});
}

TEST(TensorParallel, PlansRefuseShapesThatDoNotDivide) {
  ResolvedConfig c = load_config_text("[model]\ntype = \"gpt\"\n", "t.toml", {"model.n_head=6"});
  auto gpt = ModelRegistry::create("gpt", c.params("model"));
  EXPECT_NO_THROW(gpt->check_tensor_parallel(3));
  try {
    gpt->check_tensor_parallel(4);
    ADD_FAILURE() << "n_head 6 over tp 4 was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_head = 6 does not divide over parallel.tp = 4"),
              std::string::npos)
        << e.what();
  }
  ResolvedConfig l = load_config_text("[model]\ntype = \"llama\"\n", "t.toml",
                                      {"model.n_head=4", "model.n_kv_head=1"});
  auto llama = ModelRegistry::create("llama", l.params("model"));
  EXPECT_THROW(llama->check_tensor_parallel(2), UserError);  // one key/value head
}

}  // namespace
}  // namespace kiln
