#!/usr/bin/env bash
# What a snapshot costs the training thread, written synchronously and with checkpoint.async, on
# GPT-2 124M's shapes (experiments/gpt2_124m.toml) with AdamW, on one process and on two fsdp
# ranks (kiln launch): short sequences (seq_len 32, micro_batch 1, 64 tokens a step), so that a
# step is short beside a 1.5 GB snapshot; 6 steps with a snapshot at steps 2, 4 and 6; eval off;
# data/kjv_gpt2's token shards (tools/setup.sh --tests prepares them).
#
# For each run it prints:
#   stall/snapshot  the run's closing "snapshots N ms" (the training thread's time in saves, and
#                   waiting at a snapshot step for a background save still writing), less the
#                   wait at the run's end for the last background save (no step is held then),
#                   over the 3 snapshots
#   end wait        that last wait: what the last background save still needed after the last step
#   peak RSS        the largest resident set of the run's processes (GNU time's %M: under kiln
#                   launch, the largest rank's); against the run without snapshots (none), what
#                   a snapshot adds to it
#   files           the last snapshot's files and their sizes: shard_R is what rank R wrote
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x build/kiln ]] || { echo "bench: build kiln first (tools/setup.sh)" >&2; exit 2; }
[[ -d data/kjv_gpt2 ]] || { echo "bench: data/kjv_gpt2 missing: tools/setup.sh --tests" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench: GNU time missing: apt-get install time" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "== $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"

settings=(--set data.train=data/kjv_gpt2/train_*.bin --set data.val=data/kjv_gpt2/val_*.bin
  --set train.steps=6 --set train.micro_batch=1 --set train.seq_len=32 --set train.batch_tokens=64
  --set train.log_every=1 --set schedule.warmup=1 --set eval.every=0 --set checkpoint.every=2
  --set checkpoint.keep=1)

# run NAME ASYNC RANKS [--set ...]: trains once and prints the row; ASYNC none: no snapshots.
run() {
  local name=$1 async=$2 ranks=$3
  shift 3
  local log="$scratch/$name.log"
  local kiln=(build/kiln)
  [[ $ranks -gt 1 ]] && kiln=(build/kiln launch --nproc-per-node "$ranks" --)
  /usr/bin/time -f 'peak_rss_kb %M' "${kiln[@]}" run experiments/gpt2_124m.toml --name "$name" \
    "${settings[@]}" $(snapshot_settings "$async") --set run.db="$scratch/kiln.db" \
    --set run.out_dir="$scratch/runs" "$@" >"$log" 2>&1 || { tail -5 "$log" >&2; exit 1; }
  local total end_wait stall rss folder
  total=$(grep -oP 'snapshots \K[0-9.]+(?= ms)' "$log" | tail -1)
  end_wait=$( (grep -oP 'step 6: waited \K[0-9.]+' "$log" || true) | awk '{s += $1 * 1000} END {print s + 0}')
  stall=$(awk -v t="$total" -v w="$end_wait" 'BEGIN {printf "%.0f", (t - w) / 3}')
  rss=$(grep -oP 'peak_rss_kb \K[0-9]+' "$log" | tail -1)
  folder=$(find "$scratch/runs" -path "*/$name@*/snapshots/step_000006" -type d | head -1)
  printf '%-10s ranks %s  stall/snapshot %6s ms  end wait %6.0f ms  peak RSS %6d MB  files: %s\n' \
    "$name" "$ranks" "$stall" "$end_wait" "$((rss / 1024))" \
    "$([[ -z $folder ]] || find "$folder" -type f -printf '%f=%s ')"
}

snapshot_settings() {
  if [[ $1 == none ]]; then echo "--set checkpoint.every=0"; else echo "--set checkpoint.async=$1"; fi
}

run none none 1
run sync false 1
run async true 1
run fsdp-none none 2 --set parallel.type=fsdp
run fsdp-sync false 2 --set parallel.type=fsdp
run fsdp-async true 2 --set parallel.type=fsdp
