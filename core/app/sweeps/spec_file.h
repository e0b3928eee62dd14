// Reading a sweep (core/app/sweeps/spec.h) from what the user wrote: a sweep file
//
//   extends = "common.toml"              # optional: another sweep file this one builds on
//   base = "experiments/kjv_char.toml"   # the experiment every member starts from
//   name = "lr-layers"                   # optional; default: the sweep file's name
//   seeds = [1, 2, 3]                    # shorthand for a grid over run.seed
//   [grid]                               # Cartesian product
//   optimizer.lr = [1e-3, 3e-3]
//   model.n_layer = [2, 4]
//   [zip]                                # varied together: equal-length lists
//   schedule.warmup = [10, 20]
//   train.steps = [100, 200]
//   [set]                                # the same for every member
//   train.steps = 100
//   [[variant]]                          # each a set of keys varied together: crossed with
//   name = "lion"                        # the grid (optional name: its part of member names)
//   optimizer.type = "lion"
//   optimizer.lr = 3e-4
//   [search]                             # optional: how the members are chosen
//   type = "random"                      # "grid" (the default: the members above), "random"
//                                        # or "tpe" (core/app/sweeps/tpe.h; needs a metric)
//   trials = 20                          # random, tpe: this many draws from [space]
//   startup = 10                         # tpe: random draws before TPE proposes
//   seed = 0                             # random: the draws are a pure function of the seed,
//                                        # the trial's index and the key
//   metric = "val_loss"                  # optional: what ranks the members (a metric they log)
//   mode = "min"                         # "min" or "max"
//   [space]                              # random: a distribution per key
//   optimizer.lr = { log_uniform = [1e-4, 3e-2] }
//   optimizer.weight_decay = { uniform = [0.0, 0.2] }
//   schedule.warmup = { int_uniform = [0, 50] }
//   optimizer.type = { choice = ["adamw", "lion"] }
//
// or --grid / --zip arguments on the command line. `extends` (core/config/extends.h: paths
// relative to the file naming them, applied in order) layers sweep files: a later file's base,
// name, seeds and [[variant]] list replace an earlier one's, its [grid], [zip] and [set] keys
// replace the same keys. Each file of the chain is checked, with file:line:col in the error, and
// laid over the ones before it; what depends on the base experiment is checked when the members
// are expanded.
#pragma once

#include <string>

#include "core/app/sweeps/spec.h"

namespace kiln {

// A sweep file with the files it extends; a UserError naming file:line:col for a mistake in any.
SweepSpec load_sweep_file(const std::string& path);
// True for a sweep file (it has a key only sweep files have: base, seeds, [grid], [zip], [set],
// [[variant]]), false for an experiment file.
bool is_sweep_file(const std::string& path);
// --grid / --zip arguments "section.key=v1,v2,..." (values as TOML text, split on commas).
SweepAxis parse_axis(const std::string& argument);

}  // namespace kiln
