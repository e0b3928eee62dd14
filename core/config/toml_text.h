// The one way TOML text becomes a table. Every TOML text Kiln reads (experiment files, --set
// values, sweep files, configs stored in the run store) goes through here, because the parser
// must be guarded: toml++ 3.3.0 (Debian 12's) reaches a __builtin_unreachable() when it meets
// some non-ASCII characters where it expects whitespace or a key (outside strings and
// comments, in quoted keys, after a line-ending backslash in a """ string; upstream issues 190
// and 295). Such characters are never valid there, or (the last) vanishingly rare, so text
// holding them is refused with their position before the parser sees it. So is text whose
// keys have more than kTomlMaxKeyParts dotted parts (`[a.a.a....b]`: toml++ recurses once per
// part, and 50,000 of them overflow the stack) or whose arrays and inline tables nest more than
// kTomlMaxNesting deep (toml++ stops at 256 itself; Kiln's values nest at most two deep).
#pragma once

#include <optional>
#include <string>

#include <toml++/toml.h>

#include "core/config/params.h"

namespace kiln {

constexpr int kTomlMaxKeyParts = 64;
constexpr int kTomlMaxNesting = 32;

// `text` parsed; `source` (a file path, or what the text is) names it in errors. A UserError
// "source:line:col: TOML syntax error: what" for unsafe or malformed text.
toml::table parse_toml(const std::string& text, const std::string& source);

// The same for text that need not be TOML at all (a --set value, a config stored in a run
// store that may have been edited by hand): nothing when it is unsafe or malformed.
std::optional<toml::table> try_parse_toml(const std::string& text);

// A TOML number, boolean or string as a Kiln value (format_value, canonical.h, writes it);
// nothing for dates, arrays and tables, which no Kiln key takes.
std::optional<ParamValue> scalar_value(const toml::node& node);

}  // namespace kiln
