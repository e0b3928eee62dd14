// Hashes for draws that are a pure function of their keys rather than of a generator's history,
// so that a draw is the same whatever the order, batch or shard it is made in (a task's few-shot
// examples and sampled tokens, a random search's trials), and FNV-1a for stable text hashes (the
// config hash). Header-only: the config loader and the fuzzers use it without a library.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

// splitmix64's step: x advanced by the golden ratio, then finalized.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// SplitMix64's i-th output (0 = the first) from state `seed`: the stream's counter form, which the
// dropout masks key by (core/layers/random_draws.h).
inline uint64_t splitmix64_output(uint64_t seed, uint64_t i) {
  return splitmix64(seed + i * 0x9E3779B97F4A7C15ULL);
}

// FNV-1a, 64 bits: the same value on every build and machine.
inline uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// A double in [0, 1) from the top 53 bits of `bits`.
inline double unit_interval(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace kiln
