#!/usr/bin/env bash
# Interop: a LoRA adapter folder that PEFT wrote (get_peft_model with explicit target_modules and
# rsLoRA, then save_pretrained; tests/interop/peft_make.py) on a random model transformers made
# (tests/interop/import_make.py), loaded by the kiln under test through model.init_from and
# adapter.init_from; `kiln eval --logits` on the same tokens equals PEFT's logits within 1e-5. The
# same adapter saved with lora_bias (a bias trained beside B, which Kiln's LoRA has not) is
# refused in one line that says so.
#   tests/interop/peft_import_test.sh KILN VARIANT
# VARIANT: gpt (GPT-2's Conv1D layout, which PEFT adapts with fan_in_fan_out; c_attn and c_proj,
# the latter both attention's and the MLP's) or llama_gqa (q_proj, v_proj and down_proj of
# grouped-query attention). Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 variant=$2
source "$(dirname "$0")/common.sh"

case $variant in
  gpt) model=$'type = "gpt"\nn_layer = 2\nn_head = 2\nn_embd = 32' targets="c_attn,c_proj" ;;
  llama_gqa) model=$'type = "llama"\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nn_embd = 32\nffn_dim = 64'
    targets="q_proj,v_proj,down_proj" ;;
  *) echo "peft_import_test: unknown variant '$variant'" >&2; exit 2 ;;
esac
tools/interop.sh python3 tests/interop/import_make.py "$scratch" "$variant" float32 >/dev/null
tools/interop.sh python3 tests/interop/peft_make.py "$scratch/model" "$scratch/tokens.bin" \
  "$targets" "$scratch"

# One step at lr 0 (sgd: no weight decay): the snapshot holds the adapter as it was loaded, and
# `kiln eval` reads it there. rank, alpha and rslora are peft_make.py's r, lora_alpha, use_rslora.
cat >"$scratch/exp.toml" <<TOML
$(run_section)

[model]
$model
block_size = 64
vocab_size = 96
init_from = "$scratch/model"

[adapter]
type = "lora"
rank = 4
alpha = 8
rslora = true
targets = "$targets"
init_from = "$scratch/adapter"

$(loaded_as_snapshot_sections)
TOML
"$kiln" run "$scratch/exp.toml" --name peft >/dev/null
"$kiln" eval peft --data "$scratch/tokens.bin" --logits "$scratch/kiln_logits.npy" \
  --db "$scratch/kiln.db" >/dev/null 2>&1
sed "s#$scratch/adapter\"#$scratch/adapter_with_bias\"#" "$scratch/exp.toml" >"$scratch/bias.toml"
if "$kiln" run "$scratch/bias.toml" --name with-bias >"$scratch/bias.out" 2>"$scratch/bias.err"; then
  echo "FAIL: kiln loaded an adapter saved with lora_bias"; exit 1
fi
[[ $(wc -l <"$scratch/bias.err") -eq 1 ]] && grep -q "lora_bias true" "$scratch/bias.err" ||
  { echo "FAIL: the refusal of lora_bias is not one line naming it:"; cat "$scratch/bias.err"; exit 1; }
echo "ok: an adapter with lora_bias is refused: $(cat "$scratch/bias.err")"
tools/interop.sh python3 - "$scratch/logits.npy" "$scratch/kiln_logits.npy" "$variant" <<'PY'
import sys

import numpy as np

peft_logits, kiln_logits = np.load(sys.argv[1]), np.load(sys.argv[2])
if peft_logits.shape != kiln_logits.shape:
    sys.exit(f"FAIL: kiln's logits {kiln_logits.shape}, PEFT's {peft_logits.shape}")
worst = float(np.abs(peft_logits - kiln_logits).max())
if worst > 1e-5:
    sys.exit(f"FAIL: kiln's logits with PEFT's adapter differ from PEFT's by up to {worst:.3g}")
print(f"ok: kiln's logits {kiln_logits.shape} with PEFT's adapter ({sys.argv[3]}) equal "
      f"PEFT's within {worst:.2g}")
PY
