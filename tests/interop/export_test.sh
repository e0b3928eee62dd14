#!/usr/bin/env bash
# Interop: a run trained and exported by the kiln under test, opened by transformers in .venv/
# (tests/interop/export_check.py says what is checked).
#   tests/interop/export_test.sh KILN VARIANT
# VARIANT: gpt (GPT-2 layout, character data), gpt_bpe (GPT-2's tokenizer: bos/eos 50256),
# gpt_sharded (exported with --max-shard-size 20KB: shards and model.safetensors.index.json),
# llama_gqa (grouped-query attention, untied), llama_tied_rope (tied embeddings, Llama 3 rope
# scaling), moe_mixtral (every block 4 experts, top 2: MixtralForCausalLM), moe_qwen3 (qk-norm,
# the second block of two 4 experts with Qwen3-MoE's routing: Qwen3MoeForCausalLM); the mixtures'
# logits are held to 1e-5. Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 variant=$2
source "$(dirname "$0")/common.sh"

for i in $(seq 600); do
  echo "In the beginning was the word number $i, and the word was $((i % 7 == 0 ? 0 : 1))."
done >"$scratch/corpus.txt"
tokenizer=char vocab=64
if [[ $variant == gpt_bpe ]]; then tokenizer=gpt2 vocab=50304; fi
"$kiln" prepare "$scratch/corpus.txt" --tokenizer $tokenizer --out "$scratch/data" \
  --val-fraction 0.1 >/dev/null

case $variant in
  gpt | gpt_bpe | gpt_sharded) model="type = \"gpt\"
n_layer = 2
n_head = 2
n_embd = 32" ;;
  llama_gqa) model="type = \"llama\"
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 32
multiple_of = 16" ;;
  llama_tied_rope) model="type = \"llama\"
n_layer = 2
n_head = 2
n_embd = 32
multiple_of = 16
tie_embeddings = true
rope_theta = 500000.0
rope_scaling_factor = 8.0
rope_original_context = 16" ;;
  moe_mixtral) model="type = \"llama\"
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 32
multiple_of = 16
moe_experts = 4
moe_top_k = 2
moe_ffn_dim = 24
moe_aux_loss_weight = 0.01" ;;
  moe_qwen3) model="type = \"llama\"
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 32
multiple_of = 16
qk_norm = true
moe_experts = 4
moe_top_k = 2
moe_ffn_dim = 16
moe_every = 2
moe_routing = \"qwen3\"" ;;
  *) echo "export_test: unknown variant '$variant'" >&2; exit 2 ;;
esac
cat >"$scratch/exp.toml" <<TOML
$(run_section)

[model]
$model
block_size = 64
vocab_size = $vocab

[data]
train = "$scratch/data/train_*.bin"
val = "$scratch/data/val_*.bin"

[train]
steps = 20
micro_batch = 4
seq_len = 32

[optimizer]
lr = 1e-2

[eval]
every = 0

[checkpoint]
every = 20
TOML
"$kiln" run "$scratch/exp.toml" --name m >/dev/null
if [[ $variant == gpt_sharded ]]; then
  "$kiln" export m -o "$scratch/hf" --max-shard-size 20KB --db "$scratch/kiln.db"
  shards=$(ls "$scratch"/hf/model-*-of-*.safetensors | wc -l)
  [[ $shards -ge 2 && -f "$scratch/hf/model.safetensors.index.json" && ! -e "$scratch/hf/model.safetensors" ]] ||
    { echo "FAIL: --max-shard-size 20KB wrote $shards shard files"; exit 1; }
else
  "$kiln" export m -o "$scratch/hf" --db "$scratch/kiln.db"
fi
loss=$("$kiln" eval m --data "$scratch/data/val_*.bin" --logits "$scratch/logits.npy" \
  --db "$scratch/kiln.db" 2>/dev/null |
  sed -n 's/.* loss \([0-9.]*\) .*/\1/p')
prompt="In the beginning"
"$kiln" sample m --prompt "$prompt" --tokens 32 --temperature 0 --db "$scratch/kiln.db" \
  2>/dev/null >"$scratch/sample.txt"
# 16 prompts of different lengths, generated in one batch (left-padded, with the cache).
for i in $(seq 16); do
  words=$(head -c $((8 + i * 2)) <<<"In the beginning was the word number $((i * 37)), and the word")
  printf '{"prompt": "%s", "answer": ""}\n' "$words"
done >"$scratch/prompts.jsonl"
printf 'name = "gen"\nkind = "generate"\nitems = "prompts.jsonl"\nmax_gen_toks = 32\nuntil = ["@"]\n' \
  >"$scratch/gen.toml"
"$kiln" eval m --task "$scratch/gen.toml" --batch 16 --details "$scratch/generated.jsonl" \
  --db "$scratch/kiln.db" 2>/dev/null >/dev/null
tools/interop.sh python3 tests/interop/export_check.py "$scratch/hf" \
  "$scratch/data" "$loss" "$scratch/sample.txt" "$prompt" 4 32 "$scratch/logits.npy" \
  "$scratch/generated.jsonl" "$scratch/corpus.txt" "$([[ $variant == moe_* ]] && echo 1e-5 || echo 1e-4)"
