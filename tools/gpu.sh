#!/usr/bin/env bash
# Kiln on a GPU machine, built against the LibTorch of the PyTorch wheel installed there (docs/gpu.md).
#   tools/gpu.sh kit       # here, on the CPU machine: .gpu-kit/ holds everything a GPU machine
#                          # without Kiln's libraries and without network needs (see make_kit)
#   tools/gpu.sh check     # there: the device check, in at most 10 minutes, from the kit alone;
#                          # its figures go to $OUT/gpu-check.md (else build-gpu/gpu-check.md)
#   tools/gpu.sh build     # cmake + ninja against torch.utils.cmake_prefix_path into build-gpu/
#   tools/gpu.sh default   # the default experiment (kjv_char) on cuda
#   tools/gpu.sh gpt2      # GPT-2 124M shapes on the KJV in GPT-2 tokens, one sitting: kiln bench
#                          # (eager, then CUDA graphs), the PyTorch reference eager and compiled
# build/default/gpt2 need python3 with a CUDA build of torch, the CUDA toolkit of the wheel's
# CUDA major version, cmake, ninja, and Kiln's other libraries: installed (tools/setup.sh), or
# unpacked from the kit (`check` does that itself). KILN_GPU_STEPS (default 20) sets the timed
# steps of the gpt2 comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${KILN_GPU_STEPS:-20}
build=build-gpu
kit=.gpu-kit
kit_limit_mib=40

die() {
  echo "gpu.sh: error: $*" >&2
  exit 2
}

# --- The kit -------------------------------------------------------------------------------------

# Kiln's build dependencies other than LibTorch, CUDA and NCCL (the wheel and the GPU image bring
# those), as Debian 12 packages, with the libraries they load in turn. Left out: the C library
# and the compiler's runtime and its C++ library headers (Boost's headers depend on them), which the
# GPU machine's compiler brings in newer versions. pkgconf too, since
# CMake's pkg_check_modules needs one and the GPU image may have none.
kit_dev_packages=(libtomlplusplus-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev
                  libpcre2-dev libcpp-httplib-dev libpq-dev libxxhash-dev libutf8proc-dev
                  libboost-dev libssl-dev uuid-dev
                  googletest libgtest-dev libgmock-dev pkgconf)
kit_left_out='^(libc6|libc6-dev|libc-dev-bin|libcrypt1|libcrypt-dev|libgcc-s1|libstdc\+\+6|gcc-12-base|libstdc\+\+-12-dev|libgcc-12-dev|libasan8|liblsan0|libtsan2|libubsan1|libitm1|libatomic1|libquadmath0|libgomp1|linux-libc-dev|libnsl2|libnsl-dev|libtirpc3|libtirpc-dev|libtirpc-common|rpcsvc-proto)$'

# Packages taken for their headers alone, without what they depend on: Gloo's, which c10d's Gloo
# process group includes (the wheel has Gloo built in but ships no headers of it); none of
# libgloo is linked, and its Redis and InfiniBand headers are not included.
kit_header_packages=(libgloo-dev)

kit_packages() {
  {
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "${kit_dev_packages[@]}" 2>/dev/null |
      grep -v '^ ' | grep -v '^<' | grep -Ev "$kit_left_out"
    printf '%s\n' "${kit_header_packages[@]}"
  } | sort -u
}

# The first `tokens` tokens of each of a token folder's shards, header kept (llm.c's format:
# a 256 x int32 header whose third word is the shard's token count, then uint16 tokens).
copy_shards_cut() {
  local from=$1 to=$2 tokens=$3
  mkdir -p "$to"
  python3 - "$from" "$to" "$tokens" <<'PY'
import glob, os, struct, sys
src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
for path in sorted(glob.glob(os.path.join(src, "*.bin"))):
    with open(path, "rb") as f:
        header = bytearray(f.read(1024))
        count = struct.unpack_from("<i", header, 8)[0]
        n = min(count, keep)
        struct.pack_into("<i", header, 8, n)
        body = f.read(2 * n)
    with open(os.path.join(dst, os.path.basename(path)), "wb") as out:
        out.write(header + body)
for other in glob.glob(os.path.join(src, "*")):
    if not other.endswith(".bin") and os.path.isfile(other):
        with open(other, "rb") as f, open(os.path.join(dst, os.path.basename(other)), "wb") as g:
            g.write(f.read())
PY
}

