#!/usr/bin/env bash
# Kiln against the trainers a user could pick instead, in one sitting (docs/benchmarks.md,
# "Kiln and its peers"): every contender runs once per round, in turn, so that a machine whose
# speed drifts weighs on all of them. Two models: the default experiment, and GPT-2 124M at
# llm.c's CPU shape (4 rows of 64 GPT-2 tokens a step, as train_gpt2.c hard-codes). Contenders:
#   kiln          build/kiln bench (LibTorch 1.13), fp32, bf16 and bf32
#   kiln-2.14     build-torch2-sid/kiln bench in the sid chroot (LibTorch 2.14), fp32 and bf16;
#                 built by tools/torch2.sh --sid --run true, left out, saying so, without it
#   pytorch-1.13  Debian 12's python3-torch running tools/bench/pytorch_reference.py (the same
#                 model, data and step in Python on the same LibTorch), fp32 and bf16
#   pytorch-2.14  Debian sid's python3-torch in tools/torch2.sh --sid's chroot, eager and under
#                 torch.compile (Inductor's C++ backend), fp32 and bf16; the chroot needs
#                 python3-torch python3-numpy python3-dev g++ libopenblas0-openmp, chosen as
#                 libblas.so.3, liblapack.so.3 and libopenblas.so.0 (update-alternatives --set):
#                 without an OpenBLAS Debian's torch runs on netlib's reference BLAS, and with
#                 libopenblas0-pthread's its threads and OpenMP's fight over the cores (the
#                 default experiment took 857-910 ms a step against 104 on 2 cores)
#   llm.c         train_gpt2.c (fp32, GPT-2 only) built from a checkout named by LLMC=DIR, from
#                 a random checkpoint (tools/bench/llmc_checkpoint.py) and the KJV's GPT-2 shard;
#                 left out, saying so, without LLMC
# Prints one line per measurement, "round model contender precision ms/step" (Kiln's lines add
# its MFU), then nothing else:
# docs/benchmarks.md turns them into the table. Needs root (the chroot's mounts) and
# tools/setup.sh's data (data/kjv_char, data/kjv_gpt2). Run on a quiet machine.
#   ROUNDS=2 LLMC=/path/to/llm.c tools/bench/peers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-2}
sid=${KILN_SID_ROOT:-/var/cache/kiln/sid}
default="experiments/kjv_char.toml"
gpt2="experiments/gpt2_124m.toml --set data.train=data/kjv_gpt2/train_*.bin --set data.val=
  --set train.micro_batch=4 --set train.seq_len=64 --set train.batch_tokens=256
  --set schedule.warmup=2 --set eval.every=0"
steps_default="--steps 20 --warmup 5"
steps_gpt2="--steps 4 --warmup 2"

# OpenBLAS picks its kernels by CPU model, and where a hypervisor hides the model it falls back to
# 2004's Prescott kernels (docs/speed.md); Kiln sets OPENBLAS_CORETYPE for itself, so the
# PyTorch contenders get the same kernels here: the kernel set Kiln's BLAS line names.
coretype=$(build/kiln bench "$default" --steps 1 --warmup 0 |
  sed -n 's/^BLAS: OpenBLAS [^ ]* (kernels \([A-Za-z0-9]*\).*/\1/p')
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$coretype}
echo "# OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE for every contender" >&2

