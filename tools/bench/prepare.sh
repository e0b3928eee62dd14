#!/usr/bin/env bash
# kiln prepare at scale: the King James Bible repeated to SIZE_MB (default 1024) and
# to a quarter of that, through the GPT-2 tokenizer; per run the wall time, MB/s and peak
# resident memory (/usr/bin/time's maximum RSS):
#   kiln, 1 thread           --threads 1 on the whole corpus (the single-threaded path)
#   kiln, every core         --threads 0 on the whole corpus, and on the quarter (memory must
#                            not grow with the input)
#   python tokenizers        tools/bench/prepare_reference.py in .venv/ (tools/interop.sh: Hugging
#                            Face's Rust tokenizer, encode_batch on every core), and a check that
#                            its ids are Kiln's, token for token (SKIP without .venv/'s test
#                            libraries: tools/setup.sh --tests)
# Only comparable within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
size_mb=${SIZE_MB:-1024}
[[ -s data/kjv.txt && -s data/gpt2/encoder.json ]] || { echo "bench: run tools/setup.sh first" >&2; exit 2; }
scratch=$(mktemp -d /tmp/kiln-bench-prepare.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 "model name" /proc/cpuinfo

# corpus MB PATH: data/kjv.txt repeated until the file holds at least MB megabytes
corpus() {
  local kjv copies
  kjv=$(stat -c %s data/kjv.txt)
  copies=$(( ($1 * 1000000 + kjv - 1) / kjv ))
  for _ in $(seq "$copies"); do cat data/kjv.txt; done > "$2"
}
corpus "$size_mb" "$scratch/whole.txt"
corpus $(( size_mb / 4 )) "$scratch/quarter.txt"

# run LABEL TEXT THREADS: one kiln prepare, timed
run() {
  local bytes
  bytes=$(stat -c %s "$2")
  rm -rf "$scratch/out"
  /usr/bin/time -f "%e %M" -o "$scratch/time" build/kiln prepare "$2" --tokenizer gpt2 \
    --val-fraction 0.01 --out "$scratch/out" --threads "$3" > "$scratch/log"
  read -r seconds peak_kb < "$scratch/time"
  awk -v label="$1" -v bytes="$bytes" -v s="$seconds" -v kb="$peak_kb" 'BEGIN {
    printf "%-26s %8.1f MB in %6.1f s: %6.1f MB/s, peak RSS %5d MB\n", label, bytes / 1e6, s,
           bytes / s / 1e6, kb / 1024 }'
}
run "kiln, 1 thread" "$scratch/whole.txt" 1
run "kiln, quarter, $(nproc) threads" "$scratch/quarter.txt" 0
run "kiln, $(nproc) threads" "$scratch/whole.txt" 0

if ! tools/interop.sh python3 -c "import tokenizers, numpy" >/dev/null 2>&1; then
  echo "python tokenizers: SKIP (.venv/ has no tokenizers: tools/setup.sh --tests)"
  exit 0
fi
tools/interop.sh python3 tools/bench/prepare_reference.py "$scratch/whole.txt" "$scratch/py.bin"
# Kiln's tokens: the train and val shards' ids after their 1024-byte headers, in order.
for shard in "$scratch"/out/train_*.bin "$scratch"/out/val_*.bin; do tail -c +1025 "$shard"; done > "$scratch/kiln.bin"
if cmp -s "$scratch/kiln.bin" "$scratch/py.bin"; then
  echo "ids: Kiln's equal the python tokenizer's, $(( $(stat -c %s "$scratch/py.bin") / 2 )) tokens"
else
  echo "ids: Kiln's DIFFER from the python tokenizer's: $(cmp "$scratch/kiln.bin" "$scratch/py.bin" | head -1)"
fi
