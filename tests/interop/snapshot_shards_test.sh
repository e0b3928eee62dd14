#!/usr/bin/env bash
# Interop: a sharded snapshot, written by two fsdp ranks of the kiln under test, read by the
# safetensors library and held against the model transformers loads from `kiln export` of the same
# snapshot (tests/interop/snapshot_shards_check.py says what is checked).
#   tests/interop/snapshot_shards_test.sh KILN
# Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1
source "$(dirname "$0")/common.sh"

for i in $(seq 400); do
  echo "In the beginning was the word number $i, and the word was $((i % 7 == 0 ? 0 : 1))."
done >"$scratch/corpus.txt"
"$kiln" prepare "$scratch/corpus.txt" --tokenizer char --out "$scratch/data" \
  --val-fraction 0.1 >/dev/null
cat >"$scratch/exp.toml" <<TOML
$(run_section)

[model]
type = "llama"
n_layer = 2
n_head = 2
n_kv_head = 1
n_embd = 36
multiple_of = 16
block_size = 64
vocab_size = 64

[data]
train = "$scratch/data/train_*.bin"
val = "$scratch/data/val_*.bin"

[train]
steps = 3
micro_batch = 2
seq_len = 32

[optimizer]
type = "adamw"
lr = 1e-2

[parallel]
type = "fsdp"

[eval]
every = 0

[checkpoint]
every = 3
TOML
"$kiln" launch --nproc-per-node 2 -- run "$scratch/exp.toml" --name s >/dev/null
"$kiln" export s -o "$scratch/hf" --db "$scratch/kiln.db" >/dev/null
snapshot=$(ls -d "$scratch"/runs/s@*/snapshots/step_000003)
.venv/bin/python tests/interop/snapshot_shards_check.py "$snapshot" "$scratch/hf"
