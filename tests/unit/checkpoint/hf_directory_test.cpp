// Hugging Face weights in: 16-bit floats, sharded directories, config.json checks, and GPT-2 as
// the Hub stores it. Every file here is made by the test's own safetensors writer (a JSON
// header and little-endian bytes laid out by hand), not by Kiln's, and the GPT-2 logits are
// checked against a forward pass written here from the paper's formulas.
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/api/model.h"
#include "core/checkpoint/hf_directory.h"
#include "core/config/config.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::TempDir;
using testing::user_error_of;
using testing::write_text;

struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;  // little-endian, as this machine stores them
};

// A safetensors file by the format's definition: u64 header length, JSON header, data.
void write_raw_safetensors(const std::string& path, const std::vector<RawTensor>& tensors) {
  std::string header = "{", data;
  for (const auto& t : tensors) {
    if (header.size() > 1) header += ",";
    header +=
        fmt::format(R"("{}":{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", t.name, t.dtype,
                    fmt::join(t.shape, ","), data.size(), data.size() + t.bytes.size());
    data += t.bytes;
  }
  header += "}";
  const uint64_t length = header.size();
  std::string file(reinterpret_cast<const char*>(&length), 8);
  write_text(path, file + header + data);
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

RawTensor f32(const std::string& name, const torch::Tensor& t) {
  auto c = t.contiguous().to(torch::kFloat);
  return {name, "F32", c.sizes().vec(),
          std::string(static_cast<const char*>(c.data_ptr()), c.numel() * sizeof(float))};
}

TEST(HfWeights, SixteenBitFloatsLoadAsFp32) {
  TempDir dir;
  // IEEE half: 1, -2, 1/3 rounded to 0x3555 = 0.333251953125, the largest finite 65504.
  // bfloat16 (fp32's top half): 1, -3, 0x3eab = 0.333984375, 0x4049 = 3.140625.
  write_raw_safetensors(
      dir / "h.safetensors",
      {{"half", "F16", {4}, bytes_of<uint16_t>({0x3c00, 0xc000, 0x3555, 0x7bff})},
       {"brain", "BF16", {2, 2}, bytes_of<uint16_t>({0x3f80, 0xc040, 0x3eab, 0x4049})}});
  auto weights = read_model_weights(dir / "h.safetensors", "");
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_EQ(weights["half"].scalar_type(), torch::kFloat);
  EXPECT_EQ(weights["brain"].scalar_type(), torch::kFloat);
  auto half = weights["half"].contiguous();
  const std::vector<float> want_half = {1.0f, -2.0f, 0.333251953125f, 65504.0f};
  EXPECT_EQ(std::vector<float>(half.data_ptr<float>(), half.data_ptr<float>() + 4), want_half);
  auto brain = weights["brain"].contiguous();
  EXPECT_EQ(brain.sizes().vec(), (std::vector<int64_t>{2, 2}));
  const std::vector<float> want_brain = {1.0f, -3.0f, 0.333984375f, 3.140625f};
  EXPECT_EQ(std::vector<float>(brain.data_ptr<float>(), brain.data_ptr<float>() + 4), want_brain);
}

TEST(HfWeights, AHeaderThatLiesAboutSizesIsRefused) {
  TempDir dir;
  // One float whose offsets span two; 1000 floats in a file of 8 bytes; a shape whose element
  // count overflows 64 bits.
  auto error_of = [&](const std::string& file) {
    return user_error_of([&] { read_model_weights(dir / file, ""); });
  };
  write_raw_safetensors(dir / "a.safetensors", {{"w", "F32", {1}, std::string(8, '\0')}});
  EXPECT_NE(error_of("a.safetensors").find("data offsets that do not fit"), std::string::npos);
  write_raw_safetensors(dir / "c.safetensors", {{"w", "F32", {1000}, std::string(8, '\0')}});
  EXPECT_NE(error_of("c.safetensors").find("more than the file holds"), std::string::npos);
  write_raw_safetensors(dir / "b.safetensors",
                        {{"w", "F32", {4611686018427387904, 4}, std::string()}});
  EXPECT_NE(error_of("b.safetensors").find("more than the file holds"), std::string::npos);
}

const char* kConfig = R"({"architectures": ["Tiny"], "model_type": "tiny", "width": 3,
  "depth": 2, "eps": 1e-05, "torch_dtype": "bfloat16", "dropout": 0.1})";

