// `kiln bench` of an experiment whose precision.type is "auto": the step timed in fp32 and in
// bf16, alternated in one sitting (fp32, bf16, fp32, bf16, so that a machine whose speed drifts
// weighs on both), each precision's best round kept. The two figures become this CPU class's
// verdict (core/kernels/precision_verdicts.h), which precision "auto" reads in later runs.
#pragma once

#include <string>
#include <vector>

#include "core/app/speed/measure.h"

namespace kiln {

// Returns the printed report. --record and --against are refused: they keep and compare one
// precision's result.
std::string run_precision_check(const std::string& experiment,
                                const std::vector<std::string>& overrides,
                                const BenchOptions& options);

}  // namespace kiln
