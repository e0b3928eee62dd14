#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include "core/api/parallel.h"
#include "core/api/precision.h"
#include "core/config/config.h"
#include "core/kernels/precision_verdicts.h"
#include "core/train/loss_scaler.h"
#include "core/train/precision_workload.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/torch_compat.h"
#include "test_util.h"

namespace kiln {
namespace {

std::vector<at::Tensor> params_with_grads(const std::vector<float>& grads) {
  std::vector<at::Tensor> params;
  for (float g : grads) {
    auto p = at::zeros({3});
    p.mutable_grad() = at::full({3}, g);
    params.push_back(p);
  }
  return params;
}

TEST(LossScaler, UnscalesCleanGradientsAndGrowsAfterTheInterval) {
  LossScaler scaler({1024.0, 2.0, 0.5, 3, 1.0});
  EXPECT_DOUBLE_EQ(scaler.scale(at::ones({})).item<double>(), 1024.0);
  for (int step = 1; step <= 3; ++step) {
    auto params = params_with_grads({2048.0f, -512.0f});
    ASSERT_TRUE(scaler.unscale_and_update(params));
    EXPECT_FLOAT_EQ(params[0].grad()[0].item<float>(), 2048.0f / 1024.0f);
    EXPECT_FLOAT_EQ(params[1].grad()[2].item<float>(), -0.5f);
  }
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 2048.0);  // 3 clean steps: doubled
  EXPECT_EQ(scaler.clean_steps(), 0);
}

TEST(LossScaler, SkipsAndBacksOffOnInfOrNan) {
  LossScaler scaler({1024.0, 2.0, 0.5, 3, 1.0});
  auto clean = params_with_grads({1.0f});
  ASSERT_TRUE(scaler.unscale_and_update(clean));
  EXPECT_EQ(scaler.clean_steps(), 1);
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    auto params = params_with_grads({1.0f, bad});
    const double before = scaler.current_scale();
    EXPECT_FALSE(scaler.unscale_and_update(params)) << bad;
    EXPECT_DOUBLE_EQ(scaler.current_scale(), before / 2) << bad;
    EXPECT_EQ(scaler.clean_steps(), 0);
    EXPECT_FLOAT_EQ(params[0].grad()[0].item<float>(), 1.0f);  // left as it was: step skipped
  }
}

TEST(LossScaler, NeverFallsBelowTheMinimumAndRoundTripsItsState) {
  LossScaler scaler({4.0, 2.0, 0.5, 2000, 1.0});
  for (int i = 0; i < 5; ++i)
    scaler.unscale_and_update(params_with_grads({NAN}));
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 1.0);
  scaler.unscale_and_update(params_with_grads({1.0f}));
  LossScaler restored({65536.0, 2.0, 0.5, 2000, 1.0});
  restored.load_state(scaler.state());
  EXPECT_DOUBLE_EQ(restored.current_scale(), 1.0);
  EXPECT_EQ(restored.clean_steps(), 1);
}

std::shared_ptr<PrecisionPolicy> policy(const std::string& type) {
  ResolvedConfig c =
      load_config_text("[model]\ntype = \"gpt\"\n", "t.toml", {"precision.type=" + type});
  return PrecisionRegistry::create(type, c.params("precision"), c10::DeviceType::CPU);
}

