// The LoRA adapter (plugins/lora/adapter_lora.cpp) on gpt and llama: step 0 is the base model; an
// adapted model computes what a model whose weights are W + (alpha/r) B A (made here, in double)
// computes; only the adapter trains; its PEFT files carry the names and fields of PEFT's format
// (PEFT's LoraConfig and its "base_model.model.<module>.lora_A.weight" keys, as PEFT's
// save_pretrained writes them, written out below); and bad targets are one clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/api/adapter.h"
#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/config/config.h"
#include "core/util/error.h"

namespace kiln {
namespace {

const std::vector<std::string> kLoraGpt = {"model.n_layer=2", "model.n_head=2", "model.n_embd=16",
                                           "model.block_size=8", "model.vocab_size=40"};
const std::vector<std::string> kLoraLlama = {"model.n_layer=2",    "model.n_head=4",
                                             "model.n_kv_head=2",  "model.n_embd=16",
                                             "model.block_size=8", "model.vocab_size=40"};

std::shared_ptr<Model> model(const std::string& type, const std::vector<std::string>& sets) {
  torch::manual_seed(0);
  ResolvedConfig c = load_config_text("[model]\ntype = \"" + type + "\"\n", "t.toml", sets);
  return build_model(*ModelRegistry::create(type, c.params("model")));
}

std::shared_ptr<Adapter> lora(const std::vector<std::string>& sets) {
  ResolvedConfig c =
      load_config_text("[model]\ntype = \"gpt\"\n[adapter]\ntype = \"lora\"\n", "t.toml", sets);
  return AdapterRegistry::create("lora", c.params("adapter"));
}

// Every lora_B at random, so the adapters change the output.
void randomise_b(Model& m) {
  torch::NoGradGuard no_grad;
  for (auto& item : m.named_parameters()) {
    if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0.0, 0.5);
  }
}

const std::vector<std::string> kLoraTransformerLm = {
    "model.num_layers=2",  "model.nhead=2",   "model.d_model=16", "model.dim_feedforward=32",
    "model.vocab_size=40", "model.max_len=8", "model.dropout=0"};

TEST(Lora, StepZeroComputesTheBaseModel) {
  for (const auto& [type, sets] : {std::pair("gpt", kLoraGpt), std::pair("llama", kLoraLlama),
                                   std::pair("transformer_lm", kLoraTransformerLm)}) {
    auto m = model(type, sets);
    const auto tokens = torch::randint(40, {2, 8}, torch::kLong);
    const auto base = m->forward(tokens);
    lora({})->attach(*m, true);
    EXPECT_TRUE(torch::equal(m->forward(tokens), base)) << type;
  }
}

// The adapted model against a copy whose targeted weights are W + s B A, computed in double
// here: s = alpha / r (alpha / sqrt(r) with rslora).
TEST(Lora, AnAdaptedModelComputesTheMergedWeightsFormula) {
  for (const bool rslora : {false, true}) {
    auto adapted = model("llama", kLoraLlama);
    auto merged = model("llama", kLoraLlama);  // the same seed: the same weights
    lora({"adapter.rank=4", "adapter.alpha=8", "adapter.targets=q_proj,down_proj",
          rslora ? "adapter.rslora=true" : "adapter.rslora=false"})
        ->attach(*adapted, true);
    randomise_b(*adapted);
    const double s = rslora ? 8.0 / 2.0 : 8.0 / 4.0;
    auto params = adapted->named_parameters();
    torch::NoGradGuard no_grad;
    int folded = 0;
    for (auto& item : merged->named_parameters()) {
      std::string site = item.key();
      if (site.find("q_proj") == std::string::npos && site.find("down_proj") == std::string::npos)
        continue;
      site = site.substr(0, site.size() - std::string(".weight").size());
      for (char& c : site)
        if (c == '.') c = '_';
      const auto a = params["adapter." + site + ".lora_A"].to(torch::kDouble);
      const auto b = params["adapter." + site + ".lora_B"].to(torch::kDouble);
      item.value().copy_(item.value().to(torch::kDouble) + s * b.matmul(a));
      ++folded;
    }
    EXPECT_EQ(folded, 4);  // q_proj and down_proj of 2 blocks
    adapted->eval();
    merged->eval();
    const auto tokens = torch::randint(40, {2, 8}, torch::kLong);
    EXPECT_TRUE(torch::allclose(adapted->forward(tokens), merged->forward(tokens), 1e-5, 1e-5));
  }
}

TEST(Lora, OnlyTheAdapterTrainsAndTheBaseIsNeverWritten) {
  auto m = model("gpt", kLoraGpt);
  std::map<std::string, torch::Tensor> before;
  for (const auto& item : m->named_parameters())
    before[item.key()] = item.value().detach().clone();
  lora({"adapter.targets=c_attn"})->attach(*m, true);
  const ModelParameters trained = parameters_of(*m);
  ASSERT_EQ(trained.size(), 4u);  // lora_A and lora_B of c_attn in 2 blocks
  for (const auto& p : trained)
    EXPECT_TRUE(p.requires_grad());
  torch::optim::AdamW optimizer(trained, torch::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    const auto tokens = torch::randint(40, {2, 8}, torch::kLong);
    const auto logits = m->forward(tokens);
    torch::nn::functional::cross_entropy(logits.view({-1, 40}), tokens.view(-1)).backward();
    optimizer.step();
  }
  for (const auto& item : m->named_parameters()) {
    if (item.key().rfind("adapter.", 0) == 0) continue;
    EXPECT_FALSE(item.value().grad().defined()) << item.key();
    EXPECT_TRUE(torch::equal(item.value(), before.at(item.key()))) << item.key();
  }
  // The B matrices moved away from zero.
  EXPECT_GT(m->named_parameters()["adapter.h_0_c_attn.lora_B"].abs().max().item<double>(), 0);
}

// PEFT's adapter_config.json fields and tensor names for GPT-2 (Conv1D: fan_in_fan_out) and
// Llama, as `peft.LoraConfig` and `PeftModel.save_pretrained` write them.
TEST(Lora, PeftFilesCarryPeftsNamesAndFields) {
  auto g = model("gpt", kLoraGpt);
  auto adapter = lora({"adapter.rank=4", "adapter.alpha=8", "adapter.targets=c_attn,c_proj"});
  adapter->attach(*g, true);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, t] : adapter->peft_weights(*g))
    shapes[name] = t.sizes().vec();
  EXPECT_EQ(shapes.size(), 12u);  // c_attn, attn.c_proj, mlp.c_proj of 2 blocks, A and B
  EXPECT_EQ(shapes.at("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"),
            (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(shapes.at("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight"),
            (std::vector<int64_t>{48, 4}));
  EXPECT_EQ(shapes.at("base_model.model.transformer.h.1.mlp.c_proj.lora_A.weight"),
            (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(shapes.at("base_model.model.transformer.h.1.attn.c_proj.lora_B.weight"),
            (std::vector<int64_t>{16, 4}));
  const auto config = nlohmann::json::parse(adapter->peft_config(*g, "/models/gpt2"));
  EXPECT_EQ(config.at("peft_type"), "LORA");
  EXPECT_EQ(config.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(config.at("base_model_name_or_path"), "/models/gpt2");
  EXPECT_EQ(config.at("r"), 4);
  EXPECT_EQ(config.at("lora_alpha"), 8.0);
  EXPECT_EQ(config.at("lora_dropout"), 0.0);
  EXPECT_EQ(config.at("target_modules"), (std::vector<std::string>{"c_attn", "c_proj"}));
  EXPECT_EQ(config.at("fan_in_fan_out"), true);
  EXPECT_EQ(config.at("bias"), "none");
  EXPECT_EQ(config.at("use_rslora"), false);
  EXPECT_EQ(config.at("init_lora_weights"), true);

  auto l = model("llama", kLoraLlama);
  auto on_llama = lora({"adapter.targets=all-linear"});
  on_llama->attach(*l, true);
  std::set<std::string> names;
  for (const auto& [name, t] : on_llama->peft_weights(*l))
    names.insert(name);
  EXPECT_EQ(names.size(), 2u * 7u * 2u);  // 7 linear layers a block, 2 blocks, A and B
  EXPECT_TRUE(names.count("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_TRUE(names.count("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"));
  EXPECT_FALSE(names.count("base_model.model.lm_head.lora_A.weight"));
  const auto llama_config = nlohmann::json::parse(on_llama->peft_config(*l, "base"));
  EXPECT_EQ(llama_config.at("fan_in_fan_out"), false);
  EXPECT_EQ(llama_config.at("target_modules"),
            (std::vector<std::string>{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj",
                                      "up_proj", "v_proj"}));
}

TEST(Lora, MergeFoldsTheAdapterIntoTheWeightsAndRemovesIt) {
  auto m = model("gpt", kLoraGpt);
  auto adapter = lora({"adapter.targets=c_fc"});
  adapter->attach(*m, true);
  randomise_b(*m);
  m->eval();
  const auto tokens = torch::randint(40, {2, 8}, torch::kLong);
  const auto adapted = m->forward(tokens);
  adapter->merge(*m);
  for (const auto& item : m->named_parameters())
    EXPECT_EQ(item.key().find("adapter."), std::string::npos) << item.key();
  EXPECT_TRUE(torch::allclose(m->forward(tokens), adapted, 1e-5, 1e-5));
}

// A frozen linear weight as adapter.base_dtype keeps it, in double: rounded to bf16, or row i
// rounded to a multiple of s_i = max |w_i| / 127 (in fp32, as stored) within 127 of them.
at::Tensor kept_weight(const at::Tensor& w, const std::string& dtype) {
  if (dtype == "bf16") return w.to(torch::kBFloat16).to(torch::kDouble);
  at::Tensor s = w.abs().amax(1, /*keepdim=*/true).div(127.0);
  s = torch::where(s == 0, torch::ones_like(s), s);
  return (w / s).round().clamp(-127, 127).to(torch::kDouble) * s.to(torch::kDouble);
}

// adapter.base_dtype = "bf16" or "int8": the blocks' linear weights become bf16 (half their
// bytes) or int8 (a quarter) while everything else stays fp32, the adapted model computes the
// formula above over the weights as kept, the adapter trains, and a merge sums in fp32.
TEST(Lora, ANarrowBaseComputesTheFormulaOverItsKeptWeightsAndMergesInFp32) {
  for (const auto& [dtype, type] : {std::pair<std::string, torch::Dtype>{"bf16", torch::kBFloat16},
                                    std::pair<std::string, torch::Dtype>{"int8", torch::kChar}}) {
    SCOPED_TRACE(dtype);
    auto adapted = model("llama", kLoraLlama);
    auto merged = model("llama", kLoraLlama);
    int64_t bytes_before = 0;
    for (const auto& p : adapted->parameters())
      bytes_before += static_cast<int64_t>(p.nbytes());
    auto adapter = lora({"adapter.rank=4", "adapter.alpha=8", "adapter.targets=q_proj,down_proj",
                         "adapter.base_dtype=" + dtype});
    adapter->attach(*adapted, true);
    randomise_b(*adapted);
    auto params = adapted->named_parameters();
    int64_t narrowed = 0, linear_elements = 0;
    for (const auto& item : params) {
      const bool block_linear = item.key().rfind("adapter.", 0) != 0 &&
                                item.key().find("proj.weight") != std::string::npos;
      EXPECT_EQ(item.value().scalar_type(), block_linear ? type : torch::kFloat) << item.key();
      if (block_linear) linear_elements += item.value().numel();
      if (item.value().scalar_type() == type) ++narrowed;
    }
    EXPECT_EQ(narrowed, 14);  // 7 projections in each of 2 blocks
    int64_t base_bytes = 0;
    for (const auto& item : params)
      if (item.key().rfind("adapter.", 0) != 0)
        base_bytes += static_cast<int64_t>(item.value().nbytes());
    EXPECT_EQ(base_bytes, bytes_before - (4 - static_cast<int64_t>(torch::elementSize(type))) *
                                             linear_elements);
    // The memory check counts the weights at the width the narrowest of them has once attached.
    int64_t narrowest = 8;
    for (const auto& item : params)
      narrowest = std::min<int64_t>(narrowest, static_cast<int64_t>(item.value().element_size()));
    EXPECT_EQ(adapter->narrowest_weight_bytes(), narrowest);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : merged->named_parameters()) {
        if (item.key().find("proj.weight") == std::string::npos) continue;
        at::Tensor w = kept_weight(item.value(), dtype);
        std::string site = item.key().substr(0, item.key().size() - std::string(".weight").size());
        for (char& c : site)
          if (c == '.') c = '_';
        if (params.contains("adapter." + site + ".lora_A")) {
          w = w + 2.0 * params["adapter." + site + ".lora_B"]
                            .to(torch::kDouble)
                            .matmul(params["adapter." + site + ".lora_A"].to(torch::kDouble));
        }
        item.value().copy_(w);
      }
    }
    adapted->eval();
    merged->eval();
    const auto tokens = torch::randint(40, {2, 8}, torch::kLong);
    const auto expected = merged->forward(tokens);
    EXPECT_TRUE(torch::allclose(adapted->forward(tokens), expected, 1e-5, 1e-5));
    adapted->train();
    torch::nn::functional::cross_entropy(adapted->forward(tokens).view({-1, 40}), tokens.view(-1))
        .backward();
    for (const auto& p : parameters_of(*adapted)) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
    }
    adapter->merge(*adapted);
    for (const auto& p : adapted->parameters())
      EXPECT_EQ(p.scalar_type(), torch::kFloat);
    adapted->eval();
    EXPECT_TRUE(torch::allclose(adapted->forward(tokens), expected, 1e-5, 1e-5));
  }
}

// Each target must pick a layer: one that picks none is refused even beside one that does.
TEST(Lora, TargetsThatNameNoLinearLayerAreOneErrorListingThem) {
  const auto message_of = [](const std::string& targets) {
    auto m = model("gpt", kLoraGpt);
    try {
      lora({"adapter.targets=" + targets})->attach(*m, true);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  for (const std::string targets : {"q_proj", "c_attn,q_proj"}) {
    const std::string message = message_of(targets);
    EXPECT_NE(
        message.find("adapter.targets = \"" + targets + "\": \"q_proj\" names no linear layer"),
        std::string::npos)
        << message;
    EXPECT_NE(message.find("c_attn, c_fc, c_proj"), std::string::npos) << message;
  }
}

TEST(Lora, DropoutDrawsOnlyInTraining) {
  auto m = model("gpt", kLoraGpt);
  lora({"adapter.dropout=0.5"})->attach(*m, true);
  randomise_b(*m);
  const auto tokens = torch::randint(40, {2, 8}, torch::kLong);
  m->eval();
  const auto evaluated = m->forward(tokens);
  EXPECT_TRUE(torch::equal(m->forward(tokens), evaluated));
  m->train();
  EXPECT_FALSE(torch::allclose(m->forward(tokens), evaluated));
}

}  // namespace
}  // namespace kiln
