// Experts split over two ranks, the ranks played by two threads whose exchange is a mailbox: each
// token-expert assignment comes back from the rank holding its expert as that expert's SwiGLU of
// the token, computed here directly from the whole experts, one assignment at a time.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include <torch/torch.h>

#include "core/layers/expert_exchange.h"
#include "core/layers/moe.h"

namespace kiln {
namespace {

constexpr int64_t kEmbd = 8, kExperts = 4, kTopK = 2, kFfn = 6, kTokens = 12;

// What two ranks put in and take out of an all-to-all, one exchange at a time.
struct Mailbox {
  std::barrier<> meet{2};
  at::Tensor parts[2][2];  // [from][to]
};

ExpertParallelGroup rank_of(int rank, Mailbox& box) {
  ExpertParallelGroup group;
  group.rank = rank;
  group.size = 2;
  group.exchange = [rank, &box](const at::Tensor& rows, const std::vector<int64_t>& sent,
                                const std::vector<int64_t>& received) {
    const auto parts = rows.split_with_sizes(sent);
    for (int to = 0; to < 2; ++to)
      box.parts[rank][to] = parts[static_cast<size_t>(to)].clone();
    box.meet.arrive_and_wait();
    const auto out = at::cat({box.parts[0][rank], box.parts[1][rank]});
    box.meet.arrive_and_wait();
    EXPECT_EQ(out.size(0), received[0] + received[1]);
    return out;
  };
  return group;
}

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down) {
  const auto halves = at::linear(x, gate_up).chunk(2, -1);
  return at::linear(at::silu(halves[0]) * halves[1], down);
}

TEST(ExpertExchange, EachAssignmentComesBackFromTheRankHoldingItsExpert) {
  torch::manual_seed(3);
  const auto gate_up = torch::randn({kExperts, 2 * kFfn, kEmbd});
  const auto down = torch::randn({kExperts, kEmbd, kFfn});
  // Rank 1's tokens all choose experts 0 and 1 (rank 0's), so some ranks receive nothing back
  // from others; rank 0's choose across both ranks.
  const at::Tensor choices[2] = {torch::randint(0, kExperts, {kTokens, kTopK}, torch::kLong),
                                 torch::randint(0, 2, {kTokens, kTopK}, torch::kLong)};
  const at::Tensor tokens[2] = {torch::randn({kTokens, kEmbd}), torch::randn({kTokens, kEmbd})};
  Mailbox box;
  at::Tensor outputs[2];
  Dispatch dispatches[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      dispatches[r] = dispatch(choices[r], kExperts, -1);
      const auto rows = tokens[r].index_select(0, at::floor_divide(dispatches[r].order, kTopK));
      outputs[r] = experts_over_group(rows, dispatches[r], gate_up.narrow(0, 2 * r, 2),
                                      down.narrow(0, 2 * r, 2), rank_of(r, box));
    });
  }
  for (auto& rank : ranks)
    rank.join();
  for (int r = 0; r < 2; ++r) {
    const auto flat = choices[r].reshape(-1);
    ASSERT_EQ(outputs[r].size(0), flat.numel());
    for (int64_t i = 0; i < outputs[r].size(0); ++i) {
      const int64_t assignment = dispatches[r].order[i].item<int64_t>();
      const int64_t expert = flat[assignment].item<int64_t>();
      const auto expected = swiglu(tokens[r][assignment / kTopK], gate_up[expert], down[expert]);
      EXPECT_TRUE(torch::allclose(outputs[r][i], expected, 1e-5, 1e-5))
          << "rank " << r << " assignment " << assignment << " expert " << expert;
    }
  }
}

}  // namespace
}  // namespace kiln
