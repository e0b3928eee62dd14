// Hugging Face interchange through the real binary: `kiln export` writes a model directory that
// model.init_from reads back to the same eval loss, a directory of another shape is refused with
// every differing field named, and `kiln prepare --tokenizer hf` on GPT-2's tokenizer.json
// writes the very shards `--tokenizer gpt2` writes.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "byte_level_tokenizer_json.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::expect_one_error_line;
using testing::run_kiln;
using HfInterchange = testing::TinyRun;

double eval_loss(const std::string& db, const std::string& run, int64_t step) {
  return testing::query_doubles(db, fmt::format("select loss from evals join runs on id = run_id "
                                                "where name = '{}' and step = {}",
                                                run, step))[0];
}

TEST_F(HfInterchange, ExportedDirectoryReproducesTheEvalLoss) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp +
                     " --name a --set train.steps=20 --set checkpoint.every=20 "
                     "--set eval.every=20 --set eval.steps=4")
                .exit_code,
            0);
  const std::string out = dir_ / "gpt_hf";
  auto exported = run_kiln("export a -o " + out + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto config = nlohmann::json::parse(testing::read_file(out + "/config.json"));
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(config.at("model_type"), "gpt2");
  EXPECT_EQ(config.at("n_embd"), 32);
  EXPECT_EQ(config.at("n_layer"), 2);
  EXPECT_EQ(config.at("n_positions"), 32);
  EXPECT_EQ(config.at("vocab_size"), 64);
  // The safetensors header, read by hand: GPT2LMHeadModel's names, Conv1D weights [in, out].
  const std::string weights = testing::read_file(out + "/model.safetensors");
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, weights.data(), 8);
  const auto header = nlohmann::json::parse(weights.substr(8, header_bytes));
  EXPECT_EQ(header.at("transformer.h.1.attn.c_attn.weight").at("shape"),
            nlohmann::json::array({32, 96}));
  EXPECT_EQ(header.at("transformer.wte.weight").at("dtype"), "F32");

  // lr 0: the one step leaves the imported weights as they are, so its eval sees them exactly.
  auto b = run_kiln("run " + exp + " --name b --set model.init_from=" + out +
                    " --set optimizer.lr=0 --set train.steps=1 --set eval.every=1 "
                    "--set eval.steps=4");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NEAR(eval_loss(db(), "a", 20), eval_loss(db(), "b", 1), 1e-6);

  const std::string mismatch = "run " + exp + " --name c --set model.init_from=" + out +
                               " --set model.n_embd=48 --set model.n_layer=3";
  expect_one_error_line(run_kiln(mismatch), mismatch,
                        "config.json' describes another model than the experiment's: n_embd 32 "
                        "(experiment 48), n_layer 2 (experiment 3)");
  // The single-file form stays what it was.
  auto file = run_kiln("export a -o " + (dir_ / "a.safetensors") + " --db " + db());
  ASSERT_EQ(file.exit_code, 0) << file.output;
  EXPECT_FALSE(std::filesystem::is_directory(dir_ / "a.safetensors"));
}

// The same round trip for a llama: LlamaForCausalLM's names, the q/k rows in Hugging Face's
// rotary order and back, grouped-query attention and an untied head.
TEST_F(HfInterchange, LlamaExportedDirectoryReproducesTheEvalLoss) {
  const std::string exp = experiment();
  const std::string llama =
      " --set model.type=llama --set model.n_kv_head=1 --set model.ffn_dim=48 "
      "--set model.rope_theta=500000";
  ASSERT_EQ(run_kiln("run " + exp +
                     " --name la --set train.steps=20 --set checkpoint.every=20 "
                     "--set eval.every=20 --set eval.steps=4" +
                     llama)
                .exit_code,
            0);
  const std::string out = dir_ / "llama_hf";
  auto exported = run_kiln("export la -o " + out + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto config = nlohmann::json::parse(testing::read_file(out + "/config.json"));
  EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config.at("num_key_value_heads"), 1);
  auto b = run_kiln("run " + exp + " --name lb --set model.init_from=" + out +
                    " --set optimizer.lr=0 --set train.steps=1 --set eval.every=1 "
                    "--set eval.steps=4" +
                    llama);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NEAR(eval_loss(db(), "la", 20), eval_loss(db(), "lb", 1), 1e-6);
  const std::string mismatch =
      "run " + exp + " --name lc --set model.init_from=" + out + llama + " --set model.n_kv_head=2";
  expect_one_error_line(run_kiln(mismatch), mismatch, "num_key_value_heads 1 (experiment 2)");
}

