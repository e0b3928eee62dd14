// Reading a sweep file's [search] and [space] tables (the format is in
// core/app/sweeps/spec_file.h): each key checked where it is written, with its file:line:col in the
// error, and laid over what an earlier file of the `extends` chain gave. What depends on the base
// experiment (the metric, the steps) is checked once the chain is read (core/app/sweeps/spec.cpp,
// search_space.cpp).
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/app/sweeps/search_space.h"

namespace kiln {

// [search]: type, trials, seed, startup, metric, mode, and asha's sampler, min_steps,
// max_steps, reduction_factor and grace; each key replaces an earlier file's.
void read_search(const toml::table& table, SweepSearch& out);

// [space] optimizer.lr = { ... } (parsed as space.optimizer.lr): the distribution of each key,
// each in place of an earlier file's distribution of that key. `prefix`: "" at the top.
void read_space(const toml::table& table, const std::string& prefix,
                std::vector<SweepDistribution>& out);

}  // namespace kiln
