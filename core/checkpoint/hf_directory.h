// Hugging Face model directories, as save_pretrained writes them and from_pretrained reads them:
// DIR/config.json (the model's sizes, core/api/model.h's interchange_config()) beside either
// DIR/model.safetensors or DIR/model.safetensors.index.json, whose weight_map names the shard
// file of every tensor. `kiln export` writes one; model.init_from reads one, or a single
// .safetensors file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kiln {

class Tokenizer;

// The ids transformers treats specially: generate() stops at eos and pads with pad, and a
// tokenizer adds bos. None = JSON null: without it a GPT-2 config falls back to 50256 and a
// Llama one to 1 and 2, ids a small vocabulary may not have or gives other meanings.
struct SpecialTokenIds {
  std::optional<int64_t> bos, eos, pad;
};

// What a model directory holds of the tokenizer of the model's data: its special ids, and its
// Hugging Face tokenizer.json (Tokenizer::hugging_face_file), empty for one without that form.
struct TokenizerFiles {
  SpecialTokenIds special;
  std::string tokenizer_json;
};
// bos, eos and pad: the tokenizer's end-of-text id (what separated the documents), each of the
// three; none for a tokenizer without one (a character set).
TokenizerFiles tokenizer_files_of(const Tokenizer& tokenizer);

// Writes DIR/model.safetensors, DIR/config.json (`config`, a JSON object, with "torch_dtype"
// added, the weights going out in fp32, and `tokenizer`'s special ids),
// DIR/generation_config.json (those ids, which generate() reads from there) and, if any,
// `tokenizer`'s DIR/tokenizer.json (AutoTokenizer opens the folder as it is), creating DIR. With
// `max_shard_bytes` > 0 and weights larger than that, the weights go instead to
// DIR/model-0000K-of-0000N.safetensors, in order, each at most that size (a larger tensor alone in
// its shard, as save_pretrained does), named in DIR/model.safetensors.index.json. DIR is new or
// empty (`kiln export` fills a staging folder, core/util/fs.h: replace_folder): no file of the
// other form can be left for from_pretrained to read first.
void write_hf_directory(const std::string& dir,
                        const std::vector<std::pair<std::string, at::Tensor>>& weights,
                        const std::string& config, const TokenizerFiles& tokenizer,
                        const std::map<std::string, std::string>& metadata,
                        int64_t max_shard_bytes = 0);

// A Hugging Face PEFT adapter directory, as PEFT's save_pretrained writes one:
// DIR/adapter_config.json (`config`, the adapter's, core/api/adapter.h) and
// DIR/adapter_model.safetensors. DIR is new or empty, as for write_hf_directory.
void write_peft_directory(const std::string& dir,
                          const std::vector<std::pair<std::string, at::Tensor>>& weights,
                          const std::string& config,
                          const std::map<std::string, std::string>& metadata);

// The weights' metadata key `kiln export` names the run in; holds_kiln_export looks for it.
constexpr const char* kExportRunKey = "kiln_run";

// Whether a file of this name is one write_hf_directory writes, in either form: config.json,
// generation_config.json, model.safetensors, its index, model-0000K-of-0000N.safetensors; or one
// write_peft_directory writes.
bool is_model_directory_file(const std::string& name);
// Whether `dir` holds a model or adapter directory `kiln export` wrote: weights whose metadata
// names a run.
bool holds_kiln_export(const std::string& dir);

// The weights at `path`, a .safetensors file or a directory. For a directory, its config.json
// is compared first with `interchange_config` (the experiment's model): a UserError listing every
// field that differs. A UserError naming the problem for missing, unreadable or lying files.
std::map<std::string, at::Tensor> read_model_weights(const std::string& path,
                                                     const std::string& interchange_config);

// Checks that `path` holds weights (every file's header), reading no tensor: for a run that is
// only checked, whose model is not built.
void check_model_weights(const std::string& path);

}  // namespace kiln
