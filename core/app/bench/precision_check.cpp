#include "core/app/bench/precision_check.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "core/config/config.h"
#include "core/util/blas_kernels.h"
#include "core/util/error.h"
#include "core/util/precision_verdicts.h"

namespace kiln {
namespace {

constexpr int kRounds = 2;

std::string now_utc() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::now()));
}

}  // namespace

std::string run_precision_check(const std::string& experiment,
                                const std::vector<std::string>& overrides,
                                const BenchOptions& options) {
  if (options.record || options.against) {
    throw UserError(
        "kiln bench: --record and --against keep and compare one precision's result, and "
        "precision.type = \"auto\" times two: set precision.type to \"fp32\" or \"bf16\" for them");
  }
  std::vector<std::string> base;
  std::copy_if(overrides.begin(), overrides.end(), std::back_inserter(base),
               [](const std::string& o) { return o.rfind("precision.type=", 0) != 0; });
  std::string out = fmt::format(
      "kiln bench {}: precision \"auto\" times fp32 and bf16 alternately, {} rounds of {} timed "
      "steps after {} warm-up, and keeps each one's best\n{}\n",
      experiment, kRounds, options.steps, options.warmup, blas_report().text());
  std::map<std::string, double> best;
  int threads = 0;
  for (int round = 1; round <= kRounds; ++round) {
    for (const char* precision : {"fp32", "bf16"}) {
      std::vector<std::string> set = base;
      set.push_back(std::string("precision.type=") + precision);
      const BenchResult r = run_bench(load_config(experiment, set), options);
      best[precision] = std::max(best[precision], r.record.tokens_per_sec);
      threads = static_cast<int>(r.record.machine.threads);
      out += fmt::format("round {} {}: {:.0f} tokens/s, {:.2f} ms/step\n", round, precision,
                         r.record.tokens_per_sec, r.record.ms.step);
    }
  }
  const PrecisionVerdict verdict{best["fp32"], best["bf16"], experiment, threads, now_utc()};
  const std::string cpu = cpu_class(read_cpu_features());
  record_precision_verdict(cpu, verdict);
  out += fmt::format(
      "bf16 / fp32: {:.2f}x the tokens/s on this CPU class ({}): precision \"auto\" picks {} "
      "here\nkept in {}\n",
      verdict.bf16_tokens_per_sec / verdict.fp32_tokens_per_sec, cpu,
      verdict.bf16_faster() ? "bf16" : "fp32", precision_verdicts_path());
  return out;
}

}  // namespace kiln
