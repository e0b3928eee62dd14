// A run's resolved config as JSON, kept beside its TOML text in runs.config_json (migration 9):
// PostgreSQL looks --where and --sort config keys up in it as jsonb (core/store/db/postgres.h).
#pragma once

#include <string>

namespace kiln {

// The TOML text as a JSON object (a non-finite float becomes null, a date its TOML text); "{}"
// for text that is no TOML (a store edited by hand).
std::string config_json(const std::string& config_toml);

}  // namespace kiln
