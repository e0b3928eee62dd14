// A fixture for tests run on both run stores (the parameter: "sqlite" or "postgresql..."): the
// TinyRun corpus, and store_, this test's store: the SQLite file db(), or a new database on a
// PostgreSQL server that the suite starts (tests/support/postgres_server.h), SKIP without one
// (FAIL under CI=true: server_unavailable.h).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "postgres_server.h"
#include "server_unavailable.h"
#include "tiny_run.h"

namespace kiln::testing {

class EachStore : public TinyRun, public ::testing::WithParamInterface<std::string> {
 protected:
  static void SetUpTestSuite() { server_ = new PostgresServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    if (postgres() && !server_->skip_reason().empty()) {
      KILN_SERVER_UNAVAILABLE("no PostgreSQL server: " + server_->skip_reason());
    }
    TinyRun::SetUp();
    store_ = postgres() ? server_->new_database(fmt::format("store{}", ++databases_)) : db();
  }

  // "postgresql", or a variant of it ("postgresql_repeatable_read": a server setting a test adds).
  bool postgres() const { return GetParam().rfind("postgresql", 0) == 0; }
  std::string sql(const std::string& query) { return store_scalar(store_, query); }

  inline static PostgresServer* server_ = nullptr;
  inline static int databases_ = 0;
  std::string store_;
};

}  // namespace kiln::testing
