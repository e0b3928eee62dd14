// Every registered optimizer declares its per-parameter state (core/api/optimizer.h,
// DeclaredState) truly: after a step, the declared tensors are shaped as their parameter, and
// they are every tensor LibTorch's own serialisation writes of the parameter's state entry, byte
// for byte. An optimizer added without a declaration, or one that forgets a tensor, fails here.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "core/api/optimizer.h"
#include "core/config/config.h"
#include "core/config/registry.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

// The bytes of the defined tensors `entry` writes when serialised, read back from the archive.
int64_t serialized_tensor_bytes(const torch::optim::OptimizerParamState& entry) {
  torch::serialize::OutputArchive out;
  entry.serialize(out);
  std::stringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  int64_t total = 0;
  for (const std::string& key : in.keys()) {
    c10::IValue value;
    if (in.try_read(key, value) && value.isTensor() && value.toTensor().defined())
      total += static_cast<int64_t>(value.toTensor().nbytes());
  }
  return total;
}

TEST(OptimizerState, EveryOptimizerDeclaresEachStateTensorOfItsParameters) {
  // Each optimizer as shipped, and with the options that add state (momentum, amsgrad).
  std::vector<std::pair<std::string, std::vector<std::string>>> cases;
  for (const std::string& name : Catalog::global().names("optimizer"))
    cases.push_back({name, {}});
  cases.push_back({"sgd", {"optimizer.momentum=0.9"}});
  ASSERT_GE(cases.size(), 6u);
  for (const auto& [name, sets] : cases) {
    SCOPED_TRACE(name + (sets.empty() ? "" : " " + sets.front()));
    const ResolvedConfig config = load_config_text(
        "[model]\ntype = \"gpt\"\n[optimizer]\ntype = \"" + name + "\"\n", "t.toml", sets);
    ModelParameters parameters({torch::randn({8, 6}).requires_grad_(),
                                torch::randn({6}).requires_grad_(),
                                torch::randn({6, 8}).requires_grad_()});
    parameters.hidden = {false, true, true};  // muon orthogonalises the hidden matrix only
    auto optimizer = OptimizerRegistry::create(name, config.params("optimizer"), parameters);
    for (auto& p : parameters)
      p.mutable_grad() = torch::randn_like(p);
    optimizer->step();
    int64_t declared_bytes = 0;
    for (const auto& p : parameters) {
      int64_t mine = 0;
      for (const torch::Tensor* t : parameter_state(*optimizer, p)) {
        EXPECT_EQ(t->sizes(), p.sizes());
        mine += static_cast<int64_t>(t->nbytes());
      }
      // SGD without momentum keeps no entry at all.
      const auto entry = optimizer->state().find(compat::optimizer_state_key(p));
      EXPECT_EQ(mine,
                entry == optimizer->state().end() ? 0 : serialized_tensor_bytes(*entry->second));
      declared_bytes += mine;
    }
    EXPECT_EQ(optimizer_state_bytes(*optimizer), declared_bytes);
  }
}

}  // namespace
}  // namespace kiln
