#include "core/store/runs/sweep_claims.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <utility>

#include <fmt/format.h>

#include "core/store/db/connection.h"
#include "core/store/runs/lookup.h"
#include "core/util/process.h"
#include "core/util/text.h"

namespace kiln {

const char* const kSweepClaimTablesSql = R"sql(
    CREATE TABLE sweep_claims (
      sweep         TEXT NOT NULL,
      member        TEXT NOT NULL,
      worker        TEXT NOT NULL,
      until_step    INTEGER NOT NULL,
      heartbeat_at  INTEGER NOT NULL,
      PRIMARY KEY (sweep, member)
    );
    CREATE TABLE sweep_decisions (
      sweep       TEXT NOT NULL,
      position    INTEGER NOT NULL,
      decided_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      worker      TEXT NOT NULL,
      action      TEXT NOT NULL,
      member      TEXT NOT NULL,
      until_step  INTEGER NOT NULL,
      reason      TEXT NOT NULL,
      PRIMARY KEY (sweep, position)
    );
    CREATE TABLE sweep_proposals (
      sweep   TEXT NOT NULL,
      trial   INTEGER NOT NULL,
      value_lines TEXT NOT NULL,
      PRIMARY KEY (sweep, trial)
    );
    CREATE TABLE sweep_ladders (
      sweep             TEXT PRIMARY KEY,
      metric            TEXT NOT NULL,
      maximize          INTEGER NOT NULL,
      reduction_factor  INTEGER NOT NULL,
      rungs             TEXT NOT NULL
    );
    ALTER TABLE sweeps ADD COLUMN spec_file TEXT;
    )sql";

std::optional<LadderShape> find_ladder_shape(Connection& db, const std::string& sweep) {
  if (!has_table(db, "sweep_ladders")) return std::nullopt;
  Statement select(db,
                   "SELECT metric, maximize, reduction_factor, rungs, cooled FROM sweep_ladders "
                   "WHERE sweep = ?",
                   {sweep});
  if (!select.step()) return std::nullopt;
  LadderShape shape{
      select.text(0), select.integer(1) != 0, select.integer(2), {}, select.integer(4) != 0};
  for (const std::string& step : split(select.text(3), ','))
    shape.rungs.push_back(std::stoll(step));
  return shape;
}

SweepClaims::SweepClaims(RunStore& store, std::string sweep, std::string worker,
                         std::chrono::seconds timeout)
    : store_(store), sweep_(std::move(sweep)), worker_(std::move(worker)), timeout_(timeout) {}

int64_t SweepClaims::now() const {
  return static_cast<int64_t>(std::time(nullptr));
}

