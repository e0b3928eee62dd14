// The state of a `kiln prepare` under way (core/data/prepare.h), saved in its staging folder
// (OUT/.prepare/state.json) after every batch: where the inputs stopped, how many tokens the spool
// holds then, and a fingerprint of what the tokens depend on, which `--resume` checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/data/prepare.h"
#include "core/data/prepare_input.h"

namespace kiln {

struct EncodeState {
  InputPosition at;
  int64_t tokens = 0;      // in tokens.bin, all whole
  int64_t text_bytes = 0;  // of the documents encoded
  bool encoded = false;    // every input is in tokens.bin
};

// What the tokens depend on: each input's path, size and modification time, the field, the
// tokenizer (and its file's stamp) and the piece size. A resume with any of it changed would join
// two datasets.
nlohmann::json prepare_fingerprint(const PrepareOptions& options,
                                   const std::vector<std::string>& files);

// Written atomically: a kill leaves the old state or the new one.
void save_prepare_state(const std::string& staging, const nlohmann::json& print,
                        const EncodeState& state);

// The interrupted prepare's state, for --resume: a UserError when there is none, when it is
// damaged, or when its fingerprint differs from `print` (naming the first key that does).
EncodeState load_prepare_state(const std::string& staging, const nlohmann::json& print);

}  // namespace kiln
