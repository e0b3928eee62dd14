#!/usr/bin/env bash
# Interop: `kiln eval --hf` on a random model transformers made with one config.json field set
# away from its default (tests/interop/hf_config_make.py CASE): Kiln reads that field, and its
# log-likelihoods of a choice task equal transformers' own within 1e-4
# (tests/interop/hf_config_check.py).
#   tests/interop/hf_config_test.sh KILN CASE
# Exit 77: skipped (no test libraries in .venv/; tools/interop.sh).
set -euo pipefail
kiln=$1 case=$2
source "$(dirname "$0")/common.sh"
tools/interop.sh python3 tests/interop/hf_config_make.py "$scratch" "$case"
"$kiln" eval --hf "$scratch/model" --task "$scratch/task.toml" --details "$scratch/details.jsonl" \
  --db "$scratch/kiln.db"
tools/interop.sh python3 tests/interop/hf_config_check.py "$scratch/model" \
  "$scratch/details.jsonl"
