// A run's [adapter] (core/api/adapter.h): made before any model is built, and attached to the
// model once its weights are in. Apart from assemble.cpp, which asks for it, so that what an
// adapter requires of a run reads in one place.
#pragma once

#include <memory>

#include "core/api/adapter.h"
#include "core/config/config.h"

namespace kiln {

// The adapter the config names; every strategy trains one (fsdp refuses it at its attach).
std::shared_ptr<Adapter> make_adapter(const ResolvedConfig& config);

// adapter.attach(model, starts), its UserErrors placed at the adapter key they name.
void attach_adapter(const ResolvedConfig& config, Adapter& adapter, Model& model, bool starts);

}  // namespace kiln
