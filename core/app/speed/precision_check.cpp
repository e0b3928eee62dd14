#include "core/app/speed/precision_check.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>

#include <ATen/Parallel.h>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "core/config/config.h"
#include "core/kernels/cpu_runtime.h"
#include "core/kernels/precision_verdicts.h"
#include "core/util/error.h"
#include "core/util/fault.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

constexpr int kRounds = 2;
// Rounds of one precision further apart than this say the machine's speed changed under the
// measurement (another process took cores: fp32 once measured 1,140 ms/step against 26): its
// verdict would decide later runs wrongly, so none is kept.
constexpr double kMostRoundSpread = 0.25;

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
  // Where the verdict goes is checked before minutes of measuring, not after.
  if (const std::string path = precision_verdicts_path(); !path.empty()) ensure_parent_dir(path);
  std::vector<std::string> base;
  std::copy_if(overrides.begin(), overrides.end(), std::back_inserter(base),
               [](const std::string& o) { return o.rfind("precision.type=", 0) != 0; });
  std::string out = fmt::format(
      "kiln bench {}: precision \"auto\" times fp32 and bf16 alternately, {} rounds of {} timed "
      "steps after {} warm-up, and keeps each one's best\n{}\n",
      experiment, kRounds, options.steps, options.warmup, cpu_runtime_report());
  std::map<std::string, std::vector<double>> rounds;  // tokens/s by precision
  std::string workload;
  for (int round = 1; round <= kRounds; ++round) {
    for (const char* precision : {"fp32", "bf16"}) {
      std::vector<std::string> set = base;
      set.push_back(std::string("precision.type=") + precision);
      const ResolvedConfig config = load_config(experiment, set);
      BenchResult r = run_bench(config, options);
      workload = r.workload;
      // As if another process took half the cores during this round.
      if (fault_due("bench.busy_round")) r.record.tokens_per_sec /= 2;
      rounds[precision].push_back(r.record.tokens_per_sec);
      out += fmt::format("round {} {}: {:.0f} tokens/s, {:.2f} ms/step\n", round, precision,
                         r.record.tokens_per_sec, r.record.ms.step);
    }
  }
  for (const auto& [precision, figures] : rounds) {
    const auto [low, high] = std::minmax_element(figures.begin(), figures.end());
    if (*high > 0 && (*high - *low) / *high <= kMostRoundSpread) continue;
    throw UserError(fmt::format(
        "kiln bench: the {} rounds differ by {:.0f}% ({:.0f} and {:.0f} tokens/s), more than "
        "{:.0f}%: the machine's speed changed while it measured (another process?), so no "
        "verdict is kept; run it again on a quiet machine",
        precision, 100 * (*high - *low) / std::max(*high, 1e-9), *low, *high,
        100 * kMostRoundSpread));
  }
  const auto best = [&](const std::string& precision) {
    return *std::max_element(rounds[precision].begin(), rounds[precision].end());
  };
  std::string timed = experiment;
  for (const std::string& o : base)
    timed += " --set " + o;
  const PrecisionVerdict verdict{best("fp32"), best("bf16"), timed, at::get_num_threads(),
                                 now_utc()};
  const std::string cpu = cpu_class(read_cpu_features());
  record_precision_verdict(precision_verdict_key(cpu, workload), verdict);
  out += fmt::format(
      "bf16 / fp32: {:.2f}x the tokens/s for this workload ({}) on this CPU class ({}): "
      "precision \"auto\" picks {} for it\nkept in {}\n",
      verdict.bf16_tokens_per_sec / verdict.fp32_tokens_per_sec, workload, cpu,
      verdict.bf16_faster() ? "bf16" : "fp32", precision_verdicts_path());
  return out;
}

}  // namespace kiln
