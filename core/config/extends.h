// `extends`: a TOML file built on others. At its top (before the first [section]),
//
//   extends = "base.toml"                    # or a list: extends = ["a.toml", "b.toml"]
//
// names the files it starts from, relative to the folder of the file that names them. A base may
// extend others in turn. They are applied in order, each base before the files that extend it,
// the file itself last, and a later file's keys win over an earlier one's; a file reached twice
// (two bases sharing one) is applied once, where it is first reached. How the layers merge is
// the reader's business (core/config/loader.cpp for experiment files); this file finds them, in
// order, and refuses a chain that cannot be read with one line naming it:
//
//   a.toml:1:11: extends 'b.toml', which extends 'a.toml': a cycle
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <toml++/toml.h>

namespace kiln {

struct TomlLayer {
  std::string path;    // as reached: the naming file's folder joined with the name it wrote
  std::string sha256;  // of the file's bytes (core/util/sha256.h)
  toml::table root;    // parsed, its `extends` key removed
};

// Why a base is not a file of the kind wanted, as what follows its quoted path in the error
// ("is a sweep file ..., not an experiment file: ..."); "" when it is one.
using LayerRefusal = std::function<std::string(const toml::table& root)>;

// The chain of `path`, whose bytes are `text`: the files its `extends` names, recursively, then
// `path` itself. `kind` names such files in errors ("an experiment file"). A UserError for a cycle,
// a base that is missing, a directory or unreadable, or one `refuse` objects to (naming the chain
// from the place in `path` that starts it); for an `extends` that is not a file name or a list
// of them (at its place); and for TOML syntax errors (at their file:line:col).
std::vector<TomlLayer> read_extends_chain(const std::string& path, const std::string& text,
                                          const std::string& kind, const LayerRefusal& refuse);

}  // namespace kiln
