#include "core/app/run/model_export.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/api/adapter.h"
#include "core/api/tokenizer.h"
#include "core/app/run/command_inputs.h"
#include "core/app/run/opened_snapshot.h"
#include "core/checkpoint/hf_directory.h"
#include "core/checkpoint/weights_io.h"
#include "core/train/assemble.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

bool exports_directory(const std::string& out_path) {
  const std::string suffix = ".safetensors";
  return out_path.size() < suffix.size() ||
         out_path.compare(out_path.size() - suffix.size(), suffix.size(), suffix) != 0;
}

namespace {

// What an export writes of the tokenizer the run's data was prepared with (core/checkpoint/
// hf_directory.h). Export reads no data otherwise: when the data (and so the tokenizer) cannot be
// found, a note says what is left out.
TokenizerFiles data_tokenizer_files(const OpenedSnapshot& opened, const SnapshotRequest& request) {
  try {
    const auto data = open_split(opened.run, "train");
    return tokenizer_files_of(*load_tokenizer(data->tokenizer_dir()));
  } catch (const UserError& e) {
    request.note(fmt::format(
        "warning: the export gets no tokenizer.json, and config.json no bos/eos/pad ids: the "
        "tokenizer of the run's data cannot be read ({})",
        e.what()));
    return {};
  }
}

// An export into a folder that already holds files may replace a user's own config.json: only a
// previous Kiln export, or --force, lets it.
void check_export_folder(const std::string& dir, bool force) {
  std::error_code ec;
  if (force || !std::filesystem::is_directory(dir, ec) || holds_kiln_export(dir)) return;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    names.push_back(entry.path().filename().string());
  if (names.empty()) return;
  std::sort(names.begin(), names.end());
  if (names.size() > 4) names.resize(4), names.back() = "...";
  throw UserError(fmt::format(
      "-o {}: the folder holds files that are not a Kiln export ({}): an export would replace "
      "its model files; give a new or empty folder, or --force to replace config.json and the "
      "weights and keep the rest",
      dir, join(names, ", ")));
}

// PEFT's adapter folder, naming the base as model.init_from gave it (the weights the adapter was
// trained on), or, for a base Kiln trained from scratch, by the run and its config hash.
int64_t export_adapter(const SnapshotRequest& request, OpenedSnapshot& opened,
                       const std::string& out_path,
                       const std::map<std::string, std::string>& metadata) {
  if (!exports_directory(out_path)) {
    throw UserError(fmt::format(
        "-o {}: an adapter run exports PEFT's adapter folder (adapter_config.json, "
        "adapter_model.safetensors): give a directory, or --merge for the model's full weights "
        "with the adapter folded in",
        out_path));
  }
  const Model& model = *opened.run.model;
  // As the experiment wrote it (a Hub id or a path relative to where the run started): what the
  // user will load the base by, not this machine's absolute path.
  const std::string init_from = opened.run.config.params("model").text("init_from");
  const std::string base =
      init_from.empty() ? fmt::format("kiln:{}@{}", opened.info.name, opened.info.config_hash)
                        : init_from;
  const auto weights = opened.run.adapter->peft_weights(model);
  const std::string config = opened.run.adapter->peft_config(model, base);
  replace_folder(
      out_path, [](const std::string& name) { return !is_model_directory_file(name); },
      [&](const std::string& staging) {
        write_peft_directory(staging, weights, config, metadata);
      });
  announce(request, opened);
  return static_cast<int64_t>(weights.size());
}

}  // namespace

int64_t export_snapshot(const SnapshotRequest& request, const std::string& out_path,
                        const ExportOptions& options) {
  const int64_t max_shard_bytes = options.max_shard_bytes;
  if (max_shard_bytes > 0 && !exports_directory(out_path)) {
    throw UserError(
        fmt::format("--max-shard-size shards a model directory, and -o {} names one "
                    ".safetensors file: give a directory",
                    out_path));
  }
  const OutputKind kind = exports_directory(out_path) ? OutputKind::kFolder : OutputKind::kFile;
  // The store is known before the snapshot is opened: refused first, in the store's own words.
  check_output_path(out_path, request.db, "-o", kind);
  std::error_code ec;
  if (exports_directory(out_path) && std::filesystem::exists(out_path, ec) &&
      !std::filesystem::is_directory(out_path, ec)) {
    throw UserError(
        fmt::format("-o {}: that is a file, and a path not ending in .safetensors "
                    "names a model directory: give a directory or a .safetensors path",
                    out_path));
  }
  OpenedSnapshot opened = open_snapshot_read_only(request, Assembly::kWeights);
  check_output_path(out_path, request.db, "-o", kind, recorded_inputs(opened.inputs));
  if (exports_directory(out_path)) check_export_folder(out_path, options.force);
  Adapter& adapter = *opened.run.adapter;
  if (options.merge && !adapter.adapts()) {
    throw UserError(
        fmt::format("--merge folds an adapter into the model's weights, and run '{}' trained none "
                    "(adapter.type = \"{}\"): leave --merge out",
                    opened.info.name, opened.run.config.type("adapter")));
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {kExportRunKey, opened.info.name},
      {"kiln_snapshot", opened.snapshot.label},
      {"kiln_config_hash", opened.info.config_hash}};
  if (adapter.adapts() && !options.merge) {
    return export_adapter(request, opened, out_path, metadata);
  }
  if (options.merge) adapter.merge(*opened.run.model);
  const std::string config = opened.run.model->interchange_config();
  if (exports_directory(out_path) && config.empty()) {
    throw UserError(
        fmt::format("-o {}: model '{}' has no Hugging Face config to write a model "
                    "directory with: give a path ending in .safetensors",
                    out_path, opened.run.config.type("model")));
  }
  const TokenizerFiles tokenizer =
      exports_directory(out_path) ? data_tokenizer_files(opened, request) : TokenizerFiles{};
  auto weights = opened.run.model->export_weights();
  if (exports_directory(out_path)) {
    replace_folder(
        out_path, [](const std::string& name) { return !is_model_directory_file(name); },
        [&](const std::string& staging) {
          write_hf_directory(staging, weights, config, tokenizer, metadata, max_shard_bytes);
        });
  } else {
    write_weights(out_path, weights, metadata);
  }
  announce(request, opened);
  return static_cast<int64_t>(weights.size());
}

}  // namespace kiln