TEST(HfWeights, AShardedDirectoryLoadsEveryTensorFromItsFile) {
  TempDir dir;
  write_raw_safetensors(
      dir / "model-00001-of-00002.safetensors",
      {{"a", "F32", {2}, bytes_of<float>({1, 2})}, {"b", "F32", {1}, bytes_of<float>({3})}});
  write_raw_safetensors(dir / "model-00002-of-00002.safetensors",
                        {{"c", "F16", {1}, bytes_of<uint16_t>({0x4400})}});  // 4.0
  write_text(dir / "model.safetensors.index.json",
             R"({"metadata": {"total_size": 14}, "weight_map": {
               "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
               "c": "model-00002-of-00002.safetensors"}})");
  write_text(dir / "config.json", kConfig);
  const std::string ours =
      R"({"architectures": ["Tiny"], "model_type": "tiny", "width": 3, "depth": 2, "eps": 1e-5,
          "torch_dtype": "float32"})";
  auto weights = read_model_weights(dir.str(), ours);
  ASSERT_EQ(weights.size(), 3u);
  EXPECT_EQ(weights["a"][1].item<float>(), 2.0f);
  EXPECT_EQ(weights["b"][0].item<float>(), 3.0f);
  EXPECT_EQ(weights["c"][0].item<float>(), 4.0f);

  // The index places a tensor in a file that lacks it.
  write_text(dir / "model.safetensors.index.json",
             R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})");
  EXPECT_NE(user_error_of([&] {
              read_model_weights(dir.str(), ours);
            }).find("places tensor 'a' in '" + (dir / "model-00002-of-00002.safetensors")),
            std::string::npos);
  write_text(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "../x.safetensors"}})");
  EXPECT_NE(user_error_of([&] { read_model_weights(dir.str(), ours); }).find("not a file name"),
            std::string::npos);
}

TEST(HfWeights, AConfigMismatchListsEveryDifferingFieldOnOneLine) {
  TempDir dir;
  write_raw_safetensors(dir / "model.safetensors", {{"a", "F32", {1}, bytes_of<float>({1})}});
  write_text(dir / "config.json", kConfig);
  const std::string ours =
      R"({"architectures": ["Tiny"], "model_type": "tiny", "width": 4, "depth": 2, "eps": 1e-6,
          "heads": 2})";
  const std::string error = user_error_of([&] { read_model_weights(dir.str(), ours); });
  EXPECT_NE(error.find("eps 1e-05 (experiment 1e-06), heads absent (experiment 2), width 3 "
                       "(experiment 4)"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  std::filesystem::remove(dir / "config.json");
  EXPECT_NE(user_error_of([&] { read_model_weights(dir.str(), ours); }).find("has no config.json"),
            std::string::npos);
}

// transformers 5 saves a Llama's rotary settings as rope_parameters (its config.json as
// save_pretrained wrote it, sizes cut); they compare with rope_theta and rope_scaling, and the
// fields the file leaves out compare at transformers' defaults.
TEST(HfWeights, Transformers5RopeParametersCompareWithRopeThetaAndScaling) {
  TempDir dir;
  write_raw_safetensors(dir / "model.safetensors", {{"a", "F32", {1}, bytes_of<float>({1})}});
  const std::string sizes = R"("model_type": "llama", "num_hidden_layers": 1,
      "num_attention_heads": 2, "hidden_size": 8, "intermediate_size": 16,
      "max_position_embeddings": 16, "vocab_size": 10)";
  write_text(dir / "config.json", "{" + sizes + R"(, "dtype": "bfloat16",
      "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 16}})");
  const std::string llama3 = R"({"model_type": "llama", "rope_theta": 500000.0, "rope_scaling":
      {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
       "original_max_position_embeddings": 16}, "head_dim": 4, "rms_norm_eps": 1e-6,
       "torch_dtype": "float32"})";
  EXPECT_EQ(read_model_weights(dir.str(), llama3).size(), 1u);
  const std::string plain = R"({"model_type": "llama", "rope_theta": 500000.0,
      "rope_scaling": null})";
  EXPECT_NE(user_error_of([&] {
              read_model_weights(dir.str(), plain);
            }).find("rope_scaling {\"factor\":8.0,"),
            std::string::npos);
  write_text(dir / "config.json", "{" + sizes + R"(,
      "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}})");
  EXPECT_EQ(read_model_weights(dir.str(), R"({"model_type": "llama", "rope_theta": 10000.0,
                                       "rope_scaling": null, "head_dim": 4})")
                .size(),
            1u);
  // A value no Kiln model computes is the checkpoint's fault, whatever the experiment says.
  write_text(dir / "config.json", "{" + sizes + R"(, "rope_scaling": {"type": "linear",
      "factor": 2.0}})");
  EXPECT_EQ(user_error_of([&] { read_model_weights(dir.str(), plain); }),
            (dir / "config.json") +
                ": rope_scaling type 'linear' is not supported: Kiln's llama computes plain "
                "rotary frequencies and Llama 3's scaling (\"llama3\") only");
}

