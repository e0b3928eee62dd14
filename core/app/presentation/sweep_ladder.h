// An asha sweep's rung ladder as text (the ladder itself: core/store/history/rung_ladder.h), and
// what its search cost: `kiln sweep status` and the end of `kiln sweep` print them.
#pragma once

#include <string>
#include <vector>

#include "core/store/history/rung_ladder.h"

namespace kiln {

// "rung 1 of 3: step 3, 9 member(s), the best 3 go on" and a line per member.
std::string ladder_text(const std::vector<LadderRung>& rungs, const LadderShape& shape);

// "steps trained: 1,134 by the members' runs + 96 by cooldown probes = 1,230": what the sweep's
// search cost, its probes' steps (trained and thrown away) counted with its members'.
std::string sweep_steps_line(HistoryDb& db, const std::string& sweep);

}  // namespace kiln
