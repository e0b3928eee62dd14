// DeepSeek-V3's auxiliary-loss-free load balancing (docs/moe.md): after each step, every mixture
// of experts (core/layers/moe.h) that routes with a bias moves it toward the experts the step's
// tokens, on every rank together, used less than the mean.
#pragma once

namespace kiln {

class Model;
class ParallelStrategy;

// Collective when the model has such a mixture (every rank holds the same model, so every rank
// calls the strategy's sum, once for all of them); nothing otherwise. Called by the trainer after
// each step's update, also one that was skipped: the loads were counted all the same.
void balance_expert_biases(Model& model, ParallelStrategy& parallel);

}  // namespace kiln