make_kit() {
  [[ -d data/kjv_char && -d data/kjv_gpt2 ]] ||
    die "data/kjv_char or data/kjv_gpt2 is missing: run tools/setup.sh first, which prepares them"
  [[ -s web/vendor/uPlot.iife.min.js ]] || die "web/vendor/ has no uPlot: run tools/setup.sh first"
  local fresh
  fresh=$(mktemp -d "${TMPDIR:-/tmp}/kiln-kit.XXXXXX")
  mkdir -p "$fresh/debs" "$fresh/data" "$fresh/web"
  mapfile -t packages < <(kit_packages)
  (cd "$fresh/debs" && apt-get download "${packages[@]}" >/dev/null) ||
    die "apt-get download of ${packages[*]} failed: check this machine's apt sources"
  cp -r data/kjv_char "$fresh/data/"
  # GPT-2 124M shapes take 16 x 1024 tokens a micro-step: 400k train tokens give 25 steps of
  # 16k without a wrap, and the val split is cut to the same.
  copy_shards_cut data/kjv_gpt2 "$fresh/data/kjv_gpt2" 400000
  cp -r web/vendor "$fresh/web/"
  {
    echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' with uncommitted changes')"
    echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) ($(. /etc/os-release && echo "$PRETTY_NAME"))"
    echo "debs ${#packages[@]}"
    (cd "$fresh" && find debs data web -type f | sort | xargs sha256sum)
  } >"$fresh/MANIFEST"
  # Every tracked file's SHA-256, which the check compares with the tree it runs in.
  git ls-files -z | xargs -0 sha256sum >"$fresh/SOURCES"
  local mib
  mib=$(du -sm "$fresh" | cut -f1)
  if ((mib > kit_limit_mib)); then
    rm -rf "$fresh"
    die "the kit would be ${mib} MiB, over its ${kit_limit_mib} MiB limit"
  fi
  rm -rf "$kit"
  mv "$fresh" "$kit"
  echo "gpu.sh: kit: $kit/ (${mib} MiB: ${#packages[@]} Debian packages, data/kjv_char," \
       "data/kjv_gpt2 cut to 400k tokens, web/vendor) for commit $(git rev-parse --short HEAD)"
}

