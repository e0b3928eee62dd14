// Hugging Face model directories, as save_pretrained writes them and from_pretrained reads them:
// DIR/config.json (the model's sizes, core/api/model.h's interchange_config()) beside either
// DIR/model.safetensors or DIR/model.safetensors.index.json, whose weight_map names the shard
// file of every tensor. `kiln export` writes one; model.init_from reads one, or a single
// .safetensors file.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kiln {

// Writes DIR/model.safetensors and DIR/config.json (`config`, a JSON object, with "torch_dtype"
// added: the weights go out in fp32), creating DIR.
void write_hf_directory(const std::string& dir,
                        const std::vector<std::pair<std::string, at::Tensor>>& weights,
                        const std::string& config,
                        const std::map<std::string, std::string>& metadata);

// The weights at `path`, a .safetensors file or a directory. For a directory, its config.json
// is compared first with `interchange_config` (the experiment's model): a UserError listing every
// field that differs. A UserError naming the problem for missing, unreadable or lying files.
std::map<std::string, at::Tensor> read_model_weights(const std::string& path,
                                                     const std::string& interchange_config);

// Checks that `path` holds weights (every file's header), reading no tensor: for a run that is
// only checked, whose model is not built.
void check_model_weights(const std::string& path);

}  // namespace kiln