// --- GPT-2 as the Hub stores it -----------------------------------------------------------

constexpr int64_t kVocab = 50, kEmbd = 16, kHeads = 2, kLayers = 2, kPositions = 12;

// GPT-2's LayerNorm: (x - mean) / sqrt(biased variance + 1e-5), then scale and shift.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto mean = x.mean(-1, true);
  auto var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / torch::sqrt(var + 1e-5) * w + b;
}

// GPT-2's GELU, the tanh approximation of its paper.
torch::Tensor gelu_tanh(const torch::Tensor& x) {
  return 0.5 * x * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
}

// Logits [T, vocab] of one sequence, from tensors under the Hub's names; Conv1D weights are
// [in, out], so each projection is x @ W + b.
torch::Tensor reference_forward(std::map<std::string, torch::Tensor>& w,
                                const std::vector<int64_t>& tokens) {
  const int64_t t = static_cast<int64_t>(tokens.size()), d = kEmbd / kHeads;
  auto ids = torch::tensor(tokens, torch::kLong);
  auto x = w["wte.weight"].index_select(0, ids) + w["wpe.weight"].narrow(0, 0, t);
  auto future = torch::ones({t, t}).triu(1).to(torch::kBool);
  for (int64_t l = 0; l < kLayers; ++l) {
    auto p = [&](const std::string& name) { return w[fmt::format("h.{}.{}", l, name)]; };
    auto h = layer_norm(x, p("ln_1.weight"), p("ln_1.bias"));
    auto qkv = torch::matmul(h, p("attn.c_attn.weight")) + p("attn.c_attn.bias");
    std::vector<torch::Tensor> heads;
    for (int64_t head = 0; head < kHeads; ++head) {
      auto q = qkv.narrow(1, head * d, d), k = qkv.narrow(1, kEmbd + head * d, d),
           v = qkv.narrow(1, 2 * kEmbd + head * d, d);
      auto scores = torch::matmul(q, k.t()) / std::sqrt(static_cast<double>(d));
      heads.push_back(torch::matmul(torch::softmax(scores.masked_fill(future, -INFINITY), -1), v));
    }
    x = x + torch::matmul(torch::cat(heads, 1), p("attn.c_proj.weight")) + p("attn.c_proj.bias");
    h = layer_norm(x, p("ln_2.weight"), p("ln_2.bias"));
    auto m = gelu_tanh(torch::matmul(h, p("mlp.c_fc.weight")) + p("mlp.c_fc.bias"));
    x = x + torch::matmul(m, p("mlp.c_proj.weight")) + p("mlp.c_proj.bias");
  }
  return torch::matmul(layer_norm(x, w["ln_f.weight"], w["ln_f.bias"]), w["wte.weight"].t());
}

