// The environment as Kiln reads it: the one way to read a variable, and the one integer parser
// for what launchers and users set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, SLURM_*,
// MASTER_PORT, KILN_SERVER_WAIT_SECONDS, ...). A number is the whole string: "12abc", "",
// " 3" and "3.0" are not numbers, and neither is one outside the range the caller allows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

// The variable's value; nothing when it is unset or empty (launchers export empty ones).
std::optional<std::string> env_text(const char* name);

// A decimal integer (an optional sign, then digits only) in [min, max]; nothing otherwise.
std::optional<int64_t> parse_integer(const std::string& text, int64_t min, int64_t max);

// The variable as an integer in [min, max]; `fallback` when it is unset or empty. A UserError
// "environment variable NAME='VALUE' is not a whole number from MIN to MAX: set it to one, or
// unset it" otherwise.
int64_t env_integer(const char* name, int64_t fallback, int64_t min, int64_t max);

}  // namespace kiln
