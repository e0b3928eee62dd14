// The llama model against a forward pass written here from the published formulas (RMSNorm,
// rotate_half rotary embedding with Llama 3's frequency scaling, grouped-query attention,
// SwiGLU), and its Hugging Face names, config and sizes against Meta's published ones.
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/api/model.h"
#include "core/config/config.h"
#include "core/util/error.h"

namespace kiln {
namespace {

std::shared_ptr<ModelPlan> plan(const std::vector<std::string>& sets) {
  ResolvedConfig c = load_config_text("[model]\ntype = \"llama\"\n", "t.toml", sets);
  return ModelRegistry::create("llama", c.params("model"));
}

std::shared_ptr<Model> llama(const std::vector<std::string>& sets) {
  return build_model(*plan(sets));
}

const std::vector<std::string> kGqa = {
    "model.n_layer=2",     "model.n_head=4",      "model.n_kv_head=2",
    "model.n_embd=32",     "model.ffn_dim=48",    "model.block_size=16",
    "model.vocab_size=50", "model.norm_eps=1e-5", "model.rope_theta=10000"};

// Tied, Llama 3 scaling that touches all three frequency bands of an 8-wide head (original
// context 16: wavelengths 6.3 between the bounds 4 and 16, the rest above), and QK-norm.
const std::vector<std::string> kScaled = {"model.n_layer=2",
                                          "model.n_head=2",
                                          "model.n_kv_head=1",
                                          "model.n_embd=16",
                                          "model.ffn_dim=24",
                                          "model.block_size=16",
                                          "model.vocab_size=40",
                                          "model.tie_embeddings=true",
                                          "model.qk_norm=true",
                                          "model.rope_scaling_factor=8",
                                          "model.rope_low_freq_factor=1",
                                          "model.rope_high_freq_factor=4",
                                          "model.rope_original_context=16"};

struct Reference {
  std::map<std::string, torch::Tensor> w;  // the model's parameters by name
  int64_t n_layer, n_head, n_kv_head, dim;
  double eps = 1e-5, theta = 10000;
  double factor = 0, low = 1, high = 4, original = 8192;
  bool tied = false, qk_norm = false;

  torch::Tensor rms(const torch::Tensor& x, const torch::Tensor& g) const {
    return g * x / torch::sqrt(x.pow(2).mean(-1, true) + eps);
  }
  // Frequencies as HF's _compute_default_rope_parameters / _compute_llama3_parameters, in double.
  torch::Tensor frequencies(int64_t d) const {
    std::vector<double> f;
    for (int64_t i = 0; i < d / 2; ++i) {
      double inv = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(d));
      if (factor > 0) {
        const double wavelen = 2 * M_PI / inv;
        if (wavelen > original / low) {
          inv /= factor;
        } else if (wavelen >= original / high) {
          const double s = (original / wavelen - low) / (high - low);
          inv = (1 - s) * inv / factor + s * inv;
        }
      }
      f.push_back(inv);
    }
    return torch::tensor(f, torch::kDouble);
  }
  torch::Tensor rope(const torch::Tensor& x) const {  // [b, h, t, d]
    const int64_t t = x.size(2), d = x.size(3);
    auto angles = torch::outer(torch::arange(t, torch::kDouble), frequencies(d));
    auto cos = torch::cat({angles.cos(), angles.cos()}, -1).to(x.dtype());
    auto sin = torch::cat({angles.sin(), angles.sin()}, -1).to(x.dtype());
    auto x1 = x.narrow(3, 0, d / 2), x2 = x.narrow(3, d / 2, d / 2);
    return x * cos + torch::cat({-x2, x1}, -1) * sin;
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    const int64_t b = tokens.size(0), t = tokens.size(1), hd = dim / n_head;
    auto x = w.at("embed_tokens.weight").index_select(0, tokens.reshape(-1)).view({b, t, dim});
    auto causal = torch::ones({t, t}, torch::kBool).tril();
    for (int64_t l = 0; l < n_layer; ++l) {
      auto p = [&](const std::string& name) {
        return w.at("layers." + std::to_string(l) + "." + name);
      };
      auto h = rms(x, p("input_layernorm.weight"));
      auto q = h.matmul(p("self_attn.q_proj.weight").t()).view({b, t, n_head, hd});
      auto k = h.matmul(p("self_attn.k_proj.weight").t()).view({b, t, n_kv_head, hd});
      auto v = h.matmul(p("self_attn.v_proj.weight").t()).view({b, t, n_kv_head, hd});
      if (qk_norm) {
        q = rms(q, p("self_attn.q_norm.weight"));
        k = rms(k, p("self_attn.k_norm.weight"));
      }
      q = rope(q.transpose(1, 2));
      k = rope(k.transpose(1, 2)).repeat_interleave(n_head / n_kv_head, 1);
      v = v.transpose(1, 2).repeat_interleave(n_head / n_kv_head, 1);
      auto scores = q.matmul(k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
      auto attn = torch::softmax(scores.masked_fill(causal.logical_not(), -INFINITY), -1);
      auto y = attn.matmul(v).transpose(1, 2).reshape({b, t, dim});
      x = x + y.matmul(p("self_attn.o_proj.weight").t());
      h = rms(x, p("post_attention_layernorm.weight"));
      auto gate = h.matmul(p("mlp.gate_proj.weight").t());
      auto up = h.matmul(p("mlp.up_proj.weight").t());
      x = x + (gate * torch::sigmoid(gate) * up).matmul(p("mlp.down_proj.weight").t());
    }
    auto head = tied ? w.at("embed_tokens.weight") : w.at("lm_head.weight");
    return rms(x, w.at("norm.weight")).matmul(head.t());
  }
};

Reference reference_of(const Model& model) {
  Reference r;
  for (const auto& item : model.named_parameters())
    r.w[item.key()] = item.value().detach().to(torch::kDouble);
  return r;
}

// Random norm gains too, so that a norm applied in the wrong place shows.
void perturb_norms(Model& model) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    if (item.value().dim() == 1) item.value().uniform_(0.5, 1.5);
  }
}

