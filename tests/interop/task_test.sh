#!/usr/bin/env bash
# Interop: evaluation tasks scored by the kiln under test (`kiln eval --task --details`) and by
# lm-evaluation-harness itself, through its Hugging Face backend, on the same run's export
# (tests/interop/harness_check.py says what is compared): the shipped KJV cloze (multiple choice)
# and arithmetic (generation, one first_n example) tasks, choices whose characters are not their
# bytes (tests/interop/tasks/accents), and those in ChatML turns; each task a Kiln TOML and the
# harness's YAML (tests/interop/tasks/*.yaml).
#   tests/interop/task_test.sh KILN
# Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1
source "$(dirname "$0")/common.sh"

mkdir "$scratch/tasks"
cp experiments/tasks/kjv_cloze.{toml,jsonl} experiments/tasks/arithmetic.jsonl \
  tests/interop/tasks/accents{.jsonl,.toml,_chat.toml} "$scratch/tasks/"
# A corpus of the tasks' own text and ChatML's markers, so that the character tokenizer covers
# every item.
for _ in 1 2 3; do
  sed 's/[{}"\[]//g; s/\\n/\n/g; s/]//g' "$scratch"/tasks/*.jsonl
  printf '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n'
done >"$scratch/corpus.txt"
"$kiln" prepare "$scratch/corpus.txt" --out "$scratch/data" --val-fraction 0.1 >/dev/null
cat >"$scratch/exp.toml" <<TOML
$(run_section)

[model]
type = "gpt"
n_layer = 2
n_head = 2
n_embd = 32
block_size = 128
vocab_size = 160

[data]
train = "$scratch/data/train_*.bin"
val = "$scratch/data/val_*.bin"

[train]
steps = 60
micro_batch = 8
seq_len = 128

[optimizer]
lr = 1e-2

[checkpoint]
every = 60
TOML
"$kiln" run "$scratch/exp.toml" --name m >/dev/null
"$kiln" export m -o "$scratch/hf" --db "$scratch/kiln.db" 2>/dev/null
# The shipped arithmetic task with its example taken by the harness's first_n sampler (the
# harness's random one is Python's generator), on fewer items (the harness's --limit below).
sed 's/^num_fewshot = 1$/num_fewshot = 1\nfewshot_sampler = "first_n"\nlimit = 100/' \
  experiments/tasks/arithmetic.toml >"$scratch/tasks/arithmetic.toml"
checks=()
for task in kjv_cloze arithmetic accents accents_chat; do
  "$kiln" eval m --task "$scratch/tasks/$task.toml" --details "$scratch/$task.kiln.jsonl" \
    --batch 7 --db "$scratch/kiln.db"
  checks+=("$task=$scratch/$task.kiln.jsonl")
done
HF_DATASETS_CACHE=$scratch/datasets tools/interop.sh python3 tests/interop/harness_check.py \
  "$scratch/hf" "$scratch/data/tokenizer.json" "$scratch/kiln.db" tests/interop/tasks \
  --limit arithmetic=100 --chat accents_chat "${checks[@]}"
