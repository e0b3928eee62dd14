#!/usr/bin/env bash
# kiln's malloc (core/util/freed_memory.h): `kiln bench` of the experiments below, in one sitting,
# with the freed memory kept for the next step (kiln's setting) and returned to the system at once
# (MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0: each large tensor's pages faulted in again every
# step, as glibc's malloc does for every block over 32 MB). Prints tokens/s and peak resident
# memory. Only comparable within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${STEPS:-6}
[[ -n "$(ls data/kjv_gpt2/train_*.bin 2>/dev/null)" ]] || { echo "bench: run tools/setup.sh first" >&2; exit 2; }
scratch=$(mktemp -d /tmp/kiln-bench-malloc.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 "model name" /proc/cpuinfo
kiln=build/kiln
store=(--set run.db="$scratch/kiln.db" --set run.out_dir="$scratch/runs")
"$kiln" bench experiments/kjv_char.toml --steps 1 --warmup 0 "${store[@]}" | grep -o "malloc: .*"
printf "%-12s %-9s %10s %10s\n" experiment malloc tokens/s peak_MB
for experiment in kjv_gpt2 kjv_char; do
  for way in kept returned; do
    conf=""
    [[ $way == returned ]] && conf="dirty_decay_ms:0,muzzy_decay_ms:0"
    out=$(MALLOC_CONF=$conf "$kiln" bench "experiments/$experiment.toml" --steps "$steps" \
      --warmup 2 "${store[@]}" 2>&1)
    printf "%-12s %-9s %10s %10s\n" "$experiment" "$way" \
      "$(sed -n 's/^tokens\/s *\([0-9]*\).*/\1/p' <<<"$out")" \
      "$(sed -n 's/^peak memory *\([0-9]*\) MB.*/\1/p' <<<"$out")"
  done
done