TEST(Llama, ForwardMatchesTheFormulasWithGroupedQueryAttention) {
  torch::manual_seed(0);
  auto model = llama(kGqa);
  perturb_norms(*model);
  Reference r = reference_of(*model);
  r.n_layer = 2, r.n_head = 4, r.n_kv_head = 2, r.dim = 32;
  auto tokens = torch::randint(50, {3, 16}, torch::kLong);
  auto ours = model->forward(tokens).to(torch::kDouble);
  EXPECT_LT((ours - r.forward(tokens)).abs().max().item<double>(), 1e-5);
}

TEST(Llama, ForwardMatchesTheFormulasWithTiedHeadQkNormAndLlama3Scaling) {
  torch::manual_seed(1);
  auto model = llama(kScaled);
  perturb_norms(*model);
  Reference r = reference_of(*model);
  r.n_layer = 2, r.n_head = 2, r.n_kv_head = 1, r.dim = 16;
  r.tied = true, r.qk_norm = true, r.factor = 8, r.low = 1, r.high = 4, r.original = 16;
  auto tokens = torch::randint(40, {2, 16}, torch::kLong);
  auto ours = model->forward(tokens).to(torch::kDouble);
  EXPECT_LT((ours - r.forward(tokens)).abs().max().item<double>(), 1e-5);
  // Without the scaling the frequencies differ enough to show.
  r.factor = 0;
  EXPECT_GT((ours - r.forward(tokens)).abs().max().item<double>(), 1e-3);
}

TEST(Llama, NamesAreHuggingFacesAndTheLayersRunInOrder) {
  torch::manual_seed(0);
  auto model = llama(kGqa);
  std::set<std::string> names;
  for (const auto& item : model->named_parameters())
    names.insert(item.key());
  for (const char* name :
       {"embed_tokens.weight", "layers.0.self_attn.q_proj.weight",
        "layers.1.self_attn.k_proj.weight", "layers.1.self_attn.v_proj.weight",
        "layers.1.self_attn.o_proj.weight", "layers.0.mlp.gate_proj.weight",
        "layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight",
        "layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight",
        "norm.weight", "lm_head.weight"})
    EXPECT_EQ(names.count(name), 1u) << name;
  EXPECT_EQ(names.size(), 2u + 2u * 9u + 1u);
  EXPECT_EQ(llama(kScaled)->named_parameters().find("lm_head.weight"), nullptr);

  ASSERT_EQ(model->layers().size(), 4u);
  auto tokens = torch::randint(50, {2, 8}, torch::kLong);
  torch::Tensor x = tokens;
  for (const auto& layer : model->layers())
    x = layer->forward(x);
  EXPECT_TRUE(torch::equal(x, model->forward(tokens)));
  auto tied = llama(kScaled);
  EXPECT_EQ(tied->layers().back()->borrowed_parameters().size(), 1u);
}

TEST(Llama, PlanCountsWhatIsBuiltAndFlopsFollowTheFormula) {
  for (const auto& sets : {kGqa, kScaled}) {
    auto p = plan(sets);
    auto model = build_model(*p);
    EXPECT_EQ(p->parameters, static_cast<double>(model->parameter_count()));
    EXPECT_EQ(p->layers, static_cast<int64_t>(model->layers().size()));
  }
  // kGqa: untied, so the embedding's 50 x 32 is left out of N; 12 L H (head size) T.
  auto model = llama(kGqa);
  const double n = static_cast<double>(model->parameter_count() - 50 * 32);
  EXPECT_DOUBLE_EQ(model->flops_per_token(16), 6 * n + 12.0 * 2 * 4 * 8 * 16);
}