# Unpacks the kit's packages into `prefix` (never over /), points their CMake and pkg-config
# files, which name /usr, at it, and writes `prefix`/bin/pkg-config: the kit's pkgconf, reading
# the kit's .pc files only, with the kit's libraries on its library path (for CMake's
# PKG_CONFIG_EXECUTABLE). No other program gets the kit on its library path: do_check gives it to kiln.
unpack_kit() {
  local prefix=$1 lib=$1/usr/lib/x86_64-linux-gnu
  mkdir -p "$prefix/bin"
  for deb in "$kit"/debs/*.deb; do dpkg-deb -x "$deb" "$prefix" 2>/dev/null || unpack_deb "$deb" "$prefix"; done
  local dirs=() dir
  for dir in "$lib/cmake" "$lib/pkgconfig" "$prefix/usr/share/pkgconfig" "$prefix/usr/share/cmake" \
             "$prefix/usr/lib/cmake"; do
    [[ -d "$dir" ]] && dirs+=("$dir")
  done
  { grep -rl '/usr' "${dirs[@]}" || true; } |
    xargs -r sed -i "s#\([\" =;]\)/usr/#\1$prefix/usr/#g; s#^prefix=/usr#prefix=$prefix/usr#"
  cat >"$prefix/bin/pkg-config" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$lib" PKG_CONFIG_LIBDIR="$lib/pkgconfig:$prefix/usr/share/pkgconfig" exec "$prefix/usr/bin/pkgconf" "\$@"
EOF
  chmod +x "$prefix/bin/pkg-config"
}


# A .deb without dpkg-deb (the GPU image may have no dpkg): an ar archive holding data.tar.*.
unpack_deb() {
  local deb=$1 prefix=$2 work
  work=$(mktemp -d)
  (cd "$work" && ar x "$(realpath "$1")" && tar -xf data.tar.* -C "$prefix")
  rm -rf "$work"
}

# --- Building and running against the wheel ------------------------------------------------------

need_torch() {
  python3 -c 'import torch' 2>/dev/null || die "python3 has no torch: install a CUDA PyTorch wheel"
  python3 -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' ||
    die "python3's torch $(python3 -c 'import torch; print(torch.__version__)') is built without CUDA: install a CUDA wheel"
}

need_gpu() {
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    die "no GPU visible: torch.cuda.is_available() is false (nvidia-smi: $(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | head -1 || echo 'not on PATH'))"
}

# The wheel's CUDA major against nvcc's: Kiln's CUDA code is compiled by nvcc's headers.
need_matching_nvcc() {
  local wheel nvcc_version
  wheel=$(python3 -c 'import torch; print(torch.version.cuda)')
  command -v nvcc >/dev/null || die "no nvcc on PATH: install the CUDA ${wheel%%.*} toolkit"
  nvcc_version=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  [[ "${wheel%%.*}" == "${nvcc_version%%.*}" ]] ||
    die "the wheel's torch is built for CUDA $wheel but nvcc is $nvcc_version: install the CUDA ${wheel%%.*} toolkit or a wheel for CUDA ${nvcc_version%%.*}"
}

# cmake's configure line against the wheel's LibTorch, and the kit at `kit_prefix` when given.
configure_command() {
  local kit_prefix=${1:-} torch_prefix
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  local args=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON
              -DKILN_BUILD_TESTS=ON)
  if [[ -n "$kit_prefix" ]]; then
    # The multiarch include folder (OpenSSL's configuration.h, which cpp-httplib reaches) is on
    # no package's include path: compilers search /usr's copy by default, the kit's by this.
    args+=("-DCMAKE_PREFIX_PATH=$torch_prefix;$kit_prefix/usr;$kit_prefix/usr/lib/x86_64-linux-gnu/cmake"
           "-DPKG_CONFIG_EXECUTABLE=$kit_prefix/bin/pkg-config"
           "-DCMAKE_CXX_FLAGS=-isystem $kit_prefix/usr/include/x86_64-linux-gnu")
  else
    args+=("-DCMAKE_PREFIX_PATH=$torch_prefix")
  fi
  printf '%s\n' "${args[@]}"
}

do_build() {
  need_torch
  mapfile -t configure < <(configure_command)
  "${configure[@]}"
  cmake --build "$build" -j "$(nproc)"
}

# The figures to keep: the GPU, the wheel, the commit.
describe_machine() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  echo "kiln commit $(git rev-parse --short HEAD 2>/dev/null || sed -n 's/^commit //p' "$kit/MANIFEST")"
}

do_default() {
  "$build/kiln" run experiments/kjv_char.toml --set run.device=cuda --name "gpu-default-$(date +%s)" "$@"
}

gpt2_shapes=(--set data.train='data/kjv_gpt2/train_*.bin' --set data.val='data/kjv_gpt2/val_*.bin'
             --set train.batch_tokens=0 --set train.micro_batch=16 --set precision.type=bf16
             --set optimizer.fused=true --set run.device=cuda)

do_gpt2() {
  describe_machine
  echo "== kiln bench, eager"
  "$build/kiln" bench experiments/gpt2_124m.toml "${gpt2_shapes[@]}" --steps "$steps" --warmup 5
  echo "== kiln bench, CUDA graphs"
  "$build/kiln" bench experiments/gpt2_124m.toml "${gpt2_shapes[@]}" --set train.cuda_graphs=true \
    --steps "$steps" --warmup 5
  echo "== PyTorch eager"
  python3 tools/bench/pytorch_reference.py experiments/gpt2_124m.toml "${gpt2_shapes[@]}" \
    --steps $((steps + 5)) --warmup 5
  echo "== PyTorch torch.compile"
  python3 tools/bench/pytorch_reference.py experiments/gpt2_124m.toml "${gpt2_shapes[@]}" \
    --steps $((steps + 5)) --warmup 5 --compile
}

# --- The device check ----------------------------------------------------------------------------

# Seconds left of the check's budget (KILN_GPU_CHECK_S, default 570: the device tool's command
# limit is 600), and each step's share: at most its own cap, never past the budget.
check_start=$SECONDS
budget=${KILN_GPU_CHECK_S:-570}
left() { echo $((budget - (SECONDS - check_start))); }
share() { local cap=$1 l; l=$(left); echo $((l < cap ? l : cap)); }

# Appends to the report: a heading, then a command's output (its last `lines` lines) in a block.
report=""
section() { printf '\n## %s\n\n' "$1" >>"$report"; echo "== $1"; }
note() { printf '%s\n' "$*" >>"$report"; echo "$*"; }
# Runs "$@" for at most `seconds`, its output to the console and its tail into the report.
step() {
  local seconds=$1 lines=$2 log rc=0
  shift 2
  log=$(mktemp)
  if ((seconds < 5)); then
    note "skipped: the check's ${budget} s were spent"
    return 1
  fi
  timeout --kill-after=10 "$seconds" "$@" >"$log" 2>&1 || rc=$?
  cat "$log"
  { echo '```'; tail -n "$lines" "$log"; echo '```'; } >>"$report"
  ((rc == 124 || rc == 137)) && note "stopped after ${seconds} s (the check's budget)"
  ((rc == 0)) || note "exit status $rc"
  rm -f "$log"
  return $rc
}

# The kit is made from this exact source tree: every tracked file's SHA-256 is in SOURCES.
need_kit() {
  [[ -f "$kit/MANIFEST" && -f "$kit/SOURCES" ]] ||
    die "no kit: $kit/MANIFEST is missing: run 'tools/gpu.sh kit' on the CPU machine and carry $kit"
  local changed
  changed=$(sha256sum --check --quiet "$kit/SOURCES" 2>/dev/null | sed 's/: .*//' | head -3 |
    tr '\n' ' ' || true)
  [[ -z "$changed" ]] ||
    die "the kit was made for commit $(sed -n 's/^commit //p' "$kit/MANIFEST"), and these files differ from it: ${changed}... : run 'tools/gpu.sh kit' again on the CPU machine"
}

