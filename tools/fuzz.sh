#!/usr/bin/env bash
# Fuzzes the experiment-config loader (tests/fuzz/config_fuzz.cpp: the TOML parser, the schema
# checks, chains of files that extend each other and --set overrides, under AddressSanitizer and
# UBSan) with libFuzzer for SECONDS (default 60), then the fine-tuning data's line reader
# (tests/fuzz/chat_fuzz.cpp) for half as long. Exits non-zero on any finding; the input that
# triggered it is saved in build-fuzz/findings/. Needs clang and libFuzzer (Debian: clang,
# libclang-rt-14-dev), and Kiln's build (build/fmt-include: the {fmt} of LibTorch's headers).
#   tools/fuzz.sh [SECONDS]
# KILN_BUILD_LOCK=FILE builds under `flock FILE` (a tree shared with another build).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cxx=${CXX_FUZZ:-clang++}

lock=()
[[ -n "${KILN_BUILD_LOCK:-}" ]] && lock=(flock "$KILN_BUILD_LOCK")
mkdir -p build-fuzz
if ! { [[ -f build-fuzz/build.ninja ]] ||
       cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
         -DCMAKE_BUILD_TYPE=None -DKILN_FMT_INCLUDE_DIR="$PWD/build/fmt-include"; } \
       >build-fuzz/build.log 2>&1 ||
   ! "${lock[@]}" ninja -C build-fuzz config_fuzz chat_fuzz >>build-fuzz/build.log 2>&1; then
  cat build-fuzz/build.log >&2
  echo "fuzz: could not build the fuzzer (clang++ with libFuzzer: tools/setup.sh --tests)" >&2
  exit 1
fi

# fuzz TARGET SECONDS SEEDS...: libFuzzer on TARGET for SECONDS from the seed files given, its
# corpus kept between runs in build-fuzz/corpus-TARGET; non-zero, with the log's tail, on a
# finding (the input saved in build-fuzz/findings/).
fuzz() {
  local target=$1 time=$2 seeds=build-fuzz/seeds-$1 log=build-fuzz/last_run-$1.log status=0
  shift 2
  rm -rf "$seeds"
  mkdir -p "$seeds" "build-fuzz/corpus-$target" build-fuzz/findings
  cp "$@" "$seeds/"
  echo "fuzz: $target for ${time} s"
  "build-fuzz/$target" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix=build-fuzz/findings/ -print_final_stats=1 ${dict:+-dict=$dict} \
    "build-fuzz/corpus-$target" "$seeds" >"$log" 2>&1 || status=$?
  local runs rate
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  if [[ $status -ne 0 ]]; then
    tail -n 60 "$log" >&2
    echo "fuzz: FINDING in $target (exit $status): see above, $log and build-fuzz/findings/" >&2
    exit 1
  fi
  echo "fuzz: $target: no finding in ${runs:-?} executions (${rate:-?}/s)"
}

# The config loader from every experiment and hostile-corpus file; the fine-tuning line reader,
# for half the time, from the shipped and hostile JSONL records, one line a seed.
dict=tests/fuzz/toml.dict fuzz config_fuzz "$seconds" experiments/*.toml tests/hostile/*.toml \
  tests/fuzz/seeds/*.toml
lines=$(mktemp -d)
trap 'rm -rf "$lines"' EXIT
awk 'NR <= 200' experiments/data/*.jsonl tests/hostile/*.jsonl | split -l 1 - "$lines/line-"
dict="" fuzz chat_fuzz $((seconds / 2 > 0 ? seconds / 2 : 1)) "$lines"/line-*
