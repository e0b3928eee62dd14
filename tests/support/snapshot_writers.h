// Tests of snapshots, resume and stops run once with each way a snapshot is written: on the
// training thread (the default) and by a background thread while training goes on
// (checkpoint.async = true). A suite whose fixture is EachSnapshotWriter<Fixture> holds TEST_Ps
// and one KILN_EACH_SNAPSHOT_WRITER(suite) line; its tests are named
// `Writers/<suite>.<test>/sync` and `.../async`. The experiments the fixture writes carry the
// setting (TinyRun::checkpoint_section), and a resume keeps it from the run's stored config.
#pragma once

#include <string>

#include "tiny_run.h"

namespace kiln::testing {

template <class Fixture = TinyRun>
class EachSnapshotWriter : public Fixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    this->async_snapshots_ = this->GetParam();
    Fixture::SetUp();
  }
};

inline std::string snapshot_writer_name(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "async" : "sync";
}

}  // namespace kiln::testing

#define KILN_EACH_SNAPSHOT_WRITER(suite) \
  INSTANTIATE_TEST_SUITE_P(Writers, suite, ::testing::Bool(), ::kiln::testing::snapshot_writer_name)
