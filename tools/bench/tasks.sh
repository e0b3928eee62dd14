#!/usr/bin/env bash
# Task scoring against plain evaluation on the same weights: one run of EXPERIMENT
# (default: the default experiment, STEPS = 200 steps) trained into a scratch store, then
#   1. kiln eval --split val: the loss over the validation split, tokens/s read;
#   2. kiln eval --task kjv_cloze (300 items x 4 choices): items/s and tokens/s read, each
#      distinct token once (a context that fits is read once, its choices from its key/value
#      cache; one cut to fit is read whole with each choice);
#   3. kiln eval --task arithmetic (300 items, greedy, up to 16 tokens each, key/value cache):
#      items/s and tokens/s read (prompt and generated).
# The cost per token of (2) over (1) (target <= 1.3x) and of (3) over (2) (target <= 2x) are the
# figures docs/benchmarks.md keeps.
# Only comparable within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
experiment=${1:-experiments/kjv_char.toml}
steps=${STEPS:-200}
scratch=$(mktemp -d /tmp/kiln-bench-tasks.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
build/kiln run "$experiment" --name bench --set train.steps="$steps" \
  --set checkpoint.every="$steps" --set eval.every=0 --set run.db="$scratch/kiln.db" \
  --set run.out_dir="$scratch/runs" >/dev/null
eval_line=$(build/kiln eval bench --db "$scratch/kiln.db" --split val 2>&1 | grep -v snapshot)
echo "$eval_line"
declare -A rate
plain=$(sed -n 's/.*(\([0-9]*\) tokens\/s).*/\1/p' <<<"$eval_line")
for task in kjv_cloze arithmetic; do
  out=$(build/kiln eval bench --db "$scratch/kiln.db" --task "experiments/tasks/$task.toml" \
    2>&1 | grep -v snapshot)
  echo "$out"
  scored=$(sed -n 's/.*, \([0-9]*\) tokens\/s read.*/\1/p' <<<"$out")
  echo "   cost per token read, over plain eval's: $(awk -v a="$plain" -v b="$scored" \
    'BEGIN { printf "%.2fx", a / b }')"
  rate[$task]=$scored
done
echo "generation's cost per token read, over multiple choice's: $(awk -v a="${rate[kjv_cloze]}" \
  -v b="${rate[arithmetic]}" 'BEGIN { printf "%.2fx", a / b }')"
