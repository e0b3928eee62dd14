// A TOML value as the parameter its spec declares (core/config/params.h): the one conversion the
// loader applies to every key a file or a --set writes, so that a key reads alike from both.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "core/config/key_source.h"
#include "core/config/params.h"

namespace kiln {

// `node`, written at `at` for the key `path` ("adapter.targets"), as `spec`'s type, checked
// against its bounds and choices. A string key that takes a list (ParamSpec::list) also takes an
// array of strings, each free of commas, joined by commas. A UserError "at: why" otherwise.
ParamValue param_value(const ParamSpec& spec, const toml::node& node, const SourceLoc& at,
                       const std::string& path);

}  // namespace kiln
