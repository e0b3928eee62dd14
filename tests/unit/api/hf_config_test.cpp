// config.json read as a Kiln model (core/api/hf_config.h; the gpt2 and llama readers in
// plugins/): each field that changes the logits is read, at transformers' default where absent, or
// refused in one line that names the file and the field. That the models built from these
// sections compute transformers' logits is tests/interop/hf_config_test.sh's part.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/api/hf_config.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;
using testing::user_error_of;

const json kGpt2 = {{"model_type", "gpt2"}, {"n_layer", 2},      {"n_head", 2},
                    {"n_embd", 8},          {"n_positions", 16}, {"vocab_size", 10}};
const json kLlama = {{"model_type", "llama"},    {"num_hidden_layers", 1},
                     {"num_attention_heads", 2}, {"hidden_size", 8},
                     {"intermediate_size", 16},  {"max_position_embeddings", 16},
                     {"vocab_size", 10}};

json with(json config, const json& fields) {
  config.update(fields);
  return config;
}

std::string refusal(const json& config) {
  return user_error_of([&] { read_hf_config(config, "hf/config.json"); });
}

TEST(HfConfig, Gpt2ReadsItsLayerNormEpsilonAndTanhGeluSpellings) {
  const auto read = read_hf_config(with(kGpt2, {{"layer_norm_epsilon", 1e-3}}), "c.json");
  EXPECT_NE(read.model_section.find("norm_eps = 0.001\n"), std::string::npos) << read.model_section;
  EXPECT_NE(read_hf_config(kGpt2, "c.json").model_section.find("norm_eps = 1e-05\n"),
            std::string::npos);
  EXPECT_EQ(read_hf_config(kGpt2, "c.json").as_read.at("layer_norm_epsilon"), 1e-5);
  for (const char* same : {"gelu_new", "gelu_pytorch_tanh"}) {
    EXPECT_NO_THROW(read_hf_config(with(kGpt2, {{"activation_function", same}}), "c.json"));
  }
}

TEST(HfConfig, Gpt2RefusesWhatGptDoesNotCompute) {
  EXPECT_EQ(refusal(with(kGpt2, {{"activation_function", "relu"}})),
            "hf/config.json: activation_function 'relu' is not supported: Kiln's gpt computes "
            "the tanh-approximated GELU (gelu_new, gelu_pytorch_tanh) only");
  EXPECT_NE(refusal(with(kGpt2, {{"activation_function", "gelu"}})).find("'gelu' is not"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGpt2, {{"n_inner", 12}})).find("n_inner 12 is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGpt2, {{"tie_word_embeddings", false}}))
                .find("hf/config.json: tie_word_embeddings false is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGpt2, {{"scale_attn_weights", false}})).find("scale_attn_weights"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGpt2, {{"scale_attn_by_inverse_layer_idx", true}}))
                .find("scale_attn_by_inverse_layer_idx true is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(with(kGpt2, {{"layer_norm_epsilon", "small"}})).find("not a number"),
            std::string::npos);
}

TEST(HfConfig, LlamaReadsHeadDimAndBothSpellingsOfLlama3Scaling) {
  const auto wide = read_hf_config(with(kLlama, {{"head_dim", 6}}), "c.json");
  EXPECT_NE(wide.model_section.find("head_dim = 6\n"), std::string::npos) << wide.model_section;
  EXPECT_EQ(read_hf_config(kLlama, "c.json").as_read.at("head_dim"), 4);
  const json llama3 = {{"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8}};
  // transformers before 4.43 wrote "type"; since, "rope_type"; transformers 5, rope_parameters.
  for (const json& config :
       {with(kLlama, {{"rope_scaling", with(llama3, {{"type", "llama3"}})}}),
        with(kLlama, {{"rope_scaling", with(llama3, {{"rope_type", "llama3"}})}}),
        with(kLlama, {{"rope_parameters",
                       with(llama3, {{"rope_type", "llama3"}, {"rope_theta", 1e4}})}})}) {
    const auto read = read_hf_config(config, "c.json");
    EXPECT_NE(read.model_section.find("rope_scaling_factor = 8\n"), std::string::npos)
        << config.dump();
    EXPECT_EQ(read.as_read.at("rope_scaling"), with(llama3, {{"rope_type", "llama3"}}));
    EXPECT_FALSE(read.as_read.contains("rope_parameters"));
  }
}

TEST(HfConfig, LlamaRefusesWhatLlamaDoesNotCompute) {
  for (const char* type : {"linear", "dynamic", "yarn", "longrope"}) {
    EXPECT_EQ(refusal(with(kLlama, {{"rope_scaling", {{"rope_type", type}, {"factor", 2.0}}}})),
              fmt::format("hf/config.json: rope_scaling type '{}' is not supported: Kiln's llama "
                          "computes plain rotary frequencies and Llama 3's scaling (\"llama3\") "
                          "only",
                          type));
  }
  EXPECT_NE(refusal(with(kLlama, {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}}))
                .find("rope_scaling type 'linear' is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(with(kLlama, {{"rope_parameters", {{"rope_type", "yarn"}}}}))
                .find("rope_parameters type 'yarn' is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(with(kLlama, {{"hidden_act", "gelu"}})).find("hidden_act 'gelu' is not"),
            std::string::npos);
  EXPECT_NE(refusal(with(kLlama, {{"attention_bias", true}})).find("attention_bias true is not"),
            std::string::npos);
  EXPECT_NE(refusal(with(kLlama, {{"mlp_bias", true}})).find("mlp_bias true is not"),
            std::string::npos);
  EXPECT_NE(refusal(with(kLlama, {{"model_type", "qwen2"}}))
                .find("hf/config.json: model_type \"qwen2\" has no Kiln model"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
