#!/usr/bin/env bash
# Interop: a random mixture of experts transformers made and saved in shards
# (tests/interop/moe_import_make.py), read by the kiln under test as a llama three ways: through
# model.init_from (its `kiln eval --logits` equal transformers' logits within 1e-5), by `kiln eval
# --hf` (a choice task's log-likelihoods equal transformers' within 1e-4, hf_config_check.py) and
# by `kiln sample --hf` (greedy tokens equal generate()'s, hf_sample_check.py).
#   tests/interop/moe_import_test.sh KILN VARIANT   (VARIANT: mixtral | qwen3_moe)
# Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 variant=$2
source "$(dirname "$0")/common.sh"
tools/interop.sh python3 tests/interop/moe_import_make.py "$scratch" "$variant"
shards=$(ls "$scratch"/model/model-*-of-*.safetensors | wc -l)
[[ $shards -ge 2 && -f "$scratch/model/model.safetensors.index.json" ]] ||
  { echo "FAIL: expected a sharded save ($shards shard files)"; exit 1; }

# The model section that config.json describes (docs/moe.md names the keys beside its fields).
case $variant in
  mixtral) model="ffn_dim = 24
rope_theta = 1000000.0
moe_experts = 4
moe_top_k = 2" ;;
  qwen3_moe) model="ffn_dim = 40
head_dim = 12
norm_eps = 1e-6
qk_norm = true
moe_experts = 4
moe_top_k = 2
moe_ffn_dim = 16
moe_every = 2
moe_routing = \"qwen3\"" ;;
  *) echo "moe_import_test: unknown variant '$variant'" >&2; exit 2 ;;
esac
cat >"$scratch/exp.toml" <<TOML
$(run_section)

[model]
type = "llama"
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 32
block_size = 64
vocab_size = 257
$model
init_from = "$scratch/model"

$(loaded_as_snapshot_sections)
TOML
"$kiln" run "$scratch/exp.toml" --name m >/dev/null
"$kiln" eval m --data "$scratch/tokens.bin" --steps 1 --logits "$scratch/kiln_logits.npy" \
  --db "$scratch/kiln.db" >/dev/null 2>&1
tools/interop.sh python3 tests/interop/logits_check.py "$scratch/kiln_logits.npy" \
  "$scratch/logits.npy" 1e-5
"$kiln" eval --hf "$scratch/model" --task "$scratch/task.toml" --details "$scratch/details.jsonl" \
  --db "$scratch/kiln.db" >/dev/null
tools/interop.sh python3 tests/interop/hf_config_check.py "$scratch/model" \
  "$scratch/details.jsonl"
prompt="Déjà vu: the café's crème brûlée"
"$kiln" sample --hf "$scratch/model" --prompt "$prompt" --tokens 24 --temperature 0 \
  --db "$scratch/kiln.db" >"$scratch/sample.txt" 2>/dev/null
tools/interop.sh python3 tests/interop/hf_sample_check.py "$scratch/model" "$prompt" \
  "$scratch/sample.txt" 24
