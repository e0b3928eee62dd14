// The one bucketed gradient reduction (core/distributed/gradient_buckets.h), on a stand-in
// collective: "sending" a bucket logs it and its wait doubles the buffer, which is what an
// all-reduce sum over two ranks holding the same gradients gives. Each landed buffer is checked
// against the gradients LibTorch's autograd left, packed here independently.
#include "core/distributed/gradient_buckets.h"

#include <map>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace kiln {
namespace {

struct Log {
  std::vector<std::string> events;
  std::map<size_t, at::Tensor> landed;  // bucket -> its landed buffer
  std::map<size_t, GradientBuckets::Members> members;
};

GradientBuckets::Rules doubling_rules(Log& log) {
  GradientBuckets::Rules rules;
  rules.send = [&log](at::Tensor& flat, size_t bucket) {
    log.events.push_back("send " + std::to_string(bucket));
    Communicator::Pending pending;
    pending.add([flat] { flat.mul_(2); });
    return pending;
  };
  rules.land = [&log](const GradientBuckets::Members& members, size_t bucket,
                      const at::Tensor& flat) {
    log.events.push_back("land " + std::to_string(bucket));
    log.landed[bucket] = flat.clone();
    log.members[bucket] = members;
  };
  return rules;
}

// Three linear layers; backward completes their gradients last layer first.
struct Net {
  torch::nn::Sequential layers{torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 8),
                               torch::nn::Tanh(), torch::nn::Linear(8, 2)};
  std::vector<at::Tensor> parameters() { return layers->parameters(); }
  void backward() {
    torch::manual_seed(0);
    layers->forward(torch::randn({5, 4})).pow(2).sum().backward();
  }
};

at::Tensor packed(const std::vector<at::Tensor>& parameters, const GradientBuckets::Members& m) {
  std::vector<at::Tensor> parts;
  for (size_t i : m) {
    const at::Tensor& g = parameters[i].grad();
    parts.push_back(g.defined() ? g.reshape(-1) : at::zeros({parameters[i].numel()}));
  }
  return at::cat(parts);
}

TEST(GradientBuckets, FixedBucketsSendDuringBackwardAndLandTheSumOfTheirGradients) {
  Net net;
  auto parameters = net.parameters();  // w0 b0 w1 b1 w2 b2
  Log log;
  auto rules = doubling_rules(log);
  rules.buckets = {{5, 4}, {3, 2}, {1, 0}};
  GradientBuckets buckets(parameters, rules);
  buckets.arm(true);
  net.backward();
  // Every bucket closed in backward, none landed before flush: any number may be on the wire.
  EXPECT_EQ(log.events, (std::vector<std::string>{"send 0", "send 1", "send 2"}));
  buckets.flush();
  EXPECT_EQ(log.landed.size(), 3u);
  for (const auto& [bucket, flat] : log.landed)
    EXPECT_TRUE(at::allclose(flat, 2 * packed(parameters, log.members[bucket]))) << bucket;
}

TEST(GradientBuckets, OneInFlightLandsEachBucketBeforeTheNextIsSent) {
  Net net;
  Log log;
  auto rules = doubling_rules(log);
  rules.buckets = {{5, 4}, {3, 2}, {1, 0}};
  rules.max_in_flight = 1;
  GradientBuckets buckets(net.parameters(), rules);
  buckets.arm(true);
  net.backward();
  buckets.flush();
  EXPECT_EQ(log.events,
            (std::vector<std::string>{"send 0", "land 0", "send 1", "land 1", "send 2", "land 2"}));
}

TEST(GradientBuckets, UnarmedMicroStepsAreLeftAloneAndMissingGradientsAreZeros) {
  Net net;
  auto parameters = net.parameters();
  auto unused = torch::randn({3}, torch::requires_grad());  // no gradient ever reaches it
  parameters.push_back(unused);
  Log log;
  auto rules = doubling_rules(log);
  rules.buckets = {{5, 4, 6}, {3, 2, 1, 0}};
  GradientBuckets buckets(parameters, rules);
  buckets.arm(false);
  net.backward();
  buckets.flush();
  EXPECT_TRUE(log.events.empty());
  buckets.arm(true);
  net.backward();  // the gradients accumulate: twice one backward's
  buckets.flush();
  // Bucket 0 waited for `unused` in vain: flush closed it, with zeros in its place.
  EXPECT_EQ(log.events, (std::vector<std::string>{"send 1", "send 0", "land 1", "land 0"}));
  EXPECT_TRUE(at::equal(log.landed[0].narrow(0, log.landed[0].numel() - 3, 3), at::zeros({3})));
  for (const auto& [bucket, flat] : log.landed)
    EXPECT_TRUE(at::allclose(flat, 2 * packed(parameters, log.members[bucket]))) << bucket;
}

TEST(GradientBuckets, FillOrderBucketsCloseAtTheirSizeAndWhenAskedWithContributionsAsGiven) {
  Net net;
  auto parameters = net.parameters();
  Log log;
  auto rules = doubling_rules(log);
  rules.fill_bytes = 8 * 8 * 4;  // the middle weight's bytes
  std::vector<size_t> asked;
  rules.contribute = [&](size_t i) {
    asked.push_back(i);
    return parameters[i].grad() * 10;
  };
  GradientBuckets buckets(parameters, rules);
  buckets.arm(true);
  net.backward();
  buckets.close_filling();
  buckets.flush();
  EXPECT_EQ(asked.size(), 6u);
  size_t members = 0;
  for (const auto& [bucket, flat] : log.landed) {
    members += log.members[bucket].size();
    EXPECT_TRUE(at::allclose(flat, 20 * packed(parameters, log.members[bucket]))) << bucket;
  }
  EXPECT_EQ(members, 6u);
  EXPECT_GE(log.landed.size(), 2u);  // the 256-byte weight filled one on its own
  EXPECT_GT(buckets.take_peak_bytes(), 0);
}

}  // namespace
}  // namespace kiln
