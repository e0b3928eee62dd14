#!/usr/bin/env bash
# `tools/gpu.sh check`'s refusals, each one line on stderr and exit 2, before anything is built:
# no kit, a kit made for other sources, a wheel without CUDA, a wheel whose CUDA major differs
# from nvcc's, and no GPU visible. The wheel and nvcc are stand-ins written here (a `torch`
# module on PYTHONPATH, an `nvcc` on PATH) that report what each case needs; the real ones are
# on the GPU machine only. Runs on a copy of the source tree, so the checkout is never touched.
set -uo pipefail
export PYTHONDONTWRITEBYTECODE=1  # each case rewrites the stand-in torch module
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

# A copy of the tracked tree and a kit that matches it (MANIFEST and SOURCES only: every refusal
# comes before the kit's packages are used).
tree=$scratch/tree
mkdir -p "$tree"
git -C "$source_dir" rev-parse --git-dir >/dev/null 2>&1 ||
  { echo "SKIP: not a git checkout: the kit is made from tracked files"; exit 0; }
(cd "$source_dir" && git ls-files -z | xargs -0 cp --parents -t "$tree/") ||
  { echo "FAIL: could not copy the tracked tree into $tree"; exit 1; }
mkdir -p "$tree/.gpu-kit"
(cd "$tree" && find . -path ./.gpu-kit -prune -o -type f -print0 | sed -z 's#^\./##' |
  xargs -0 sha256sum >.gpu-kit/SOURCES)
printf 'commit 0000000\nmade now on here\n' >"$tree/.gpu-kit/MANIFEST"

# fake_wheel CUDA AVAILABLE: a torch module reporting that CUDA version ("" = CPU-only) and
# whether a GPU is visible; fake_nvcc RELEASE: an nvcc of that release.
fake_wheel() {
  local cuda=None
  [[ -n "$1" ]] && cuda="\"$1\""
  mkdir -p "$scratch/py/torch"
  cat >"$scratch/py/torch/__init__.py" <<PY
__version__ = "2.11.0+fake"
class version:
    cuda = $cuda
class cuda:
    @staticmethod
    def is_available():
        return $2
class utils:
    cmake_prefix_path = "/nowhere"
PY
}
fake_nvcc() {
  mkdir -p "$scratch/bin"
  printf '#!/bin/sh\necho "Cuda compilation tools, release %s, V%s.0"\n' "$1" "$1" >"$scratch/bin/nvcc"
  chmod +x "$scratch/bin/nvcc"
}

expect_refusal() {  # NAME TEXT: the check exits 2 with one stderr line containing TEXT
  local name=$1 text=$2 out err code
  out=$(cd "$tree" && PYTHONPATH="$scratch/py" PATH="$scratch/bin:$PATH" tools/gpu.sh check 2>"$scratch/err")
  code=$?
  err=$(cat "$scratch/err")
  if [[ $code -ne 2 || $(printf '%s\n' "$err" | wc -l) -ne 1 || "$err" != *"$text"* ]]; then
    echo "FAIL $name: exit $code, stderr: $err, stdout: $out"
    failures=$((failures + 1))
  else
    echo "ok $name: $err"
  fi
}

command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
fake_wheel 13.0 True
fake_nvcc 13.0
mv "$tree/.gpu-kit" "$scratch/kit"
expect_refusal no-kit "no kit: .gpu-kit/MANIFEST is missing"
mv "$scratch/kit" "$tree/.gpu-kit"
echo "// changed" >>"$tree/README.md"
expect_refusal other-sources "the kit was made for commit 0000000, and these files differ from it: README.md"
(cd "$tree" && sha256sum README.md) >"$scratch/readme.sum"
(cd "$tree" && grep -v ' README.md$' .gpu-kit/SOURCES; cat "$scratch/readme.sum") >"$scratch/sources"
mv "$scratch/sources" "$tree/.gpu-kit/SOURCES"
fake_wheel "" True
expect_refusal cpu-wheel "is built without CUDA"
fake_wheel 13.0 True
fake_nvcc 12.4
expect_refusal cuda-major "the wheel's torch is built for CUDA 13.0 but nvcc is 12.4"
fake_nvcc 13.0
fake_wheel 13.0 False
expect_refusal no-gpu "no GPU visible"
if ((failures)); then
  echo "gpu.sh check refusals: $failures failed"
  exit 1
fi
echo "gpu.sh check refusals: all 5 passed"
