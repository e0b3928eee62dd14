#!/usr/bin/env bash
# Packed rows against padded ones (data.pack): for the fine-tuning example's records
# and for a chat-shaped synthetic set (2,000 records whose prompt and response lengths are
# log-normal, as chat data's are; seeded, written to a scratch folder), STEPS steps of each way,
# then per way:
#   fill      the share of the rows' input places that hold a record's token (the run's header)
#   ms/step   the median step time from the run store, the better of two runs
#   epoch s   the time to train on every record once: rows / rows per step x ms/step
#   counted/s targets the loss counts per second of training: the work that is not padding
# Only comparable within one sitting on a quiet machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${STEPS:-30}
scratch=$(mktemp -d /tmp/kiln-bench-packing.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
echo "== $(uname -n), $(nproc) cores, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$scratch/chat.jsonl" <<'PY'
import json, random, re, sys
words = re.findall(r"[a-z]+", open("data/kjv.txt").read().lower())
rng = random.Random(36)
def text(median):
    n = max(1, min(int(rng.lognormvariate(0, 0.8) * median), 3 * median))
    start = rng.randrange(len(words) - n)
    return " ".join(words[start:start + n])
with open(sys.argv[1], "w") as out:
    for _ in range(2000):
        out.write(json.dumps({"prompt": text(6), "response": text(12)}) + "\n")
PY

# median_ms RUN: the run's median step time, its first step (warm-up) left out
median_ms() {
  sqlite3 "$scratch/kiln.db" "select dt_ms from metrics m join runs r on r.id = m.run_id
    where r.name = '$1' and m.step > 1 order by dt_ms limit 1 offset ($steps - 1) / 2"
}

# measure NAME RECORDS SEQ_LEN PACK: two runs (this VM's speed drifts for seconds at a time), the
# faster median kept
measure() {
  local out
  for attempt in a b; do
    out=$(build/kiln run experiments/sft_example.toml --name "$1_$attempt" \
      --set data.train="$2" --set data.pack="$4" --set data.on_long_record=split \
      --set train.seq_len="$3" --set train.batch_tokens=$((16 * $3)) --set model.block_size=384 \
      --set train.steps="$steps" --set schedule.warmup=1 --set eval.every=0 \
      --set eval.final_test=false --set checkpoint.every=0 \
      --set run.db="$scratch/kiln.db" --set run.out_dir="$scratch/runs" 2>&1)
  done
  local data_line rows fill ms counted
  data_line=$(grep '^data:' <<<"$out")
  rows=$(sed -n 's/.* \([0-9]*\) rows of .*/\1/p' <<<"$data_line")
  fill=$(sed -n 's/.*, \([0-9.]*\)% of their places tokens.*/\1/p' <<<"$data_line")
  counted=$(sed -n 's/.*tokens, \([0-9]*\) of them counted.*/\1/p' <<<"$data_line")
  ms=$(printf '%s\n%s\n' "$(median_ms "$1_a")" "$(median_ms "$1_b")" | sort -g | head -1)
  awk -v n="$1" -v rows="$rows" -v fill="$fill" -v ms="$ms" -v counted="$counted" -v seq="$3" \
    'BEGIN { epoch = rows / 16 * ms / 1000;
             printf "%-16s seq_len %3d | %4d rows | fill %5.1f%% | %6.1f ms/step | epoch %6.2f s | %6.0f counted/s\n",
                    n, seq, rows, fill, ms, epoch, counted / epoch }'
}

measure example_padded experiments/data/kjv_sft_train.jsonl 192 false
measure example_packed experiments/data/kjv_sft_train.jsonl 192 true
measure example_pack384 experiments/data/kjv_sft_train.jsonl 384 true
measure chat_padded "$scratch/chat.jsonl" 384 false
measure chat_packed "$scratch/chat.jsonl" 384 true