# The GPU's dense bf16 peak in TFLOP/s, from NVIDIA's data sheets (without sparsity): H100 and
# H200 SXM 989.4, H100 PCIe 756.5, H100 NVL 835.5, A100 312. Empty for a GPU not listed.
bf16_peak_tflops() {
  case "$1" in
    *H100*PCIe*) echo 756.5 ;;
    *H100*NVL*) echo 835.5 ;;
    *H100* | *H200* | *GH200*) echo 989.4 ;;
    *A100*) echo 312 ;;
    *) echo "" ;;
  esac
}

do_check() {
  need_kit
  need_torch
  need_matching_nvcc
  need_gpu
  local out_dir=${OUT:-$build} prefix gpu peak
  mkdir -p "$out_dir"
  report="$out_dir/gpu-check.md"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  peak=$(bf16_peak_tflops "$gpu")
  {
    echo "# Kiln device check"
    echo
    echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
    echo "- wheel: $(python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())')"
    echo "- nvcc: $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), CPU: $(nproc) cores"
    echo "- kit: $(sed -n 's/^commit //p' "$kit/MANIFEST") ($(sed -n 's/^made //p' "$kit/MANIFEST"))"
  } >"$report"
  cat "$report"

  # 1. The kit into a private prefix, its data and page assets into place.
  prefix=$(mktemp -d "${TMPDIR:-/tmp}/kiln-kit-prefix.XXXXXX")
  unpack_kit "$prefix"
  mkdir -p data web
  cp -r "$kit"/data/* data/
  cp -r "$kit/web/vendor" web/
  # kiln and its tests load the kit's libraries; python3 and the build tools do not.
  local kit_env=(env "LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

  # 2. The build, all cores, timed.
  section "Build (-DKILN_CUDA=ON against the wheel, $(nproc) cores)"
  local started=$SECONDS
  mapfile -t configure < <(configure_command "$prefix")
  step "$(share 60)" 15 "${configure[@]}" || return 1
  step "$(share 330)" 10 cmake --build "$build" -j "$(nproc)" || return 1
  note "build: $((SECONDS - started)) s"

  # 3. The tests that can use a GPU, with the GPU present: the unit tests (device resolution,
  # the CUDA guard, kernels on cuda where they run there).
  section "Unit tests"
  step "$(share 90)" 15 "${kit_env[@]}" ctest --test-dir "$build" -L unit -j "$(nproc)" --output-on-failure || true

  # 4. The default experiment on cuda; its first 100 steps on the CPU beside it, same seed.
  section "Default experiment on cuda (kjv_char, 400 steps), and its first 100 on the CPU"
  step "$(share 120)" 12 "${kit_env[@]}" "$build/kiln" run experiments/kjv_char.toml \
    --set run.device=cuda --set checkpoint.every=0 --name "gpu-default-$(date +%s)" || true
  step "$(share 60)" 4 "${kit_env[@]}" "$build/kiln" run experiments/kjv_char.toml --set run.device=cpu \
    --set train.steps=100 --set checkpoint.every=0 --set eval.every=0 --name cpu-100 || true
  note "loss at step 100, cuda vs cpu (runs/kiln.db):"
  step 30 4 python3 - <<'PY' || true
import sqlite3
db = sqlite3.connect("runs/kiln.db")
rows = db.execute("select r.name, m.loss from metrics m join runs r on r.id = m.run_id "
                  "where m.step = 100 and (r.name like 'gpu-default-%' or r.name = 'cpu-100')").fetchall()
for name, loss in rows: print(f"{name}: {loss:.4f}")
PY

  # 5-7. GPT-2 124M shapes in bf16: kiln eager, kiln with CUDA graphs, PyTorch eager and compiled.
  local bench_log
  bench_log=$(mktemp)
  section "GPT-2 124M shapes, bf16, micro-batch 16 x 1024: kiln bench eager"
  step "$(share 90)" 30 "${kit_env[@]}" "$build/kiln" bench experiments/gpt2_124m.toml "${gpt2_shapes[@]}" \
    --steps "$steps" --warmup 5 | tee -a "$bench_log" || true
  section "kiln bench with train.cuda_graphs"
  step "$(share 90)" 30 "${kit_env[@]}" "$build/kiln" bench experiments/gpt2_124m.toml "${gpt2_shapes[@]}" \
    --set train.cuda_graphs=true --steps "$steps" --warmup 5 | tee -a "$bench_log" || true
  section "PyTorch reference, eager"
  step "$(share 60)" 3 python3 tools/bench/pytorch_reference.py experiments/gpt2_124m.toml \
    "${gpt2_shapes[@]}" --steps $((steps + 5)) --warmup 5 || true
  section "PyTorch reference, torch.compile"
  step "$(share 150)" 3 python3 tools/bench/pytorch_reference.py experiments/gpt2_124m.toml \
    "${gpt2_shapes[@]}" --steps $((steps + 5)) --warmup 5 --compile || true
  section "MFU against the $gpu's dense bf16 peak (${peak:-unknown} TFLOP/s)"
  # kiln bench's "model FLOPs ... -> Y GFLOP/s achieved" line (core/app/speed/measure.cpp), one per run:
  # eager first, then CUDA graphs.
  grep -E "GFLOP/s achieved|^tokens/s|^step " "$bench_log" | while read -r line; do note "    $line"; done
  if [[ -n "$peak" ]]; then
    sed -n 's/.*-> \([0-9.]*\) GFLOP\/s achieved.*/\1/p' "$bench_log" | awk -v peak="$peak" \
      '{ printf "MFU %.1f%% (%.1f TFLOP/s of %s dense bf16)\n", 100 * $1 / 1000 / peak, $1 / 1000, peak }' |
      while read -r line; do note "$line"; done
  fi
  rm -f "$bench_log"

  # 8. NCCL, a world of one.
  section "NCCL, a world of one rank (kiln launch, parallel.backend = nccl)"
  step "$(share 60)" 8 "${kit_env[@]}" "$build/kiln" launch --nproc-per-node 1 -- run experiments/kjv_char.toml \
    --set run.device=cuda --set parallel.type=ddp --set parallel.backend=nccl \
    --set train.steps=20 --set eval.every=0 --set checkpoint.every=0 --name nccl-1 || true

  # 9. What time is left: the single-process end-to-end tests, on the GPU (run.device = auto).
  section "End-to-end tests on the GPU (single-process ones, in the time left)"
  step "$(($(left) - 5))" 30 "${kit_env[@]}" ctest --test-dir "$build" -L e2e -j 4 -E \
    'Distributed|DistributedState|Fsdp|TensorParallel|Fp16IsRefused|TwoPipeline|TwoDdp|HostileInput' \
    --output-on-failure || true
  note ""
  note "check: $((SECONDS - check_start)) s in all; report: $report"
}

case "${1:-}" in
  kit) make_kit ;;
  check) do_check ;;
  build) do_build ;;
  default) do_default ;;
  gpt2) do_gpt2 ;;
  all) do_build && do_default && do_gpt2 ;;
  # The kit's CI proof (tools/gpu_kit_test.sh) unpacks it as the check does.
  unpack-kit) unpack_kit "${2:?usage: tools/gpu.sh unpack-kit PREFIX}" ;;
  *) echo "usage: tools/gpu.sh kit|check|build|default|gpt2|all" >&2; exit 2 ;;
esac
