// The config sections core declares: their order, their documentation and, for core sections,
// their keys. A plugin section's keys come from the plugin its `type` names (registry.h). The
// loader validates against this, the canonical form and the hash follow its order, and
// `kiln plugins` prints it.
#pragma once

#include <string>
#include <vector>

#include "core/config/params.h"

namespace kiln {

// The config sections in the order a resolved config lists them. A plugin section's `type`
// picks a plugin of the same kind as the section's name.
struct SectionSchema {
  std::string name;
  bool is_plugin = false;
  std::string doc;
  // A core section's keys; for a plugin section, keys every plugin of the kind takes besides
  // its own (e.g. model.init_from).
  std::vector<ParamSpec> params;
  // A plugin section added after runs were made without it: at its default plugin with no
  // hashed key, it stays out of the hash, so those runs keep theirs.
  bool added_later = false;
};
const std::vector<SectionSchema>& config_sections();
// The spec of `section`.`key` under plugin `type` (empty for a core section): the section's own
// keys, then the plugin's; null for a key neither declares.
const ParamSpec* declared_param(const std::string& section, const std::string& type,
                                const std::string& key);
// run.db's default, and every --db's: $KILN_DB when set (a path or a postgresql:// URL), else
// runs/kiln.db.
std::string default_run_db();

}  // namespace kiln
