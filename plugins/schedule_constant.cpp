// schedule "constant": the base lr at every step, after an optional linear warmup.
#include "core/api/schedule.h"

namespace kiln {
namespace {

class Constant : public Schedule {
 public:
  Constant(double lr, int64_t warmup) : lr_(lr), warmup_(warmup) {}
  double lr(int64_t step) const override { return lr_ * warmup_factor(step, warmup_); }
  bool decays() const override { return false; }

 private:
  double lr_;
  int64_t warmup_;
};

const bool registered = ScheduleRegistry::add(
    {"constant",
     "the optimizer's lr at every step, after an optional linear warmup",
     {ParamSpec::integer("warmup", 0, "steps of linear warmup from lr/warmup to lr").at_least(0)},
     true},
    [](const Params& p, double base_lr, int64_t) -> std::shared_ptr<Schedule> {
      return std::make_shared<Constant>(base_lr, p.integer("warmup"));
    });

}  // namespace
}  // namespace kiln
