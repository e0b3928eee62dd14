// A run's [adapter] (core/api/adapter.h): made and checked against the run's strategy before any
// model is built, and attached to the model once its weights are in. Apart from assemble.cpp,
// which asks for it, so that what an adapter requires of a run reads in one place.
#pragma once

#include <memory>

#include "core/api/adapter.h"
#include "core/api/parallel.h"
#include "core/config/config.h"

namespace kiln {

// The adapter the config names. One that adapts trains where every rank holds the whole model and
// averages every gradient (a UserError at adapter.type otherwise), unless `loading`: eval,
// sample and export read a snapshot in one process.
std::shared_ptr<Adapter> make_adapter(const ResolvedConfig& config,
                                      const ParallelStrategy& parallel, bool loading);

// adapter.attach(model, starts), its UserErrors placed at the adapter key they name.
void attach_adapter(const ResolvedConfig& config, Adapter& adapter, Model& model, bool starts);

}  // namespace kiln
