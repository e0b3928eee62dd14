// `kiln prepare`: text files -> token shards plus their tokenizer (core/data/prepare.h).
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln prepare` to `app`.
ChosenCommand add_prepare_command(CLI::App& app);

}  // namespace kiln
