// libFuzzer target: the experiment-config loader, as `kiln run` uses it (an experiment file, the
// files it extends, and --set overrides). Built and run by tools/fuzz.sh with AddressSanitizer
// and UBSan.
//
// The input is an experiment file, or up to three: a line "#file" (a TOML comment, so seeds stay
// valid experiment files) starts the next one. They are written as fuzz0.toml (the experiment),
// fuzz1.toml and fuzz2.toml into a scratch folder, where `extends = "fuzz1.toml"` and the like
// chain them (or make cycles). Lines that start with "#set " are also passed as --set
// overrides, e.g. "#set train.steps=5".
// A UserError is the expected outcome of a bad input; anything else (another exception type, a
// crash, a sanitizer report, a hang) is a bug. A config that loads must also survive the trip
// through its canonical TOML: reloading the canonical text gives the same text and hash, as
// runs rely on when `kiln resume` rebuilds them from the stored config; and every key's source
// must be a --set, a default, or a line of one of the files read.
//
// The loader needs the plugin catalog (names, keys, types, ranges). The real plugins need
// LibTorch, so the catalog is mirrored here from `kiln plugins`; it need not be exact, only rich
// enough that valid experiments load and reach every path of the loader.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/config/registry.h"
#include "core/util/error.h"

namespace {

using kiln::ParamSpec;

void add(const char* kind, const char* name, bool is_default, std::vector<ParamSpec> params) {
  kiln::PluginSpec spec(name, "mirror of the real plugin", std::move(params), is_default);
  spec.kind = kind;
  kiln::Catalog::global().add(std::move(spec));
}

ParamSpec warmup(int64_t def) {
  return ParamSpec::integer("warmup", def, "warmup steps").at_least(0);
}

ParamSpec ratio(const char* name, double def) {
  return ParamSpec::real(name, def, "a fraction").at_least(0).at_most(1);
}

void register_catalog() {
  using P = ParamSpec;
  add("model", "gpt", false,
      {P::integer("n_layer", 12, "blocks").at_least(1).at_most(10000),
       P::integer("n_head", 12, "heads").at_least(1).at_most(1 << 20),
       P::integer("n_embd", 768, "width").at_least(1),
       P::integer("block_size", 1024, "context").at_least(1),
       P::integer("vocab_size", 50257, "ids").at_least(1).at_most(INT32_MAX),
       P::integer("vocab_multiple", 1, "padding").at_least(1).at_most(1 << 20),
       P::real("dropout", 0.0, "dropout").at_least(0).at_most(0.95),
       P::flag("bias", true, "biases")});
  add("model", "transformer_lm", false,
      {P::integer("vocab_size", 50257, "ids").at_least(1).at_most(INT32_MAX),
       P::integer("d_model", 200, "width").at_least(2),
       P::integer("nhead", 2, "heads").at_least(1).at_most(1 << 20),
       P::integer("num_layers", 2, "layers").at_least(1).at_most(10000),
       P::integer("dim_feedforward", 200, "ffn").at_least(1),
       P::integer("max_len", 512, "positions").at_least(1),
       P::real("dropout", 0.2, "dropout").at_least(0).at_most(0.95)});
  add("data", "shards", true,
      {P::text("train", "", "glob"), P::text("val", "", "glob"), P::text("test", "", "glob"),
       P::text("format", "auto", "layout").one_of({"auto", "llmc", "npy", "raw"})});
  const auto adam_like = [](double lr, double beta2, double decay) {
    return std::vector<ParamSpec>{P::real("lr", lr, "lr").at_least(0),
                                  P::real("beta1", 0.9, "b1").at_least(0).at_most(0.999999),
                                  P::real("beta2", beta2, "b2").at_least(0).at_most(0.999999),
                                  P::real("eps", 1e-8, "eps").at_least(0),
                                  P::real("weight_decay", decay, "wd").at_least(0)};
  };
  auto adamw = adam_like(6e-4, 0.95, 0.1);
  adamw.push_back(P::flag("fused", false, "fused kernel"));
  add("optimizer", "adamw", true, adamw);
  add("optimizer", "adam", false, adam_like(1e-3, 0.999, 0.0));
  add("optimizer", "sgd", false,
      {P::real("lr", 0.1, "lr").at_least(0), ratio("momentum", 0.0),
       P::flag("nesterov", false, "nesterov"), P::real("weight_decay", 0, "wd").at_least(0)});
  add("optimizer", "lion", false,
      {P::real("lr", 1e-4, "lr").at_least(0), ratio("beta1", 0.9), ratio("beta2", 0.99),
       P::real("weight_decay", 0, "wd").at_least(0)});
  add("schedule", "constant", true, {warmup(0)});
  add("schedule", "cosine", false, {warmup(0), ratio("min_lr_ratio", 0.1)});
  add("schedule", "linear", false, {warmup(0), ratio("min_lr_ratio", 0.0)});
  add("schedule", "inverse_sqrt", false, {warmup(100)});
  add("schedule", "step", false,
      {P::integer("step_size", 100, "steps").at_least(1), ratio("gamma", 0.95), warmup(0)});
  add("schedule", "wsd", false,
      {warmup(0), ratio("decay_fraction", 0.2), ratio("min_lr_ratio", 0.0)});
  add("precision", "fp32", true, {});
  add("precision", "bf16", false, {});
  add("precision", "tf32", false, {});
  add("precision", "fp16", false,
      {P::real("init_scale", 65536.0, "scale").at_least(1),
       P::integer("growth_interval", 2000, "steps").at_least(1),
       P::real("growth_factor", 2.0, "factor").at_least(1),
       P::real("backoff_factor", 0.5, "factor").at_least(0.0001).at_most(1),
       P::real("min_scale", 1.0, "scale").at_least(0)});
  add("parallel", "single", true, {});
  add("parallel", "ddp", false,
      {P::text("backend", "auto", "c10d").one_of({"auto", "gloo", "nccl"}),
       P::real("bucket_mb", 25.0, "MiB").at_least(0.001),
       P::integer("timeout_s", 300, "seconds").at_least(1)});
  add("parallel", "zero", false,
      {P::integer("stage", 1, "ZeRO stage").at_least(1).at_most(2),
       P::text("backend", "auto", "c10d").one_of({"auto", "gloo", "nccl"}),
       P::integer("timeout_s", 300, "seconds").at_least(1)});
  add("tokenizer", "char", true, {});
  add("tokenizer", "gpt2", false, {});
}

// The scratch folder the input's files are written into, made once, removed at exit.
std::string scratch;

void remove_scratch() {
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
}

// The input's files: fuzz0.toml, then fuzz1.toml and fuzz2.toml when "#file" lines start them;
// an earlier input's files that this one lacks are removed. Returns the experiment's path.
std::string write_files(const std::string& text) {
  std::vector<std::string> parts(1);
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (parts.size() < 3 && text.compare(at, end - at, "#file") == 0) {
      parts.emplace_back();
    } else {
      parts.back().append(text, at, end + 1 - at);
    }
    at = end + 1;
  }
  for (size_t i = 0; i < 3; ++i) {
    const std::string path = scratch + "/fuzz" + std::to_string(i) + ".toml";
    if (i < parts.size()) {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << parts[i];
    } else {
      std::remove(path.c_str());
    }
  }
  return scratch + "/fuzz0.toml";
}

