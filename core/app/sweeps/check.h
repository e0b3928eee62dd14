// A sweep assembled whole before any member starts: each member's config, expanded and loaded by
// core/app/sweeps/spec.h, is assembled as its `kiln run` would assemble it, without building its
// model (core/train/assemble.h, Assembly::kCheck): model shapes, the memory training needs, the
// batch arithmetic at the member's world size, the schedule's and every plugin's own checks, the
// data. The first member that would fail stops the sweep with its name and its error, before the
// run store is opened. `kiln sweep --dry-run` prints what the checks found as the members table.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/app/sweeps/spec.h"

namespace kiln {

struct MemberCheck {
  std::string name;
  std::map<std::string, std::string> values;  // the member's resolved config, flattened
  double parameters = 0;
  int64_t tokens_per_step = 0;  // over all ranks and micro-steps
  int64_t steps = 0;
  double memory = 0;  // bytes training needs at least (core/train/memory_check.h)
  // What loading its config noted, as `kiln run` prints it: a variant's `type` that left out
  // base keys its plugin does not take.
  std::vector<std::string> notes;
};

// Every member assembled without training, in order; a UserError "sweep member 'NAME': ..." with
// the assembly's error for the first one that fails.
std::vector<MemberCheck> check_members(const SweepSpec& spec,
                                       const std::vector<SweepMember>& members);

// One row per member: its name, the value of each key the sweep varies, parameters, tokens per
// step, steps and memory.
std::string members_table(const SweepSpec& spec, const std::vector<MemberCheck>& checks);

}  // namespace kiln
