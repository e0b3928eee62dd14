#!/usr/bin/env bash
# The real libraries a user opens Kiln's files with, run against files kiln wrote: transformers,
# tokenizers and safetensors, PEFT, lm-evaluation-harness and Optuna, at the versions
# tools/requirements/tests.txt pins, in the environment tools/setup.sh --tests makes (.venv/).
# Only Python runs there; it is given the source tree's root as its working directory.
#   tools/interop.sh --prepare     check that .venv/ has them; print their versions
#   tools/interop.sh CMD ARGS...   run CMD with .venv/bin first on PATH, offline
# Exit 77 (ctest's skip) when .venv/ lacks them, with the reason on a "SKIP:" line; on CI
# (CI=true) that fails instead (exit 2): there a judge that cannot start fails its test.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$PWD/.venv
cannot() {
  if [[ "${CI:-}" == "true" ]]; then echo "interop: error: $1" >&2; exit 2; fi
  echo "SKIP: interop: $1"
  exit 77
}
[[ -f "$venv/kiln-tests.sha256" ]] ||
  cannot "$venv has no test libraries: run tools/setup.sh --tests"
# Offline, as on a user's machine without the Hub: nothing may be fetched behind the test's back.
export PATH="$venv/bin:$PATH" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
  HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1 PYTHONDONTWRITEBYTECODE=1
if [[ "${1:-}" == "--prepare" ]]; then
  exec python3 -W ignore -c 'import importlib.metadata as m
print("interop:", ", ".join(f"{p} {m.version(p)}" for p in
      ("torch", "transformers", "tokenizers", "peft", "lm_eval", "optuna")))'
fi
exec "$@"
