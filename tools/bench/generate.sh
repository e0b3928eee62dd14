#!/usr/bin/env bash
# Greedy generation, Kiln against transformers' generate() on the same weights and the same
# prompts, in one sitting with the same threads: GPT-2 124M's shapes (experiments/gpt2_124m.toml)
# and the llama experiment (experiments/llama_kjv.toml), each trained 1 step on data/kjv_gpt2 and
# exported; 16 prompts of the KJV's held-out verses, NEW tokens each (default 64), at batch 1
# (one prompt at a time) and batch 16.
#   Kiln: kiln eval --task (a generate task of those prompts, a stop string that never comes),
#     key/value cache; tokens/s = generated tokens / the scoring's seconds.
#   transformers (.venv/'s, tools/requirements/tests.txt's pin, on the PyTorch 2.15 wheel whose
#     LibTorch Kiln is built on; tools/interop.sh runs it): generate(do_sample=False,
#     min_new_tokens = max_new_tokens = NEW) with its cache, on the prompts' token ids as Kiln read
#     them (left-padded at batch 16, with their attention mask).
# Prints one line per contender, model and batch: "CONTENDER MODEL batch B: N tokens in S s:
# R tokens/s", N the tokens generated (16 prompts x NEW), S the generation's wall time (Kiln's
# scoring time, the snapshot's loading left out; transformers' generate calls).
# Target: Kiln >= 1.5x transformers' tokens/s. Only comparable within one sitting on a quiet
# machine: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
new=${NEW:-64}
threads=${THREADS:-$(nproc)}
scratch=$(mktemp -d /tmp/kiln-bench-generate.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
echo "== $(uname -n), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
  "$threads threads, commit $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
# The prompts: 16 verses of the test split, the last 16 of data/kjv.txt less their last word.
tail -n 16 data/kjv.txt | python3 -c '
import json, sys
for line in sys.stdin:
    words = line.split()
    print(json.dumps({"prompt": " ".join(words[:-1]), "answer": words[-1]}))' >"$scratch/prompts.jsonl"
cat >"$scratch/generate.toml" <<TOML
name = "generate"
kind = "generate"
items = "prompts.jsonl"
max_gen_toks = $new
until = ["\u0001never\u0001"]
TOML
for experiment in gpt2_124m llama_kjv; do
  build/kiln run "experiments/$experiment.toml" --name "$experiment" --set train.steps=1 --set schedule.type=constant --set schedule.warmup=0 \
    --set train.micro_batch=1 --set train.seq_len=64 --set train.batch_tokens=64 \
    --set 'data.train=data/kjv_gpt2/train_*.bin' --set 'data.val=data/kjv_gpt2/val_*.bin' \
    --set eval.every=0 --set checkpoint.every=1 --set run.threads="$threads" \
    --set run.db="$scratch/kiln.db" --set run.out_dir="$scratch/runs" >/dev/null
  build/kiln export "$experiment" -o "$scratch/$experiment" --db "$scratch/kiln.db" 2>/dev/null
  for batch in 1 16; do
    out=$(build/kiln eval "$experiment" --db "$scratch/kiln.db" --task "$scratch/generate.toml" \
      --batch "$batch" --details "$scratch/$experiment.$batch.jsonl" 2>&1)
    seconds=$(sed -n 's/.*scored [0-9]* items in \([0-9.]*\) s.*/\1/p' <<<"$out")
    generated=$(python3 -c '
import json, sys
print(sum(len(json.loads(l)["generated"]) for l in open(sys.argv[1])))' "$scratch/$experiment.$batch.jsonl")
    echo "kiln         $experiment batch $batch: $generated tokens in $seconds s:" \
      "$(awk -v n="$generated" -v s="$seconds" 'BEGIN { printf "%.1f", n / s }') tokens/s"
  done
done
cat >"$scratch/hf_generate.py" <<'PY'
import json, sys, time
import torch
import transformers
from transformers import AutoModelForCausalLM
scratch, new, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
print(f"# transformers {transformers.__version__}, torch {torch.__version__}, "
      f"{torch.get_num_threads()} threads")
for experiment in ("gpt2_124m", "llama_kjv"):
    model = AutoModelForCausalLM.from_pretrained(f"{scratch}/{experiment}", dtype=torch.float32)
    model.eval()
    prompts = [json.loads(l)["context"] for l in open(f"{scratch}/{experiment}.1.jsonl")]
    for batch in (1, 16):
        start, generated = time.perf_counter(), 0
        for first in range(0, len(prompts), batch):
            rows = prompts[first:first + batch]
            width = max(len(r) for r in rows)
            ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
            mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
            with torch.no_grad():
                out = model.generate(ids, attention_mask=mask, max_new_tokens=new,
                                     min_new_tokens=new, do_sample=False, pad_token_id=0)
            generated += (out.shape[1] - width) * len(rows)
        seconds = time.perf_counter() - start
        print(f"transformers {experiment} batch {batch}: {generated} tokens in {seconds:.2f} s: "
              f"{generated / seconds:.1f} tokens/s")
PY
tools/interop.sh python3 "$scratch/hf_generate.py" "$scratch" "$new" "$threads"
