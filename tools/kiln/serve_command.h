// `kiln serve`: the live dashboard over HTTP. The only translation unit that includes httplib.h
// (Debian's libcpp-httplib-dev, header-only and slow to compile): the page's files come from the
// binary (tools/kiln/web_assets.h) and every answer under /api/ from
// core/app/presentation/dashboard_api.h.
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln serve` to `app`.
ChosenCommand add_serve_command(CLI::App& app);

}  // namespace kiln
