#!/usr/bin/env bash
# Interop: evaluation tasks scored by the kiln under test (`kiln eval --task --details`) and by
# transformers on the same run's export, in the sid chroot (tests/interop/task_check.py says what
# is compared): the shipped KJV cloze (multiple choice) and arithmetic (generation) tasks.
#   tests/interop/task_test.sh KILN
# Exit 77: skipped (the chroot cannot be made here; tools/interop.sh).
set -euo pipefail
kiln=$1
source "$(dirname "$0")/common.sh"

# A corpus of the tasks' own text, so that the character tokenizer covers every item.
for _ in 1 2 3; do
  sed 's/[{}"\[]//g; s/\\n/\n/g; s/]//g' experiments/tasks/kjv_cloze.jsonl experiments/tasks/arithmetic.jsonl
done >"$scratch/corpus.txt"
"$kiln" prepare "$scratch/corpus.txt" --out "$scratch/data" --val-fraction 0.1 >/dev/null
cat >"$scratch/exp.toml" <<TOML
$(run_section)

[model]
type = "gpt"
n_layer = 2
n_head = 2
n_embd = 32
block_size = 64
vocab_size = 96

[data]
train = "$scratch/data/train_*.bin"
val = "$scratch/data/val_*.bin"

[train]
steps = 60
micro_batch = 8
seq_len = 64

[optimizer]
lr = 1e-2

[checkpoint]
every = 60
TOML
"$kiln" run "$scratch/exp.toml" --name m >/dev/null
"$kiln" export m -o "$scratch/hf" --db "$scratch/kiln.db" 2>/dev/null
# The shipped tasks as they are, less their few-shot examples for arithmetic (transformers' side
# lays out the prompt itself) and fewer items.
cat >"$scratch/cloze.toml" <<TOML
name = "kjv_cloze"
kind = "choice"
items = "$PWD/experiments/tasks/kjv_cloze.jsonl"
TOML
cat >"$scratch/arithmetic.toml" <<TOML
name = "arithmetic"
kind = "generate"
items = "$PWD/experiments/tasks/arithmetic.jsonl"
limit = 100
max_tokens = 16
normalize = ["strip", "lower"]
TOML
"$kiln" eval m --task "$scratch/cloze.toml" --details "$scratch/cloze_kiln.jsonl" --batch 7 \
  --db "$scratch/kiln.db"
"$kiln" eval m --task "$scratch/arithmetic.toml" --details "$scratch/arithmetic_kiln.jsonl" \
  --db "$scratch/kiln.db"
tools/interop.sh "$scratch" python3 /kiln/tests/interop/task_check.py "$scratch/hf" \
  "$scratch/data/tokenizer.json" "$scratch/kiln.db" /kiln/experiments/tasks \
  "$scratch/cloze_kiln.jsonl" "$scratch/arithmetic_kiln.jsonl" 100 16
