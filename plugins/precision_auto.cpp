// precision "auto": bf16 where it was measured faster, fp32 elsewhere. On the CPU that is what
// `kiln bench EXPERIMENT --set precision.type=auto` measured on this CPU class for this workload
// (the model, the adapter, the micro-batch, each rank's parallel cut), kept per machine
// (core/kernels/precision_verdicts.h); without a measurement of it, fp32. On CUDA, bf16 (tensor
// cores since Ampere). The run's header says which and why, and the store records it. A snapshot
// keeps the choice, so a resumed run goes on in the precision it started in even if a newer
// measurement says otherwise.
#include <fmt/format.h>

#include "core/api/precision.h"
#include "core/kernels/precision_verdicts.h"

namespace kiln {
namespace {

constexpr const char* kChoiceKey = "auto_bf16";  // in the snapshot's precision state: 1 or 0

std::string ratio_text(const PrecisionVerdict& v) {
  return fmt::format(
      "kiln bench measured bf16 at {:.2f}x fp32's tokens/s for this workload on this CPU class "
      "({}, {} threads, {})",
      v.bf16_tokens_per_sec / v.fp32_tokens_per_sec, v.experiment, v.threads, v.measured_at);
}

class Auto : public PrecisionPolicy {
 public:
  Auto(Params params, c10::DeviceType device) : params_(std::move(params)), device_(device) {
    if (device == c10::DeviceType::CUDA) {
      choose(true, "a CUDA device");
    } else {
      choose(false, "no workload given to measure it by");
    }
  }

  void set_workload(const std::string& workload) override {
    if (device_ == c10::DeviceType::CUDA) return;
    const auto verdict =
        find_precision_verdict(precision_verdict_key(cpu_class(read_cpu_features()), workload));
    if (!verdict) {
      const std::string outdated = outdated_precision_verdicts();
      choose(false,
             fmt::format("no measurement of bf16 for this workload on this CPU class "
                         "yet{}: `kiln bench EXPERIMENT --set precision.type=auto` makes one",
                         outdated.empty() ? "" : " (" + outdated + ")"));
    } else {
      choose(verdict->bf16_faster(), ratio_text(*verdict));
    }
  }
  std::string runs_as() const override { return bf16_ ? "bf16" : "fp32"; }

  // fp32 and bf16 scale no loss and inspect no gradient: the forward pass is all that differs.
  std::unique_ptr<Scope> forward_scope() override { return chosen_->forward_scope(); }
  at::ScalarType compute_dtype() const override { return chosen_->compute_dtype(); }
  std::string describe() const override {
    return fmt::format("precision auto: {} ({})", bf16_ ? "bf16" : "fp32", why_);
  }
  std::map<std::string, double> state() const override { return {{kChoiceKey, bf16_ ? 1 : 0}}; }
  void load_state(const std::map<std::string, double>& state) override {
    const auto found = state.find(kChoiceKey);
    if (found == state.end() || (found->second != 0) == bf16_) return;
    choose(found->second != 0, "the choice this run started with, kept by its snapshot");
  }

 private:
  void choose(bool bf16, std::string why) {
    bf16_ = bf16;
    why_ = std::move(why);
    chosen_ = PrecisionRegistry::create(bf16 ? "bf16" : "fp32", params_, device_);
  }

  Params params_;
  c10::DeviceType device_;
  bool bf16_ = false;
  std::string why_;
  std::shared_ptr<PrecisionPolicy> chosen_;
};

const bool registered = PrecisionRegistry::add(
    {"auto",
     "bf16 where `kiln bench --set precision.type=auto` measured it faster for this workload "
     "(model, adapter, micro-batch, parallel cut) on this CPU class (and on CUDA), fp32 elsewhere; "
     "the run "
     "header says which and the run store records it",
     {}},
    [](const Params& p, c10::DeviceType device) { return std::make_shared<Auto>(p, device); });

}  // namespace
}  // namespace kiln