TEST(HfWeights, Gpt2AsTheHubStoresItGivesTheReferenceLogits) {
  torch::manual_seed(7);
  std::map<std::string, torch::Tensor> w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double scale = 0.2) {
    w[name] = torch::randn(shape) * scale;
  };
  add("wte.weight", {kVocab, kEmbd});
  add("wpe.weight", {kPositions, kEmbd});
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string h = fmt::format("h.{}.", l);
    add(h + "ln_1.weight", {kEmbd}, 1.0);
    add(h + "ln_1.bias", {kEmbd});
    add(h + "attn.c_attn.weight", {kEmbd, 3 * kEmbd});
    add(h + "attn.c_attn.bias", {3 * kEmbd});
    add(h + "attn.c_proj.weight", {kEmbd, kEmbd});
    add(h + "attn.c_proj.bias", {kEmbd});
    add(h + "ln_2.weight", {kEmbd}, 1.0);
    add(h + "ln_2.bias", {kEmbd});
    add(h + "mlp.c_fc.weight", {kEmbd, 4 * kEmbd});
    add(h + "mlp.c_fc.bias", {4 * kEmbd});
    add(h + "mlp.c_proj.weight", {4 * kEmbd, kEmbd});
    add(h + "mlp.c_proj.bias", {kEmbd});
  }
  add("ln_f.weight", {kEmbd}, 1.0);
  add("ln_f.bias", {kEmbd});
  std::vector<RawTensor> file;
  for (const auto& [name, tensor] : w)
    file.push_back(f32(name, tensor));
  // The Hub's checkpoints also hold each block's causal mask and masked_bias buffers.
  for (int64_t l = 0; l < kLayers; ++l) {
    file.push_back(
        f32(fmt::format("h.{}.attn.bias", l), torch::ones({1, 1, kPositions, kPositions}).tril()));
    file.push_back(f32(fmt::format("h.{}.attn.masked_bias", l), torch::tensor(-1e4)));
  }
  TempDir dir;
  write_raw_safetensors(dir / "model.safetensors", file);
  // GPT-2's config.json as the Hub has it, sizes shrunk.
  write_text(dir / "config.json",
             fmt::format(R"({{"activation_function": "gelu_new", "architectures":
  ["GPT2LMHeadModel"], "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1,
  "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2", "n_ctx": {0}, "n_embd": {1}, "n_head": {2}, "n_layer": {3},
  "n_positions": {0}, "resid_pdrop": 0.1, "vocab_size": {4}}})",
                         kPositions, kEmbd, kHeads, kLayers, kVocab));

  ResolvedConfig c = load_config_text(
      fmt::format("[model]\ntype = \"gpt\"\nn_layer = {}\nn_head = {}\nn_embd = {}\n"
                  "block_size = {}\nvocab_size = {}\n",
                  kLayers, kHeads, kEmbd, kPositions, kVocab),
      "t.toml", {});
  auto model = build_model(*ModelRegistry::create("gpt", c.params("model")));
  model->import_weights(read_model_weights(dir.str(), model->interchange_config()));
  model->eval();
  const std::vector<int64_t> tokens = {3, 17, 42, 0, 49, 8, 8, 21};
  torch::NoGradGuard no_grad;
  auto ours = model->forward(torch::tensor(tokens, torch::kLong).unsqueeze(0))[0];
  auto reference = reference_forward(w, tokens);
  EXPECT_LT((ours - reference).abs().max().item<double>(), 1e-5)
      << ours.narrow(0, 0, 2) << reference.narrow(0, 0, 2);
  // And the export names them as GPT2LMHeadModel does, the Conv1D weights back as [in, out].
  for (const auto& [name, tensor] : model->export_weights()) {
    const std::string bare = name.substr(std::string("transformer.").size());
    ASSERT_TRUE(w.count(bare)) << name;
    EXPECT_TRUE(torch::equal(tensor, w[bare])) << name;
  }
}

}  // namespace
}  // namespace kiln
