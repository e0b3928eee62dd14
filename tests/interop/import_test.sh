#!/usr/bin/env bash
# Interop: a random model that transformers made and saved sharded (save_pretrained with
# max_shard_size), in fp32 or bf16, loaded by the kiln under test through model.init_from; its
# `kiln eval` loss on the same tokens equals transformers' (tests/interop/import_make.py).
#   tests/interop/import_test.sh KILN VARIANT DTYPE
# VARIANT: gpt | llama_gqa. DTYPE: float32 (within 1e-4) | bfloat16 (within 1e-2). Exit 77:
# skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 variant=$2 dtype=$3
source "$(dirname "$0")/common.sh"
tools/interop.sh python3 tests/interop/import_make.py "$scratch" "$variant" "$dtype"
shards=$(ls "$scratch"/model/model-*-of-*.safetensors | wc -l)
[[ $shards -ge 2 && -f "$scratch/model/model.safetensors.index.json" ]] ||
  { echo "FAIL: expected a sharded save ($shards shard files)"; exit 1; }

case $variant in
  gpt) model="type = \"gpt\"
n_layer = 2
n_head = 2
n_embd = 32" ;;
  llama_gqa) model="type = \"llama\"
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 32
ffn_dim = 64" ;;
  *) echo "import_test: unknown variant '$variant'" >&2; exit 2 ;;
esac
# One step at lr 0 (no weight decay, no clipping that moves a weight): the snapshot holds the
# imported weights as they were loaded.
cat >"$scratch/exp.toml" <<TOML
$(run_section)

[model]
$model
block_size = 64
vocab_size = 96
init_from = "$scratch/model"

$(loaded_as_snapshot_sections)
TOML
"$kiln" run "$scratch/exp.toml" --name m >/dev/null
loss=$("$kiln" eval m --data "$scratch/tokens.bin" --db "$scratch/kiln.db" 2>/dev/null |
  sed -n 's/.* loss \([0-9.]*\) .*/\1/p')
expected=$(cat "$scratch/loss.txt")
tolerance=1e-4
[[ $dtype == bfloat16 ]] && tolerance=1e-2
if awk -v a="$loss" -v b="$expected" -v t="$tolerance" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= t) }'; then
  echo "ok: kiln eval loss $loss, transformers $expected ($variant, $dtype, $shards shards)"
else
  echo "FAIL: kiln eval loss '$loss', transformers $expected ($variant, $dtype): off by more than $tolerance"
  exit 1
fi
