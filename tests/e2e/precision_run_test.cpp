// A precision policy end to end: a tiny run trained through the real binary under bf16 autocast
// on the CPU. The policies and the loss scaler in process: tests/unit/train/precision_test.cpp.
#include "tiny_run.h"

namespace kiln {
namespace {

using PrecisionRun = testing::TinyRun;

TEST_F(PrecisionRun, Bf16TrainsOnTheCpu) {
  auto result = testing::run_kiln("run " + experiment() + " --name bf --set precision.type=bf16");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  auto loss = losses("bf");
  ASSERT_EQ(loss.size(), 30u);
  EXPECT_LT(loss.back(), loss.front() - 1.0);
  EXPECT_EQ(testing::scalar(db(),
                            "select count(*) from metrics where loss_scale = 1 and "
                            "skipped = 0"),
            "30");
}

}  // namespace
}  // namespace kiln
