#!/usr/bin/env bash
# Kiln against the trainers a user could pick instead, in one sitting (docs/benchmarks.md,
# "Training speed against peers"): every contender runs once per round, in turn, so that a machine whose
# speed drifts weighs on all of them. Two models (MODELS, default "default gpt2"): the default
# experiment, and GPT-2 124M at llm.c's CPU shape (4 rows of 64 GPT-2 tokens a step, as
# train_gpt2.c hard-codes). Contenders, all on the one LibTorch: the PyTorch 2.15 wheel in .venv/
# (tools/setup.sh), whose libtorch build/kiln links:
#   kiln            build/kiln bench, fp32 and bf16 (autocast, plugins/precision_bf16.cpp)
#   pytorch-2.15    .venv/bin/python tools/bench/pytorch_reference.py: the same model, data and
#                   step in Python, eager, fp32 and bf16
#   torch.compile   the same under torch.compile (Inductor's C++ backend: needs g++), fp32 and
#                   bf16; the compilation runs in the untimed warm-up steps
#   llm.c           train_gpt2.c (fp32, GPT-2 only) built from a checkout named by LLMC=DIR, from
#                   a random checkpoint (tools/bench/llmc_checkpoint.py) and the KJV's GPT-2 shard;
#                   left out, saying so, without LLMC
# Kiln times --steps after --warmup untimed steps; the reference times as many after as many
# (its --steps counts the warm-up too, so it is given steps + warmup).
# Prints one line per measurement, "round model contender precision ms/step" (Kiln's lines add
# its MFU against the hardware peak), then nothing else on stdout; on stderr, "# " lines: the
# machine, and Kiln's CPU-products line (what runs LibTorch's products, its threads, the malloc).
# docs/benchmarks.md turns them into the table. Needs tools/setup.sh's data (data/kjv_char,
# data/kjv_gpt2) and .venv/. Run on a quiet machine.
#   ROUNDS=2 LLMC=/path/to/llm.c tools/bench/peers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-2}
models=${MODELS:-default gpt2}
python=${PYTHON:-.venv/bin/python}
default="experiments/kjv_char.toml"
gpt2="experiments/gpt2_124m.toml --set data.train=data/kjv_gpt2/train_*.bin --set data.val=
  --set train.micro_batch=4 --set train.seq_len=64 --set train.batch_tokens=256
  --set schedule.warmup=2 --set eval.every=0"
steps_default="--steps 20 --warmup 5"
steps_gpt2="--steps 4 --warmup 2"

[[ -x $python ]] || { echo "peers: no $python: run tools/setup.sh" >&2; exit 2; }
echo "# $(uname -n), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
  "commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$($python -c 'import torch; print("torch", torch.__version__)')" >&2
echo "# $(build/kiln bench "$default" --steps 1 --warmup 0 | grep -m1 '^CPU products')" >&2

llmc_dir=""
if [[ -n "${LLMC:-}" ]]; then
  llmc_dir=$(mktemp -d)
  cp -r "$LLMC/train_gpt2.c" "$LLMC/llmc" "$llmc_dir/"
  gcc -Ofast -fopenmp -DOMP -I"$llmc_dir" "$llmc_dir/train_gpt2.c" -lm -o "$llmc_dir/train_gpt2"
  $python tools/bench/llmc_checkpoint.py "$llmc_dir/gpt2_124M.bin" >/dev/null
  mkdir -p "$llmc_dir/dev/data/tinyshakespeare"
  for split in train val; do
    ln -s "$PWD/data/kjv_gpt2/train_000000.bin" \
      "$llmc_dir/dev/data/tinyshakespeare/tiny_shakespeare_$split.bin"
  done
else
  echo "# LLMC not set: llm.c left out" >&2
fi

# Kiln's ms/step, then its MFU against the hardware peak in that precision (a peer's MFU is
# Kiln's times Kiln's ms over the peer's: the same model FLOPs a token).
kiln_ms() {
  build/kiln bench $1 $2 --set precision.type=$3 |
    awk '$1 == "step" && NF == 2 { ms = $2 } $1 == "MFU" { mfu = $2 } END { print ms, mfu }'
}
reference_ms() {  # EXPERIMENT STEPS PRECISION [--compile]
  local exp=$1 precision=$3 compile=${4:-}
  local warmup steps
  warmup=$(sed 's/.*--warmup \([0-9]*\).*/\1/' <<<"$2")
  steps=$(sed 's/--steps \([0-9]*\).*/\1/' <<<"$2")
  $python tools/bench/pytorch_reference.py $exp --steps $((steps + warmup)) --warmup "$warmup" \
    --set precision.type=$precision $compile | sed -n 's/^pytorch: mean step ms \([0-9.]*\),.*/\1/p'
}
llmc_ms() {  # the median of train_gpt2's 41 timed steps
  (cd "$llmc_dir" && OMP_NUM_THREADS=$(nproc) ./train_gpt2) |
    sed -n 's/^step [0-9]*: train loss .* (took \([0-9.]*\) ms)$/\1/p' | sort -n |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

for round in $(seq "$rounds"); do
  for model in $models; do
    exp=${!model}
    steps_var=steps_$model
    steps=${!steps_var}
    for precision in fp32 bf16; do
      echo "$round $model kiln $precision $(kiln_ms "$exp" "$steps" $precision)"
      echo "$round $model pytorch-2.15 $precision $(reference_ms "$exp" "$steps" $precision)"
      echo "$round $model torch.compile $precision $(reference_ms "$exp" "$steps" $precision --compile)"
    done
    if [[ $model == gpt2 && -n "$llmc_dir" ]]; then
      echo "$round $model llm.c fp32 $(llmc_ms)"
    fi
  done
done
