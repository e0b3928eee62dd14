// Experiment config: a TOML file plus `--set section.key=value` overrides, validated against
// the sections core declares and the parameters each chosen plugin declares, then resolved
// (every default filled in). Nothing is silently accepted: an unknown key, a wrong type or an
// out-of-range value is a UserError naming file:line:col, the key path and, for a typo, the
// nearest valid key.
//
// An experiment file may extend others (`extends = "base.toml"`, extends.h): its own keys win
// over its bases', and `--set` wins over all. Every key of a resolved config knows where its
// value came from (source_of: a file's line, a --set, or a default), and the config knows the
// files it was read from (sources), for `kiln config`, the run store and `kiln runs diff`.
//
// This header is the loader (loader.cpp: the layers merged and checked). The room's other parts:
// resolved_config.h (what loading gives), key_source.h (where each value came from),
// set_override.h (one --set read), schema.h (the sections core declares), toml_text.h (the one
// guarded TOML parse), extends.h (the chain of files), canonical.h (how values and configs are
// written, flattened and hashed). It includes what callers almost always want with it.
#pragma once

#include <string>
#include <vector>

#include "core/config/canonical.h"
#include "core/config/resolved_config.h"
#include "core/config/schema.h"

namespace kiln {

ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides);
// The same for text already in memory; `source_name` names it in errors, and the files its
// `extends` names are found relative to the folder that `source_name` would be in.
ResolvedConfig load_config_text(const std::string& toml_text, const std::string& source_name,
                                const std::vector<std::string>& overrides);

}  // namespace kiln
