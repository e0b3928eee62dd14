// What a session says of skipped updates (core/train/skipped_updates.h): the lines a user reads,
// spelled out here, and when a run ends for them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/train/skipped_updates.h"
#include "core/util/error.h"

namespace kiln {
namespace {

StepStats nonfinite_step() {
  StepStats stats;
  stats.step = 7;
  stats.grad_norm = -NAN;  // printed without its sign
  stats.loss = 3.5;
  stats.skipped = stats.nonfinite = true;
  return stats;
}

TEST(SkippedUpdates, ASkippedStepIsOneLine) {
  EXPECT_EQ(nonfinite_step_line(nonfinite_step(), /*abort=*/false, "tiny", 5),
            "step 7: the gradients are not finite (norm nan, loss 3.5), so the update was not "
            "applied (train.on_nonfinite = \"skip\")");
}

TEST(SkippedUpdates, AnAbortNamesWhereTheResumeContinues) {
  try {
    nonfinite_step_line(nonfinite_step(), /*abort=*/true, "tiny", 5);
    FAIL() << "no DivergedError";
  } catch (const DivergedError& e) {
    EXPECT_NE(std::string(e.what()).find("`kiln resume tiny` continues from its last snapshot "
                                         "(step 5); add --set train.on_nonfinite=skip"),
              std::string::npos)
        << e.what();
  }
  try {
    nonfinite_step_line(nonfinite_step(), /*abort=*/true, "tiny", 0);
    FAIL() << "no DivergedError";
  } catch (const DivergedError& e) {
    EXPECT_NE(std::string(e.what()).find("continues from step 0 (it has no snapshot)"),
              std::string::npos)
        << e.what();
  }
}

TEST(SkippedUpdates, ARunFailsOnlyWhenNoUpdateWasApplied) {
  EXPECT_NO_THROW(require_an_applied_update({0, 0}));
  EXPECT_NO_THROW(require_an_applied_update({4, 3}));
  EXPECT_THROW(require_an_applied_update({4, 4}), DivergedError);
}

TEST(SkippedUpdates, TheClosingLineCountsThemAndWarnsWhenMostWere) {
  EXPECT_EQ(skipped_updates_note({10, 0}), "");
  EXPECT_EQ(skipped_updates_note({10, 3}), " | 3 of 10 updates skipped");
  EXPECT_FALSE(mostly_skipped_warning({10, 5}, "tiny").has_value());
  EXPECT_EQ(mostly_skipped_warning({10, 6}, "tiny").value_or(""),
            "warning: most of the run's updates were skipped (6 of 10: their gradients were not "
            "finite), so its weights learned from only 4 batches; `kiln runs show tiny` counts "
            "them");
}

}  // namespace
}  // namespace kiln