mounted=()
cleanup() { for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
if [[ -x "$sid/usr/bin/python3" ]]; then
  mkdir -p "$sid/kiln" "$sid/proc" "$sid/dev"
  for m in "$PWD:$sid/kiln" "/proc:$sid/proc" "/dev:$sid/dev"; do
    mount --bind "${m%%:*}" "${m#*:}" && mounted=("${m#*:}" "${mounted[@]}")
  done
else
  echo "# no sid chroot at $sid (tools/torch2.sh --sid --prepare): pytorch-2.14 left out" >&2
fi

llmc_dir=""
if [[ -n "${LLMC:-}" ]]; then
  llmc_dir=$(mktemp -d)
  cp -r "$LLMC/train_gpt2.c" "$LLMC/llmc" "$llmc_dir/"
  gcc -Ofast -fopenmp -DOMP -I"$llmc_dir" "$llmc_dir/train_gpt2.c" -lm -o "$llmc_dir/train_gpt2"
  /usr/bin/python3 tools/bench/llmc_checkpoint.py "$llmc_dir/gpt2_124M.bin" >/dev/null
  mkdir -p "$llmc_dir/dev/data/tinyshakespeare"
  for split in train val; do
    ln -s "$PWD/data/kjv_gpt2/train_000000.bin" \
      "$llmc_dir/dev/data/tinyshakespeare/tiny_shakespeare_$split.bin"
  done
else
  echo "# LLMC not set: llm.c left out" >&2
fi

# Kiln's ms/step, then its MFU against the hardware peak in that precision (a peer's MFU is
# Kiln's times Kiln's ms over the peer's: the same model FLOPs a token), then the oneDNN kernels
# its linear layers ran, as oneDNN names them ("matmul bf16 brg:avx512_core_amx_bf16; ...").
kiln_ms() {
  ${KILN:-build/kiln} bench $1 $2 --set precision.type=$3 |
    awk '$1 == "step" && NF == 2 { ms = $2 } $1 == "MFU" { mfu = $2 }
         $1 == "linear" && $2 == "GEMMs" { $1 = ""; $2 = ""; kernels = $0 }
         END { print ms, mfu, kernels }'
}
reference_ms() {  # PYTHON EXPERIMENT STEPS PRECISION [--compile]
  local python=$1 exp=$2 precision=$4 compile=${5:-}
  local warmup steps
  warmup=$(sed 's/.*--warmup \([0-9]*\).*/\1/' <<<"$3")
  steps=$(sed 's/--steps \([0-9]*\).*/\1/' <<<"$3")
  $python tools/bench/pytorch_reference.py $exp --steps $((steps + warmup)) --warmup "$warmup" \
    --set precision.type=$precision $compile | sed -n 's/^pytorch: mean step ms \([0-9.]*\),.*/\1/p'
}
sid_ms() { chroot "$sid" bash -c "cd /kiln && $(declare -f reference_ms); reference_ms python3 $(printf '%q ' "$@")"; }
sid_kiln_ms() {
  chroot "$sid" bash -c "cd /kiln && $(declare -f kiln_ms); KILN=build-torch2-sid/kiln kiln_ms $(printf '%q ' "$@")"
}
sid_kiln=false
if [[ ${#mounted[@]} -gt 0 && -x build-torch2-sid/kiln ]]; then
  sid_kiln=true
else
  echo "# no build-torch2-sid/kiln (tools/torch2.sh --sid --run true): kiln-2.14 left out" >&2
fi
llmc_ms() {  # the median of train_gpt2's 41 timed steps
  (cd "$llmc_dir" && OMP_NUM_THREADS=$(nproc) ./train_gpt2) |
    sed -n 's/^step [0-9]*: train loss .* (took \([0-9.]*\) ms)$/\1/p' | sort -n |
    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

for round in $(seq "$rounds"); do
  for model in default gpt2; do
    exp=${!model}
    steps_var=steps_$model
    steps=${!steps_var}
    for precision in fp32 bf16; do
      echo "$round $model kiln $precision $(kiln_ms "$exp" "$steps" $precision)"
      echo "$round $model pytorch-1.13 $precision $(reference_ms /usr/bin/python3 "$exp" "$steps" $precision)"
      if $sid_kiln; then
        echo "$round $model kiln-2.14 $precision $(sid_kiln_ms "$exp" "$steps" $precision)"
      fi
      if [[ ${#mounted[@]} -gt 0 ]]; then
        echo "$round $model pytorch-2.14 $precision $(sid_ms "$exp" "$steps" $precision)"
        echo "$round $model torch.compile-2.14 $precision $(sid_ms "$exp" "$steps" $precision --compile)"
      fi
    done
    # bf32: fp32 with oneDNN's bf16 fpmath in the linear layers (AMX only; fp32 elsewhere).
    echo "$round $model kiln bf32 $(kiln_ms "$exp" "$steps" bf32)"
    if [[ $model == gpt2 && -n "$llmc_dir" ]]; then
      echo "$round $model llm.c fp32 $(llmc_ms)"
    fi
  done
done