[[noreturn]] void bug(const std::string& what, const std::string& input) {
  std::fprintf(stderr, "config_fuzz: %s\n--- input ---\n%s\n--- end ---\n", what.c_str(),
               input.c_str());
  std::abort();
}

}  // namespace

// Every key's source is a --set, a default, or a line of a file the config says it read.
void check_sources(const kiln::ResolvedConfig& config, const std::string& experiment,
                   const std::string& input) {
  const auto& files = config.sources();
  if (files.empty() || files.back().path != experiment)
    bug("the experiment is not the last file", input);
  for (const auto& file : files) {
    if (file.sha256.size() != 64) bug("a file's SHA-256 is not 64 hex digits", input);
  }
  for (const auto& section : config.sections) {
    for (const auto& [key, value] : section.params.values()) {
      const kiln::KeySource source = config.source_of(section.name + "." + key);
      if (source.kind != kiln::KeySource::Kind::kFile) continue;
      bool read = false;
      for (const auto& file : files)
        read = read || file.path == source.at.file;
      if (!read || source.at.line < 1)
        bug("a key's source is no line of a file read: " + source.str(), input);
    }
  }
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  register_catalog();
  char dir[] = "/tmp/kiln-fuzz-XXXXXX";
  if (!::mkdtemp(dir)) {
    std::perror("config_fuzz: mkdtemp");
    std::abort();
  }
  scratch = dir;
  std::atexit(remove_scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, 5, "#set ") == 0) overrides.push_back(text.substr(at + 5, end - at - 5));
    at = end + 1;
  }
  const std::string experiment = write_files(text);
  kiln::ResolvedConfig config;
  try {
    config = kiln::load_config(experiment, overrides);
  } catch (const kiln::UserError& e) {
    if (std::string(e.what()).empty()) bug("a UserError with no message", text);
    return 0;  // the expected outcome of a bad input
  }
  check_sources(config, experiment, text);
  // Loaded: the canonical text must load again, to itself.
  const std::string canonical = config.to_toml();
  const std::string hash = config.hash();
  kiln::ResolvedConfig again;
  try {
    again = kiln::load_config_text(canonical, "canonical.toml", {});
  } catch (const kiln::UserError& e) {
    bug(std::string("the canonical TOML of a loaded config does not load: ") + e.what(), text);
  }
  if (again.to_toml() != canonical) bug("the canonical TOML changes when reloaded", text);
  if (again.hash() != hash) bug("the config hash changes when reloaded", text);
  return 0;
}