// GPT-2's tokenizer.json in the Hub's layout, from the vocabulary tools/setup.sh fetches.
void write_gpt2_tokenizer_json(const std::string& path) {
  std::ifstream bpe("data/gpt2/vocab.bpe");
  std::string line;
  std::getline(bpe, line);  // #version
  auto merges = nlohmann::json::array();
  while (std::getline(bpe, line) && !line.empty())
    merges.push_back(line);
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  const nlohmann::json file = {
      {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"vocab", nlohmann::json::parse(testing::read_file("data/gpt2/encoder.json"))},
        {"merges", merges}}}};
  testing::write_text(path, file.dump());
}

TEST_F(HfInterchange, PrepareWithTheHfTokenizerWritesTheGpt2Shards) {
  if (!std::filesystem::exists("data/gpt2/encoder.json")) {
    GTEST_SKIP() << "data/gpt2/encoder.json is missing: run tools/setup.sh to fetch it";
  }
  testing::write_text(dir_ / "mixed.txt",
                      "It's 2024: café, naïve, 你好 👋 -- don't   stop\n\n  the   music!\n");
  write_gpt2_tokenizer_json(dir_ / "tokenizer.json");
  const std::string inputs = (dir_ / "corpus.txt") + " " + (dir_ / "mixed.txt");
  auto hf = run_kiln("prepare " + inputs + " --tokenizer hf --tokenizer-file " +
                     (dir_ / "tokenizer.json") + " --out " + (dir_ / "hf"));
  ASSERT_EQ(hf.exit_code, 0) << hf.output;
  auto gpt2 = run_kiln("prepare " + inputs + " --tokenizer gpt2 --out " + (dir_ / "gpt2"));
  ASSERT_EQ(gpt2.exit_code, 0) << gpt2.output;
  for (const char* shard : {"train_000000.bin", "val_000000.bin"}) {
    const std::string ours = testing::read_file(dir_ / (std::string("hf/") + shard));
    EXPECT_GT(ours.size(), 1024u) << shard;
    EXPECT_TRUE(ours == testing::read_file(dir_ / (std::string("gpt2/") + shard))) << shard;
  }
  const std::string refused = "prepare " + inputs + " --tokenizer hf --out " + (dir_ / "x");
  expect_one_error_line(run_kiln(refused), refused, "--tokenizer-file");
}

TEST_F(HfInterchange, ThirtyTwoBitShardsTrainEvaluateAndSample) {
  // Ids beyond uint16: every byte at 70000 + byte, and the merges "t h" -> 100000, "th e" ->
  // 100001.
  testing::write_byte_tokenizer_json(dir_ / "wide.json", 70000, {"t h", "th e"},
                                     {{"th", 100000}, {"the", 100001}});
  auto prepared =
      run_kiln("prepare " + (dir_ / "corpus.txt") + " --tokenizer hf --tokenizer-file " +
               (dir_ / "wide.json") + " --out " + (dir_ / "wide") + " --val-fraction 0.1");
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  EXPECT_NE(prepared.output.find("32-bit shards"), std::string::npos) << prepared.output;
  const std::string exp = experiment();
  const std::string data =
      " --set model.vocab_size=100002 --set 'data.train=" + (dir_ / "wide/train_*.bin") +
      "' --set 'data.val=" + (dir_ / "wide/val_*.bin") + "'";
  auto run = run_kiln(
      "run " + exp +
      " --name wide --set train.steps=4 --set eval.every=4 --set checkpoint.every=4" + data);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto eval = run_kiln("eval wide --steps 2 --db " + db());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("val loss"), std::string::npos) << eval.output;
  auto sample = run_kiln("sample wide --prompt 'In the' --tokens 5 --db " + db());
  ASSERT_EQ(sample.exit_code, 0) << sample.output;
  EXPECT_NE(sample.output.find("In the"), std::string::npos) << sample.output;
  // A model whose vocabulary stops short of the ids is told which id it met.
  const std::string small = "run " + exp + " --name small" + data + " --set model.vocab_size=64";
  expect_one_error_line(run_kiln(small), small, "holds token id 10");
}

}  // namespace
}  // namespace kiln