// A mixture of experts counts, per token, its top k of the routed experts and every other
// parameter (router and shared experts included): here from the built model's own tensors, a
// routed expert tensor weighing k / E of its size. Blocks 2 and 4 of 4 are MoE (moe_every = 2).
TEST(Llama, AnMoeTokenUsesItsTopKExpertsAndTheSharedOnes) {
  const std::vector<std::string> moe = {
      "model.n_layer=4",      "model.n_head=4",      "model.n_kv_head=2",
      "model.n_embd=32",      "model.ffn_dim=48",    "model.block_size=16",
      "model.vocab_size=50",  "model.moe_experts=8", "model.moe_top_k=2",
      "model.moe_ffn_dim=24", "model.moe_every=2",   "model.moe_shared_experts=1"};
  auto p = plan(moe);
  auto model = build_model(*p);
  double active = 0, routed = 0;
  for (const auto& item : model->named_parameters()) {
    const double size = static_cast<double>(item.value().numel());
    const bool expert = item.key().find(".mlp.experts.") != std::string::npos;
    routed += expert ? size : 0;
    active += expert ? size * 2 / 8 : size;
  }
  EXPECT_EQ(routed, 2.0 * 8 * 3 * 32 * 24);  // two blocks of 8 SwiGLU experts 24 wide
  EXPECT_EQ(p->parameters, static_cast<double>(model->parameter_count()));
  EXPECT_EQ(p->parameters - p->inactive_parameters, active);
  // Untied: the embedding's 50 x 32 is a lookup, left out of the FLOPs.
  EXPECT_DOUBLE_EQ(model->flops_per_token(16), 6 * (active - 50 * 32) + 12.0 * 4 * 4 * 8 * 16);
}

TEST(Llama, SwigluWidthFollowsMetasRounding) {
  // Llama 2 7B: 11008; Llama 3 8B (multiplier 1.3, multiple of 1024): 14336 (Meta's params.json).
  EXPECT_NE(plan({"model.n_embd=4096", "model.n_head=32"})->description.find("ffn_dim 11008"),
            std::string::npos);
  EXPECT_NE(plan({"model.n_embd=4096", "model.n_head=32", "model.ffn_dim_multiplier=1.3",
                  "model.multiple_of=1024"})
                ->description.find("ffn_dim 14336"),
            std::string::npos);
}

TEST(Llama, ExportImportRoundTripsAndMismatchesAreListed) {
  torch::manual_seed(0);
  auto a = llama(kGqa);
  auto exported = a->export_weights();
  std::map<std::string, torch::Tensor> weights(exported.begin(), exported.end());
  EXPECT_EQ(weights.count("model.embed_tokens.weight"), 1u);
  EXPECT_EQ(weights.count("model.layers.1.mlp.down_proj.weight"), 1u);
  EXPECT_EQ(weights.count("model.norm.weight"), 1u);
  EXPECT_EQ(weights.count("lm_head.weight"), 1u);
  torch::manual_seed(5);
  auto b = llama(kGqa);
  b->import_weights(weights);
  auto tokens = torch::randint(50, {2, 8}, torch::kLong);
  EXPECT_TRUE(torch::equal(a->forward(tokens), b->forward(tokens)));

  weights.erase("model.norm.weight");
  weights["model.layers.0.mlp.up_proj.weight"] = torch::zeros({47, 32});
  weights["model.extra.weight"] = torch::zeros({1});
  try {
    b->import_weights(weights);
    FAIL() << "accepted";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("(3 problem(s))"), std::string::npos) << m;
    EXPECT_NE(m.find("missing model.norm.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("model.layers.0.mlp.up_proj.weight is [47, 32] but the model needs [48, 32]"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("unexpected model.extra.weight"), std::string::npos) << m;
  }
}

TEST(Llama, InterchangeConfigIsALlamaConfig) {
  auto c = nlohmann::json::parse(llama(kGqa)->interchange_config());
  EXPECT_EQ(c["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(c["model_type"], "llama");
  EXPECT_EQ(c["hidden_size"], 32);
  EXPECT_EQ(c["intermediate_size"], 48);
  EXPECT_EQ(c["num_attention_heads"], 4);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["num_hidden_layers"], 2);
  EXPECT_EQ(c["max_position_embeddings"], 16);
  EXPECT_EQ(c["vocab_size"], 50);
  EXPECT_EQ(c["tie_word_embeddings"], false);
  EXPECT_TRUE(c["rope_scaling"].is_null());
  auto scaled = nlohmann::json::parse(llama({"model.n_layer=1", "model.n_embd=16", "model.n_head=2",
                                             "model.vocab_size=100", "model.rope_scaling_factor=8"})
                                          ->interchange_config());
  EXPECT_EQ(scaled["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(scaled["rope_scaling"]["original_max_position_embeddings"], 8192);
}

TEST(Llama, BadShapesAreOneLine) {
  EXPECT_THROW(plan({"model.n_embd=30", "model.n_head=4"}), UserError);
  EXPECT_THROW(plan({"model.n_embd=32", "model.n_head=4", "model.n_kv_head=3"}), UserError);
}

}  // namespace
}  // namespace kiln
