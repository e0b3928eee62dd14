#!/usr/bin/env bash
# LoRA in one sitting, in two parts (docs/benchmarks.md, "LoRA against PEFT" and "LoRA against
# full fine-tuning"). Both start from the llama experiment (experiments/llama_kjv.toml) trained
# and exported as a Hugging Face folder, the base.
#
# 1. Kiln against PEFT + transformers (.venv/, tools/setup.sh --tests), the same adapter on the
#    same data on the CPU: experiments/lora_llama.toml's adapter and optimizer (rank 8, alpha 16,
#    every linear layer of the blocks, dropout 0; AdamW lr 1e-2 without decay, cosine with 5
#    warm-up steps, clip 1.0) trained PEFT_STEPS steps (default 20) on llama_kjv's data, the KJV
#    in GPT-2 tokens, 8 x 64-token windows a step (token shards: both sides read the same
#    windows; the SFT records' batching is Kiln's own and PEFT has none). The initial adapter is
#    PEFT's (tools/bench/lora_peft.py init: A Kaiming-uniform, B zero), read by Kiln through
#    adapter.init_from, so both start from the same A and B. Prints
#      loss        step, Kiln's loss (the run store's metrics), PEFT's, their difference; then
#                  the largest difference (target: within 1e-3 over the 20 steps)
#      tokens/s    per round (ROUNDS, default 2, alternated): kiln bench (STEPS timed steps after
#                  3) and PEFT's mean over its steps after 3 of a PEFT_STEPS-step run; then
#                  Kiln's over PEFT's of the rounds' sums (target: >= 1.3x)
# 2. LoRA against full fine-tuning on experiments/lora_llama.toml (docs/fine-tuning.md), the SFT
#    example's proverbs, for each way (lora: rank-8 adapters on every linear layer of the blocks,
#    the base frozen; lora_bf16: the same with the blocks' frozen linear weights in bf16,
#    adapter.base_dtype; lora_int8: in int8; full: every weight, adapter.type = none, lr 1e-3):
#      kiln bench    tokens/s, trainable and frozen parameters and the frozen ones' bytes,
#                    optimizer state, peak gradient bytes (Kiln's counts; STEPS timed steps)
#      kiln run      the val loss after the experiment's 60 steps
#    PARTS=peft skips it; PARTS=ways skips part 1.
# Only comparable within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${STEPS:-10}
peft_steps=${PEFT_STEPS:-20}
rounds=${ROUNDS:-2}
parts=${PARTS:-peft ways}
[[ -n "$(ls data/kjv_gpt2/train_*.bin 2>/dev/null)" ]] || { echo "bench: run tools/setup.sh first" >&2; exit 2; }
scratch=$(mktemp -d /tmp/kiln-bench-lora.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
echo "== $(uname -n), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
kiln=build/kiln
db="$scratch/kiln.db"
common=(--set run.db="$db" --set run.out_dir="$scratch/runs")
"$kiln" run experiments/llama_kjv.toml --name base "${common[@]}" >/dev/null
"$kiln" export base -o "$scratch/base_hf" --db "$db" >/dev/null

if [[ " $parts " == *" peft "* ]]; then
  # The adapter of lora_llama.toml on llama_kjv's token shards; eval and snapshots off.
  peft=(experiments/llama_kjv.toml "${common[@]}" --set model.init_from="$scratch/base_hf"
    --set adapter.type=lora --set adapter.rank=8 --set adapter.alpha=16
    --set adapter.targets=all-linear --set adapter.dropout=0 --set optimizer.lr=1e-2
    --set optimizer.weight_decay=0 --set schedule.warmup=5 --set train.steps="$peft_steps"
    --set train.log_every=1 --set eval.every=0 --set eval.final_test=false
    --set checkpoint.every=0)
  "$kiln" config "${peft[@]}" >"$scratch/peft.toml"
  tools/interop.sh python3 tools/bench/lora_peft.py init "$scratch/peft.toml" "$scratch/adapter0"
  peft+=(--set adapter.init_from="$scratch/adapter0")
  "$kiln" run "${peft[@]}" --name kiln_peft >/dev/null
  sqlite3 "$db" "select m.step, printf('%.6f', m.loss) from metrics m join runs r on r.id = m.run_id
    where r.name = 'kiln_peft' order by m.step" | tr '|' ' ' >"$scratch/kiln.loss"
  for round in $(seq "$rounds"); do
    "$kiln" bench "${peft[@]}" --steps "$steps" --warmup 3 >"$scratch/kiln.$round.bench"
    tools/interop.sh python3 tools/bench/lora_peft.py train "$scratch/peft.toml" \
      "$scratch/adapter0" --warmup 3 >"$scratch/peft.$round.out"
  done
  head -1 "$scratch/peft.1.out"
  sed -n 's/^step \([0-9]*\) | loss \([0-9.]*\) .*/\1 \2/p' "$scratch/peft.1.out" >"$scratch/peft.loss"
  echo "loss: step, kiln, peft, kiln - peft"
  join "$scratch/kiln.loss" "$scratch/peft.loss" |
    awk '{ d = $2 - $3; printf "loss %2d %.6f %.6f %+.6f\n", $1, $2, $3, d
           if (d < 0) d = -d; if (d > worst) worst = d; n++ }
         END { printf "loss: largest |kiln - peft| over %d steps: %.2e (target 1e-3)\n", n, worst }'
  for round in $(seq "$rounds"); do
    k=$(sed -n 's/^tokens\/s *\([0-9]*\).*/\1/p' "$scratch/kiln.$round.bench")
    p=$(sed -n 's/^peft: .*tokens\/s \([0-9]*\).*/\1/p' "$scratch/peft.$round.out")
    echo "tokens/s round $round: kiln $k peft $p"
    echo "$k $p" >>"$scratch/rates"
  done
  awk '{ k += $1; p += $2 } END { printf "tokens/s: kiln / peft %.2fx (target 1.3x)\n", k / p }' \
    "$scratch/rates"
  grep -m1 '^CPU products' "$scratch/kiln.1.bench" || true
fi

if [[ " $parts " == *" ways "* ]]; then
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
fi
