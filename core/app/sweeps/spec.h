// A sweep: many runs of one experiment, varying some keys, as a sweep file gives them
// (core/app/sweeps/spec_file.h: the format) or the command line does (`kiln sweep EXP.toml --grid
// optimizer.lr=1e-3,3e-3`). Each member is an ordinary run named `<sweep>/<key=value,...>` and
// tagged with the sweep (runs.sweep). A variant's keys are --set values like the others, so that a
// member runs as `kiln run BASE --set ...`; the experiment loader decides what a `type` set that
// way does to the section's other keys. This file turns a sweep into its members, every member's
// name and config checked before any of them runs; it starts no process and opens no run store
// (core/app/sweeps/check.h assembles each member without training it, core/app/sweeps/runner.h
// runs them). A random search's draws are made in core/app/sweeps/search_space.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/app/sweeps/search_space.h"  // SweepSearch, SweepDistribution, sample_value

namespace kiln {

struct SweepAxis {
  std::string key;                  // section.key
  std::vector<std::string> values;  // TOML text of each value, as --set takes it
};

// One [[variant]]: keys varied together, one member (per grid point) with all of them.
struct SweepVariant {
  std::string name;                    // its part of member names; empty = its key=value pairs
  std::vector<std::string> overrides;  // section.key=value, as --set takes them
  std::string where;                   // file:line:col of its [[variant]] line, for errors
};

struct SweepSpec {
  std::string name;
  std::string base;                    // experiment file
  std::vector<SweepAxis> grid;         // Cartesian product
  std::vector<SweepAxis> zip;          // varied together
  std::vector<std::string> fixed;      // section.key=value for every member
  std::vector<SweepVariant> variants;  // crossed with the grid (slowest), none = one plain
  SweepSearch search = {};
  std::vector<SweepDistribution> space = {};  // random search: sampled per trial, crossed fastest
  std::string file = {};  // the sweep file read, absolute; "" for a sweep from the command line
};

struct SweepMember {
  std::string name;
  std::vector<std::string> overrides;  // fixed, then the member's own values
};

// Every member, each override already validated against the base experiment (which it reads)
// and each name checked; the variants vary slowest, then the grid values in odometer order (the
// last axis fastest), then the zip positions, then a random search's trials (named trial=N). A
// member's overrides are [set]'s, its variant's, then its grid and zip values. A UserError for a
// sweep that varies nothing, zip lists of unequal lengths, a key both a variant and [grid], [zip]
// or [set] give, more than 10000 members, two members of one name, or a name that cannot be a
// run's; a variant's keys that do not load are reported at its [[variant]] line, a member's at its
// name.
std::vector<SweepMember> expand_sweep(const SweepSpec& spec);
// The members of trial `trial` of a tpe search, whose values (TOML text, in [space] order) TPE
// proposed while the sweep ran: one per variant and grid point, named and checked as
// expand_sweep's. (expand_sweep gives a tpe search's startup trials only.)
std::vector<SweepMember> trial_members(const SweepSpec& spec, int64_t trial,
                                       const std::vector<std::string>& values);

}  // namespace kiln
