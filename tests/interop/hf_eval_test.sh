#!/usr/bin/env bash
# Interop: `kiln eval --hf` on a model directory transformers made and Kiln never trained
# (tests/interop/hf_eval_make.py), scored again by lm-evaluation-harness itself, through its
# Hugging Face backend, on the same directory (tests/interop/harness_check.py): choices whose
# characters are not their bytes, the same in ChatML turns, and a generation task with one
# first_n example, each a Kiln TOML and the harness's YAML (tests/interop/tasks/*.yaml).
# Then `kiln sample --hf` against generate() and the tokenizers library's decode.
#   tests/interop/hf_eval_test.sh KILN VARIANT   (VARIANT: llama | qwen_tokenizer | gpt2)
# Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 variant=$2
source "$(dirname "$0")/common.sh"
mkdir "$scratch/model" "$scratch/tasks"
tools/interop.sh python3 tests/interop/hf_eval_make.py "$scratch/model" \
  "$variant"
# Its tokenizer.json: GPT-2's built by tokenizers (as tokenizer_test.sh builds it), or the
# published file tools/setup.sh --tests fetched.
case $variant in
  gpt2) tools/interop.sh python3 tests/interop/tokenizer_check.py gpt2-json \
    "$scratch/model" ;;
  llama | qwen_tokenizer)
    file=$PWD/data/tokenizers/$([[ $variant == llama ]] && echo llama3 || echo qwen2)/tokenizer.json
    [[ -s $file ]] || { echo "FAIL: no $file: run tools/setup.sh --tests"; exit 1; }
    cp "$file" "$scratch/model/" ;;
esac
cp tests/interop/tasks/accents{.jsonl,.toml,_chat.toml,.yaml,_chat.yaml} \
  experiments/tasks/arithmetic.jsonl "$scratch/tasks/"
# The arithmetic task with first_n (tests/interop/tasks/arithmetic.yaml says why), on 24 items
# (the harness's --limit below), generating at most 8 tokens in both formats.
sed 's/^num_fewshot = 1$/num_fewshot = 1\nfewshot_sampler = "first_n"\nlimit = 24/;
     s/^max_gen_toks = 16$/max_gen_toks = 8/' \
  experiments/tasks/arithmetic.toml >"$scratch/tasks/arithmetic.toml"
sed 's/^  max_gen_toks: 16$/  max_gen_toks: 8/' tests/interop/tasks/arithmetic.yaml \
  >"$scratch/tasks/arithmetic.yaml"
checks=()
# The directory given with and without its trailing slash is one run.
for task in accents accents_chat arithmetic; do
  "$kiln" eval --hf "$scratch/model$([[ $task == accents_chat ]] && echo /)" \
    --task "$scratch/tasks/$task.toml" \
    --details "$scratch/$task.kiln.jsonl" --batch 8 --db "$scratch/kiln.db"
  checks+=("$task=$scratch/$task.kiln.jsonl")
done
# The directory is a run of the store, beside any other: listed, and its scores shown.
"$kiln" runs show "hf-model" --db "$scratch/kiln.db" | grep -q "accents" ||
  { echo "FAIL: runs show hf-model lists no accents score"; exit 1; }
# The end-of-text token, as the published tokenizer_config.json names it (eos_token: GPT-2's,
# and Llama 3's and Qwen2's base models'), and as Kiln finds it in tokenizer.json.
eos=$([[ $variant == llama ]] && echo '<|end_of_text|>' || echo '<|endoftext|>')
HF_DATASETS_CACHE=$scratch/datasets tools/interop.sh python3 tests/interop/harness_check.py \
  "$scratch/model" "$scratch/model/tokenizer.json" "$scratch/kiln.db" "$scratch/tasks" \
  --eos "$eos" --limit arithmetic=24 --chat accents_chat "${checks[@]}"
# kiln sample --hf: greedy tokens, decoded by Kiln, as transformers and tokenizers give them.
prompt="Déjà vu: the café's crème brûlée"
"$kiln" sample --hf "$scratch/model" --prompt "$prompt" --tokens 24 --temperature 0 \
  >"$scratch/sample.txt" 2>"$scratch/sample.err"
grep -q "key/value cache: .* allocated" "$scratch/sample.err" ||
  { echo "FAIL: kiln sample printed no key/value cache line: $(cat "$scratch/sample.err")"; exit 1; }
tools/interop.sh python3 tests/interop/hf_sample_check.py "$scratch/model" \
  "$prompt" "$scratch/sample.txt" 24