// Claims of workers on this host whose process is gone: stale now, not after the timeout.
void SweepClaims::drop_dead_local_claims() {
  const std::string here = host_name() + ":";
  std::vector<std::string> dead;
  Statement select(store_.connection(),
                   "SELECT DISTINCT worker FROM sweep_claims WHERE sweep = ? AND worker <> ?",
                   {sweep_, worker_});
  while (select.step()) {
    const std::string worker = select.text(0);
    if (worker.rfind(here, 0) != 0) continue;
    const long pid = std::strtol(worker.c_str() + here.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      dead.push_back(worker);
  }
  for (const std::string& worker : dead) {
    Statement(store_.connection(), "DELETE FROM sweep_claims WHERE sweep = ? AND worker = ?",
              {sweep_, worker})
        .step();
  }
}

std::optional<SweepDecision> SweepClaims::claim_next(const Decide& decide) {
  Connection& db = store_.connection();
  Transaction transaction(db);
  drop_dead_local_claims();
  Statement(db, "DELETE FROM sweep_claims WHERE sweep = ? AND heartbeat_at < ?",
            {sweep_, now() - static_cast<int64_t>(timeout_.count())})
      .step();
  std::set<std::string> held;
  Statement select(db, "SELECT member FROM sweep_claims WHERE sweep = ? AND worker <> ?",
                   {sweep_, worker_});
  while (select.step())
    held.insert(select.text(0));
  std::optional<SweepDecision> decision = decide(held);
  if (!decision) return std::nullopt;  // rolled back: nothing was written
  Statement(db,
            "INSERT INTO sweep_claims (sweep, member, worker, until_step, heartbeat_at) VALUES "
            "(?, ?, ?, ?, ?)",
            {sweep_, decision->member, worker_, decision->until, now()})
      .step();
  Statement(db,
            "INSERT INTO sweep_decisions (sweep, position, worker, action, member, until_step, "
            "reason) VALUES (?, (SELECT coalesce(max(position), 0) + 1 FROM sweep_decisions "
            "WHERE sweep = ?), ?, ?, ?, ?, ?)",
            {sweep_, sweep_, worker_, decision->action, decision->member, decision->until,
             decision->reason})
      .step();
  transaction.commit();
  return decision;
}

bool SweepClaims::others_working() {
  drop_dead_local_claims();
  Statement select(store_.connection(),
                   "SELECT count(*) FROM sweep_claims WHERE sweep = ? AND worker <> ? AND "
                   "heartbeat_at >= ?",
                   {sweep_, worker_, now() - static_cast<int64_t>(timeout_.count())});
  return select.step() && select.integer(0) > 0;
}

void SweepClaims::heartbeat(bool now_anyway) {
  const auto at = std::chrono::steady_clock::now();
  if (!now_anyway && at - last_heartbeat_ < timeout_ / 4) return;
  last_heartbeat_ = at;
  Statement(store_.connection(),
            "UPDATE sweep_claims SET heartbeat_at = ? WHERE sweep = ? AND worker = ?",
            {now(), sweep_, worker_})
      .step();
}

void SweepClaims::release(const std::string& member) {
  Statement(store_.connection(),
            "DELETE FROM sweep_claims WHERE sweep = ? AND member = ? AND worker = ?",
            {sweep_, member, worker_})
      .step();
}

void SweepClaims::record_ladder_shape(const LadderShape& shape) {
  std::vector<std::string> steps;
  for (int64_t step : shape.rungs)
    steps.push_back(std::to_string(step));
  in_transaction([&] {
    Connection& db = store_.connection();
    Statement(db, "DELETE FROM sweep_ladders WHERE sweep = ?", {sweep_}).step();
    Statement(db,
              "INSERT INTO sweep_ladders (sweep, metric, maximize, reduction_factor, rungs, "
              "cooled) VALUES (?, ?, ?, ?, ?, ?)",
              {sweep_, shape.metric, int64_t{shape.maximize ? 1 : 0}, shape.reduction_factor,
               join(steps, ","), int64_t{shape.cooled ? 1 : 0}})
        .step();
  });
}

void SweepClaims::in_transaction(const std::function<void()>& work) {
  Transaction transaction(store_.connection());
  work();
  transaction.commit();
}

std::vector<std::vector<std::string>> SweepClaims::proposals(int64_t from) {
  std::vector<std::vector<std::string>> out;
  Statement select(store_.connection(),
                   "SELECT value_lines FROM sweep_proposals WHERE sweep = ? AND trial >= ? ORDER "
                   "BY trial",
                   {sweep_, from});
  while (select.step())
    out.push_back(split(select.text(0), '\n'));
  return out;
}

void SweepClaims::record_proposal(int64_t trial, const std::vector<std::string>& values) {
  Statement(store_.connection(),
            "INSERT INTO sweep_proposals (sweep, trial, value_lines) VALUES (?, ?, ?)",
            {sweep_, trial, join(values, "\n")})
      .step();
}

std::vector<SweepDecision> SweepClaims::decisions() {
  std::vector<SweepDecision> out;
  Statement select(store_.connection(),
                   "SELECT member, until_step, action, reason FROM sweep_decisions WHERE sweep = "
                   "? ORDER BY position",
                   {sweep_});
  while (select.step())
    out.push_back({select.text(0), select.integer(1), select.text(2), select.text(3)});
  return out;
}

std::vector<SweepDecision> SweepClaims::held() {
  std::vector<SweepDecision> out;
  Statement select(store_.connection(),
                   "SELECT member, until_step, worker FROM sweep_claims WHERE sweep = ? AND "
                   "heartbeat_at >= ? ORDER BY member",
                   {sweep_, now() - static_cast<int64_t>(timeout_.count())});
  while (select.step())
    out.push_back({select.text(0), select.integer(1), "run", select.text(2)});
  return out;
}

std::string worker_name() {
  return fmt::format("{}:{}", host_name(), ::getpid());
}

std::chrono::seconds claim_timeout() {
  const char* given = std::getenv("KILN_SWEEP_CLAIM_TIMEOUT");
  const long seconds = given ? std::strtol(given, nullptr, 10) : 0;
  return std::chrono::seconds(seconds > 0 ? seconds : 120);
}

}  // namespace kiln
