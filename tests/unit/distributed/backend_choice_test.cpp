// parallel.backend against where the ranks train (core/distributed/backend_choice.h,
// choose_backend): the rule is written out here case by case, from the parallel.backend rule in
// docs/gpu.md, not derived from the code.
#include <gtest/gtest.h>

#include "core/distributed/backend_choice.h"
#include "core/util/error.h"

namespace kiln {
namespace {

constexpr int kNone = -1;

TEST(BackendChoice, AutoIsGlooWhenEveryRankIsOnTheCpu) {
  EXPECT_EQ(choose_backend("auto", kNone, 0), "gloo");
  EXPECT_EQ(choose_backend("gloo", kNone, 0), "gloo");
}

TEST(BackendChoice, AutoIsNcclWhenEveryRankIsOnCudaAndLibTorchHasNccl) {
#ifdef USE_C10D_NCCL
  EXPECT_EQ(choose_backend("auto", 0, kNone), "nccl");
#else
  EXPECT_EQ(choose_backend("auto", 0, kNone), "gloo");  // nothing else to choose
#endif
  EXPECT_EQ(choose_backend("gloo", 0, kNone), "gloo");  // Gloo moves CUDA tensors too
  EXPECT_EQ(choose_backend("nccl", 0, kNone), "nccl");
}

TEST(BackendChoice, NcclWithARankOnTheCpuIsRefused) {
  try {
    choose_backend("nccl", kNone, 1);
    FAIL() << "nccl on the CPU was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 trains on the CPU"), std::string::npos)
        << e.what();
  }
}

TEST(BackendChoice, AWorldMixingCudaAndCpuRanksIsRefusedWhateverTheBackend) {
  for (const char* backend : {"auto", "gloo", "nccl"}) {
    try {
      choose_backend(backend, 0, 3);
      FAIL() << backend << " accepted a mixed world";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 trains on CUDA but rank 3 on the CPU"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln
