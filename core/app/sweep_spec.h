// Sweeps: many runs of one experiment, varying some keys. A sweep file
//
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
//
// or the same from the command line (`kiln sweep EXP.toml --grid optimizer.lr=1e-3,3e-3`).
// Each member is an ordinary run named `<sweep>/<key=value,...>` and tagged with the sweep
// (runs.sweep). This file turns a sweep into its members, every member's name and config
// checked before any of them runs; it starts no process and opens no run store
// (core/app/sweep_runner.h runs the members).
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct SweepAxis {
  std::string key;                  // section.key
  std::vector<std::string> values;  // TOML text of each value, as --set takes it
};

struct SweepSpec {
  std::string name;
  std::string base;                // experiment file
  std::vector<SweepAxis> grid;     // Cartesian product
  std::vector<SweepAxis> zip;      // varied together
  std::vector<std::string> fixed;  // section.key=value for every member
};

struct SweepMember {
  std::string name;
  std::vector<std::string> overrides;  // fixed, then the member's own values
};

// A sweep file; a UserError naming file:line:col for a mistake in it.
SweepSpec load_sweep_file(const std::string& path);
// True for a sweep file (it has `base = ...`), false for an experiment file.
bool is_sweep_file(const std::string& path);
// --grid / --zip arguments "section.key=v1,v2,..." (values as TOML text, split on commas).
SweepAxis parse_axis(const std::string& argument);
// Every member, each override already validated against the base experiment (which it reads)
// and each name checked; grid values vary in odometer order (the last axis fastest), then the
// zip positions. A UserError for a sweep that varies nothing, zip lists of unequal lengths,
// more than 10000 members or a name that cannot be a run's.
std::vector<SweepMember> expand_sweep(const SweepSpec& spec);

}  // namespace kiln
