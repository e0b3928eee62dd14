#!/usr/bin/env bash
# Interop: a LoRA fine-tune by the kiln under test, from a Hugging Face folder it exported
# (model.init_from), exported as PEFT's adapter folder and merged; tests/interop/lora_check.py
# opens the adapter on that base with PEFT (PeftModel.from_pretrained) and the merged folder with
# transformers, and compares both with `kiln eval --logits`. The other way, a folder PEFT wrote
# read by Kiln: tests/interop/peft_import_test.sh.
#   tests/interop/lora_test.sh KILN VARIANT
# VARIANT: gpt (GPT-2's Conv1D layout: fan_in_fan_out), llama (grouped-query attention), or a
# mixture of experts with adapters on its attention projections: moe_mixtral (base exported as
# MixtralForCausalLM) or moe_qwen3 (qk-norm, a dense block and an MoE one: Qwen3MoeForCausalLM).
# Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 variant=$2
source "$(dirname "$0")/common.sh"

for i in $(seq 600); do
  echo "In the beginning was the word number $i, and the word was $((i % 7 == 0 ? 0 : 1))."
done >"$scratch/corpus.txt"
"$kiln" prepare "$scratch/corpus.txt" --out "$scratch/data" --val-fraction 0.1 >/dev/null
case $variant in
  gpt) model=$'type = "gpt"\nn_layer = 2\nn_head = 2\nn_embd = 32' targets="c_attn,c_proj,c_fc" ;;
  llama) model=$'type = "llama"\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nn_embd = 32\nmultiple_of = 16'
    targets="all-linear" ;;
  moe_mixtral) model=$'type = "llama"\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nn_embd = 32\nmultiple_of = 16\nmoe_experts = 4\nmoe_top_k = 2'
    targets="q_proj,k_proj,v_proj,o_proj" ;;
  moe_qwen3) model=$'type = "llama"\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nn_embd = 32\nmultiple_of = 16\nqk_norm = true\nmoe_experts = 4\nmoe_top_k = 2\nmoe_ffn_dim = 16\nmoe_every = 2\nmoe_routing = "qwen3"'
    targets="q_proj,k_proj,v_proj,o_proj" ;;
  *) echo "lora_test: unknown variant '$variant'" >&2; exit 2 ;;
esac
experiment() {  # experiment STEPS LR [MORE]
  cat <<TOML
$(run_section)

[model]
$model
block_size = 64
vocab_size = 64

[data]
train = "$scratch/data/train_*.bin"
val = "$scratch/data/val_*.bin"

[train]
steps = $1
micro_batch = 4
seq_len = 32

[optimizer]
lr = $2

[eval]
every = 0

[checkpoint]
every = $1
${3:-}
TOML
}
experiment 20 1e-2 >"$scratch/base.toml"
"$kiln" run "$scratch/base.toml" --name base >/dev/null
"$kiln" export base -o "$scratch/base_hf" --db "$scratch/kiln.db" >/dev/null
experiment 20 2e-2 "[adapter]
type = \"lora\"
rank = 4
alpha = 8
targets = \"$targets\"" >"$scratch/lora.toml"
sed -i "s|^\[model\]$|[model]\ninit_from = \"$scratch/base_hf\"|" "$scratch/lora.toml"
"$kiln" run "$scratch/lora.toml" --name tuned >/dev/null
"$kiln" eval tuned --data "$scratch/data/val_*.bin" --logits "$scratch/logits.npy" \
  --db "$scratch/kiln.db" >/dev/null 2>&1
"$kiln" export tuned -o "$scratch/adapter" --db "$scratch/kiln.db"
"$kiln" export tuned --merge -o "$scratch/merged" --db "$scratch/kiln.db"
tools/interop.sh python3 tests/interop/lora_check.py "$scratch/base_hf" \
  "$scratch/adapter" "$scratch/merged" "$scratch/data" "$scratch/logits.npy" 4 32
