// Weights given under a model's interchange names (Hugging Face's: core/api/model.h's
// import_weights) checked against those the model needs, before any is copied: every missing,
// misshapen and unexpected tensor in one UserError, so that one try shows all that is wrong with
// a checkpoint rather than its first problem.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kiln {

// A tensor the model needs under its interchange name, in the shape that name holds it in.
struct InterchangeTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// Returns when `given` holds every tensor of `needed` in its shape and nothing else but names
// `ignorable` accepts (what checkpoints carry besides the weights: buffers, a tied head's copy).
// Otherwise a UserError "the weights do not fit this <model> (N problem(s)): ...", the missing and
// misshapen tensors in `needed`'s order, then the unexpected ones in `given`'s.
void check_interchange_weights(const std::map<std::string, at::Tensor>& given,
                               const std::vector<InterchangeTensor>& needed,
                               const std::string& model,
                               const std::function<bool(const std::string& name)>& ignorable);

}  // namespace kiln