TEST(Precision, Bf16AutocastsMatmulsOnTheCpuOnlyInsideItsScope) {
  torch::nn::Linear linear(8, 4);
  auto x = torch::randn({2, 8});
  auto bf16 = policy("bf16");
  {
    auto scope = bf16->forward_scope();
    EXPECT_EQ(linear(x).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(linear(x).scalar_type(), at::kFloat);
  EXPECT_EQ(linear->weight.scalar_type(), at::kFloat);  // master weights stay fp32
}

// precision "auto" on the CPU reads the verdict file under XDG_CACHE_HOME, written here by hand
// in the format docs/speed.md describes, for this machine's CPU class and a workload.
class PrecisionAuto : public ::testing::Test {
 protected:
  static std::string key(const std::string& workload) {
    return precision_verdict_key(cpu_class(read_cpu_features()), workload);
  }
  void write_verdicts(const std::vector<std::pair<std::string, std::pair<double, double>>>& all) {
    std::filesystem::create_directories(cache_ / "kiln");
    std::string entries;
    for (const auto& [workload, figures] : all) {
      entries += fmt::format(
          "{}\"{}\": {{\"fp32_tokens_per_sec\": {}, \"bf16_tokens_per_sec\": {}, "
          "\"experiment\": \"e.toml\", \"threads\": 2, \"measured_at\": \"then\"}}",
          entries.empty() ? "" : ", ", key(workload), figures.first, figures.second);
    }
    std::ofstream(cache_ / "kiln/precision.json")
        << "{\"format\": 3, \"verdicts\": {" << entries << "}}";
  }
  static std::shared_ptr<PrecisionPolicy> auto_for(const std::string& workload) {
    auto p = policy("auto");
    p->set_workload(workload);
    return p;
  }
  // What the policy's forward scope makes of a matmul: bf16 under autocast, fp32 without.
  static at::ScalarType forward_type(PrecisionPolicy& p) {
    auto scope = p.forward_scope();
    return at::matmul(at::randn({2, 3}), at::randn({3, 2})).scalar_type();
  }
  ScratchDir cache_;
  testing::ScopedEnv env_{"XDG_CACHE_HOME", cache_.str().c_str()};
};

TEST_F(PrecisionAuto, WithoutAMeasurementItIsFp32AndSaysHowToMeasure) {
  auto p = auto_for("gpt n_embd=32 | micro_batch 8 x seq_len 32 | 2 threads");
  EXPECT_EQ(forward_type(*p), at::kFloat);
  EXPECT_EQ(p->runs_as(), "fp32");
  EXPECT_NE(p->describe().find("precision auto: fp32 (no measurement of bf16 for this workload"),
            std::string::npos)
      << p->describe();
}

// One CPU, two workloads measured the other way round: each run follows its own workload's.
TEST_F(PrecisionAuto, ItFollowsTheMeasurementOfItsOwnWorkload) {
  write_verdicts({{"wide", {1000, 2880}}, {"tiny", {1000, 830}}});
  auto wide = auto_for("wide");
  EXPECT_EQ(forward_type(*wide), at::kBFloat16);
  EXPECT_EQ(wide->compute_dtype(), at::kBFloat16);
  EXPECT_EQ(wide->runs_as(), "bf16");
  EXPECT_NE(wide->describe().find("bf16 (kiln bench measured bf16 at 2.88x"), std::string::npos);
  auto tiny = auto_for("tiny");
  EXPECT_EQ(forward_type(*tiny), at::kFloat);
  EXPECT_NE(tiny->describe().find("fp32 (kiln bench measured bf16 at 0.83x"), std::string::npos);
  auto other = auto_for("another");
  EXPECT_EQ(forward_type(*other), at::kFloat);
  EXPECT_NE(other->describe().find("no measurement"), std::string::npos);
}

TEST_F(PrecisionAuto, AResumedRunKeepsTheChoiceItStartedWith) {
  write_verdicts({{"w", {1000, 1250}}});
  const auto started = auto_for("w")->state();
  EXPECT_EQ(started.at("auto_bf16"), 1.0);
  write_verdicts({{"w", {1000, 600}}});  // measured again since
  auto resumed = auto_for("w");
  resumed->load_state(started);
  EXPECT_EQ(forward_type(*resumed), at::kBFloat16);
  EXPECT_NE(resumed->describe().find("kept by its snapshot"), std::string::npos);
}

TEST_F(PrecisionAuto, AVerdictRecordedForOneKeyKeepsTheOthers) {
  write_verdicts({{"w", {1000, 1250}}});
  record_precision_verdict(precision_verdict_key("Other CPU | avx2", "w"),
                           {10, 5, "x.toml", 1, "now"});
  const auto mine = find_precision_verdict(key("w"));
  ASSERT_TRUE(mine.has_value());
  EXPECT_DOUBLE_EQ(mine->bf16_tokens_per_sec, 1250);
  const auto other = find_precision_verdict(precision_verdict_key("Other CPU | avx2", "w"));
  ASSERT_TRUE(other.has_value());
  EXPECT_FALSE(other->bf16_faster());
  EXPECT_EQ(find_precision_verdict(key("unseen")), std::nullopt);
}

// A file of the format that kept one verdict per CPU class, whatever was timed, holds none now.
TEST_F(PrecisionAuto, AVerdictPerCpuClassAloneIsNotTrusted) {
  std::filesystem::create_directories(cache_ / "kiln");
  std::ofstream(cache_ / "kiln/precision.json")
      << "{\"format\": 1, \"cpu_classes\": {\"" << cpu_class(read_cpu_features())
      << "\": {\"fp32_tokens_per_sec\": 1, \"bf16_tokens_per_sec\": 9}}}";
  EXPECT_EQ(forward_type(*auto_for("w")), at::kFloat);
}

// The workload key follows what each rank multiplies: the adapter's keys change it, LibTorch's
// thread count (which sweeps and launches divide) does not.
TEST(PrecisionWorkload, TheKeyFollowsTheAdapterAndNotTheThreads) {
  const auto single = ParallelRegistry::create("single", Params{}, c10::DeviceType::CPU);
  const std::string experiment =
      "[model]\ntype = \"gpt\"\nn_layer = 2\n[train]\nmicro_batch = 4\nseq_len = 16\n";
  const auto key = [&](const std::vector<std::string>& overrides) {
    const ResolvedConfig config = load_config_text(experiment, "w.toml", overrides);
    return precision_workload(config, train_options(config), *single);
  };
  const std::string plain = key({});
  const std::string lora = key({"adapter.type=\"lora\""});
  EXPECT_NE(lora, plain);
  EXPECT_NE(key({"adapter.type=\"lora\"", "adapter.rank=4"}), lora);
  EXPECT_NE(key({"adapter.type=\"lora\"", "adapter.base_dtype=\"int8\""}), lora);
  EXPECT_NE(key({"train.micro_batch=8"}), plain);
  const int threads = at::get_num_threads();
  at::set_num_threads(threads == 1 ? 2 : 1);
  EXPECT_EQ(key({}), plain);
  at::set_num_threads(threads);
  EXPECT_EQ(plain.find("threads"), std::string::npos) << plain;
}

TEST_F(PrecisionAuto, AFileItCannotReadIsOneErrorNamingIt) {
  std::filesystem::create_directories(cache_ / "kiln");
  std::ofstream(cache_ / "kiln/precision.json") << "[1, 2";
  try {
    auto_for("w");
    FAIL() << "a broken file was read";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(cache_ / "kiln/precision.json: not valid JSON"),
              std::string::npos)
        << e.what();
  }
}

// tf32 is CUDA's alone: refused on the CPU with the hint. fp16 builds there (CPU autocast has
// float16 kernels; tests/e2e/precision_run_test.cpp trains with it).
TEST(Precision, CudaOnlyPoliciesRefuseTheCpuWithAHint) {
  EXPECT_NO_THROW(policy("fp16"));
  try {
    policy("tf32");
    FAIL() << "tf32";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("on the CPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
