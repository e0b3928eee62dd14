// run.device's resolution (core/train/assemble.cpp) and, on a GPU, the current CUDA device that
// assembly sets: every CUDA call that takes no device must follow the run's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <fmt/format.h>

#include "core/api/tokenizer.h"
#include "core/config/config.h"
#include "core/train/assemble.h"
#include "core/train/run_device.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::write_text;

class Device : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string alphabet = "\n";  // every printable character: the chat template's too
    for (char c = 0x20; c < 0x7f; ++c)
      alphabet += c;
    auto tokenizer = new_tokenizer("char");
    tokenizer->fit(alphabet);
    save_tokenizer(*tokenizer, "char", dir_.str());
    write_text(dir_ / "records.jsonl", R"({"prompt": "ab", "response": "cd"})"
                                       "\n");
    write_text(dir_ / "tiny.toml", fmt::format(R"([run]
threads = 1
[model]
type = "gpt"
n_layer = 1
n_head = 2
n_embd = 16
block_size = 32
vocab_size = 128
[data]
type = "sft"
train = "{0}/records.jsonl"
val = "{0}/records.jsonl"
tokenizer = "{0}"
[train]
steps = 1
micro_batch = 1
seq_len = 32
[eval]
every = 0
)",
                                               dir_.str()));
  }

  AssembledRun assemble_on(const std::string& device) {
    return assemble(load_config(dir_ / "tiny.toml", {"run.device=\"" + device + "\""}));
  }

  testing::TempDir dir_;
};

// The process's current device of `type`, as every device-less CUDA call sees it.
int current_index(c10::DeviceType type) {
  return c10::impl::getDeviceGuardImpl(type)->getDevice().index();
}

TEST_F(Device, WithoutAGpuAutoIsTheCpuAndSaysWhyAndCudaIsRefused) {
  if (torch::cuda::device_count() > 0) GTEST_SKIP() << "SKIP: this machine has a GPU";
  const AssembledRun run = assemble_on("auto");
  EXPECT_TRUE(run.device.is_cpu());
  EXPECT_NE(run.device_note.find("run.device = auto: "), std::string::npos) << run.device_note;
  EXPECT_EQ(run.current_device, nullptr);  // nothing to make current on the CPU
  const std::string refused = testing::user_error_of([&] { assemble_on("cuda"); });
  EXPECT_NE(refused.find("run.device = \"cuda\" but "), std::string::npos) << refused;
  EXPECT_NE(refused.find("use \"cpu\" or \"auto\""), std::string::npos) << refused;
}

TEST_F(Device, AGpuNumberPastTheMachinesIsRefusedWithTheRange) {
  const int count = static_cast<int>(torch::cuda::device_count());
  if (count == 0) GTEST_SKIP() << "SKIP: no GPU: cuda:N is refused as any cuda is (above)";
  const std::string refused =
      testing::user_error_of([&] { assemble_on(fmt::format("cuda:{}", count)); });
  EXPECT_NE(refused.find(fmt::format("this machine has {} CUDA device(s)", count)),
            std::string::npos)
      << refused;
}

// Assembly makes the run's GPU current, and the run gives the previous one back when it ends.
// On a one-GPU machine that GPU is 0 as before; on several, the last one tells the two apart.
TEST_F(Device, AssemblyMakesTheRunsGpuTheCurrentDevice) {
  const int count = static_cast<int>(torch::cuda::device_count());
  if (count == 0)
    GTEST_SKIP() << "SKIP: no GPU here: the CUDA build's check runs on the GPU machine";
  const int before = current_index(c10::kCUDA);
  const int last = count - 1;
  {
    const AssembledRun run = assemble_on(fmt::format("cuda:{}", last));
    EXPECT_EQ(run.device.index(), last);
    ASSERT_NE(run.current_device, nullptr);
    EXPECT_EQ(current_index(c10::kCUDA), last);
    // A tensor made with no device named lands on the run's GPU.
    EXPECT_EQ(torch::zeros({2}, torch::TensorOptions().device(torch::kCUDA)).device().index(),
              last);
  }
  EXPECT_EQ(current_index(c10::kCUDA), before);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// run.threads, else the user's OMP_NUM_THREADS (its first number, as OpenMP reads "4,2"), fix a
// run's threads; torchrun's own OMP_NUM_THREADS=1 for its workers does not; anything else leaves
// the count to the machine's share (0).
TEST(FixedThreads, RunThreadsThenTheUsersOmpNumThreadsButNotTorchruns) {
  testing::ScopedEnv torchrun("TORCHELASTIC_RUN_ID", nullptr);
  RunOptions run;
  {
    testing::ScopedEnv omp("OMP_NUM_THREADS", nullptr);
    EXPECT_EQ(fixed_threads(run), 0);
    run.threads = 3;
    EXPECT_EQ(fixed_threads(run), 3);
    run.threads = 0;
  }
  for (const auto& [value, threads] : std::vector<std::pair<const char*, int>>{
           {"4", 4}, {"4,2", 4}, {"0", 0}, {"lots", 0}, {"", 0}}) {
    testing::ScopedEnv omp("OMP_NUM_THREADS", value);
    EXPECT_EQ(fixed_threads(run), threads) << "OMP_NUM_THREADS=" << value;
  }
  testing::ScopedEnv omp("OMP_NUM_THREADS", "1");
  testing::ScopedEnv elastic("TORCHELASTIC_RUN_ID", "none");
  EXPECT_EQ(fixed_threads(run), 0);
}

}  // namespace
}  // namespace kiln
