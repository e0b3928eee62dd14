// What a server test does when its server (the Slurm cluster of slurm_cluster.h, the PostgreSQL
// of postgres_server.h, Chromium with its driver) cannot start here: it SKIPs with the reason on
// a developer's machine, and FAILs with it under CI=true (.ci/run sets it), where
// tools/setup.sh --tests installed every server and a skip would hide a failure, as
// tools/interop.sh does for the interop judges.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace kiln::testing {

inline bool on_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace kiln::testing

// Ends the test (or its SetUp): a failure under CI=true, a skip elsewhere, with `reason`.
#define KILN_SERVER_UNAVAILABLE(reason)                       \
  do {                                                        \
    if (::kiln::testing::on_ci())                             \
      GTEST_FAIL() << "CI=true: a server cannot start here, " \
                   << "which fails the test: " << (reason);   \
    GTEST_SKIP() << "SKIP: " << (reason);                     \
  } while (false)
