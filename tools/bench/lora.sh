#!/usr/bin/env bash
# LoRA against full fine-tuning on experiments/lora_llama.toml (docs/fine-tuning.md): the llama
# experiment trained and exported as its base, then, in one sitting, for each way
# (lora: rank-8 adapters on every linear layer of the blocks, the base frozen; lora_bf16: the
# same with the blocks' frozen linear weights in bf16, adapter.base_dtype; lora_int8: in int8;
# full: every weight, adapter.type = none, lr 1e-3):
#   kiln bench    tokens/s, trainable and frozen parameters and the frozen ones' bytes,
#                 optimizer state, peak gradient and
#                 training-state bytes (the allocator's and Kiln's counts; STEPS timed steps)
#   kiln run      the val loss after the experiment's 60 steps
# Only comparable within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${STEPS:-10}
[[ -n "$(ls data/kjv_gpt2/train_*.bin 2>/dev/null)" ]] || { echo "bench: run tools/setup.sh first" >&2; exit 2; }
scratch=$(mktemp -d /tmp/kiln-bench-lora.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 "model name" /proc/cpuinfo
kiln=build/kiln
db="$scratch/kiln.db"
common=(--set run.db="$db" --set run.out_dir="$scratch/runs")
"$kiln" run experiments/llama_kjv.toml --name base "${common[@]}" >/dev/null
"$kiln" export base -o "$scratch/base_hf" --db "$db" >/dev/null
ways=(lora lora_bf16 lora_int8 full)
declare -A sets=([lora]="" [lora_bf16]="--set adapter.base_dtype=bf16"
                 [lora_int8]="--set adapter.base_dtype=int8"
                 [full]="--set adapter.type=none --set optimizer.lr=1e-3")
for way in "${ways[@]}"; do
  # shellcheck disable=SC2086
  "$kiln" bench experiments/lora_llama.toml --steps "$steps" "${common[@]}" \
    --set model.init_from="$scratch/base_hf" ${sets[$way]} >"$scratch/$way.bench" 2>&1
  # shellcheck disable=SC2086
  "$kiln" run experiments/lora_llama.toml --name "$way" "${common[@]}" \
    --set model.init_from="$scratch/base_hf" ${sets[$way]} >/dev/null
done
printf "%-9s %10s %12s %12s %14s %16s %16s %10s\n" way tokens/s trainable frozen frozen_bytes \
  optimizer_bytes gradient_bytes val_loss
for way in "${ways[@]}"; do
  b="$scratch/$way.bench"
  printf "%-9s %10s %12s %12s %14s %16s %16s %10s\n" "$way" \
    "$(sed -n 's/^tokens\/s *\([0-9]*\).*/\1/p' "$b")" \
    "$(sed -n 's/^parameters *\([0-9]*\) trainable.*/\1/p' "$b")" \
    "$(sed -n 's/^parameters .* \([0-9]*\) frozen.*/\1/p' "$b")" \
    "$(sed -n 's/^parameters .* frozen in \([0-9]*\) bytes.*/\1/p' "$b")" \
    "$(sed -n 's/^optimizer state *\([0-9]*\) bytes.*/\1/p' "$b")" \
    "$(sed -n 's/^peak gradients *\([0-9]*\) bytes.*/\1/p' "$b")" \
    "$(sqlite3 "$db" "select printf('%.4f', e.loss) from evals e join runs r on r.id = e.run_id
        where r.name = '$way' and e.split = 'val' order by e.step desc limit 1")"
done
