// Precompiled once per build (CMake target_precompile_headers) and reused by every LibTorch
// translation unit: parsing these headers is most of a torch TU's ~20 s compile time.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn.h>
#include <torch/optim.h>
#include <torch/serialize.h>
