#include "core/app/sweeps/tpe_trials.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/store/history/queries.h"
#include "core/util/text.h"

namespace kiln {

namespace {

std::vector<std::string> names_of(const std::vector<SweepMember>& members) {
  std::vector<std::string> names;
  for (const auto& m : members)
    names.push_back(m.name);
  return names;
}

}  // namespace

TpeTrials::TpeTrials(const SweepSpec& spec, std::string db, MemberScore member_score)
    : spec_(spec), db_(std::move(db)), member_score_(std::move(member_score)) {
  for (int64_t t = 0; t < std::min(spec.search.trials, spec.search.startup); ++t) {
    std::vector<std::string> values;
    for (const auto& d : spec.space)
      values.push_back(sample_value(d, spec.search.seed, t));
    names_.push_back(names_of(trial_members(spec, t, values)));
    values_.push_back(std::move(values));
  }
}

std::optional<double> TpeTrials::score(HistoryDb& db, size_t trial) const {
  double sum = 0;
  for (const auto& name : names_[trial]) {
    if (member_score_) {
      const std::optional<double> member = member_score_(name);
      if (!member) return std::nullopt;
      sum += *member;
      continue;
    }
    const auto runs = list_runs(db, {"name = " + single_quoted(name), "id", 1});
    if (runs.empty() || (runs[0].status != "completed" && runs[0].status != "failed")) {
      return std::nullopt;
    }
    double best = INFINITY;  // the worst score: failed, or no value
    if (runs[0].status == "completed") {
      for (double y : load_curve(db, runs[0], spec_.search.metric, "step").y) {
        if (std::isfinite(y)) best = std::min(best, spec_.search.maximize ? -y : y);
      }
    }
    sum += best;
  }
  return sum / static_cast<double>(names_[trial].size());
}

std::vector<TpeTrial> TpeTrials::finished() {
  HistoryDb db(db_);
  std::vector<TpeTrial> out;
  scores_.resize(values_.size());
  for (size_t t = 0; t < values_.size(); ++t) {
    // An ended trial's score stays, unless the member scores may change.
    if (!scores_[t] || member_score_) scores_[t] = score(db, t);
    if (scores_[t]) out.push_back({values_[t], *scores_[t]});
  }
  return out;
}

void TpeTrials::rename(const std::string& from, const std::string& to) {
  for (auto& names : names_)
    std::replace(names.begin(), names.end(), from, to);
}

std::vector<SweepMember> TpeTrials::next() {
  if (left() <= 0) return {};
  return adopt(
      tpe_propose(spec_.space, finished(), spec_.search.seed, made(), {spec_.search.startup}));
}

std::vector<SweepMember> TpeTrials::adopt(std::vector<std::string> values) {
  std::vector<SweepMember> members = trial_members(spec_, made(), values);
  names_.push_back(names_of(members));
  values_.push_back(std::move(values));
  return members;
}

}  // namespace kiln
