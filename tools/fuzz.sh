#!/usr/bin/env bash
# Fuzzes the experiment-config loader (tests/fuzz/config_fuzz.cpp: the TOML parser, the schema
# checks, chains of files that extend each other and --set overrides, under AddressSanitizer and
# UBSan) with libFuzzer for SECONDS (default 60). Exits non-zero on any finding; the input that
# triggered it is saved in build-fuzz/findings/. Needs clang and libFuzzer (Debian: clang,
# libclang-rt-14-dev).
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
         -DCMAKE_BUILD_TYPE=None; } >build-fuzz/build.log 2>&1 ||
   ! "${lock[@]}" ninja -C build-fuzz config_fuzz >>build-fuzz/build.log 2>&1; then
  cat build-fuzz/build.log >&2
  echo "fuzz: could not build the fuzzer (clang++ with libFuzzer: tools/setup.sh --tests)" >&2
  exit 1
fi

# Seeds: every experiment and hostile-corpus file; the corpus the fuzzer grows stays between
# runs in build-fuzz/corpus.
rm -rf build-fuzz/seeds
mkdir -p build-fuzz/seeds build-fuzz/corpus build-fuzz/findings
cp experiments/*.toml tests/hostile/*.toml tests/fuzz/seeds/*.toml build-fuzz/seeds/

echo "fuzz: config loader for ${seconds} s"
log=build-fuzz/last_run.log
status=0
build-fuzz/config_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -dict=tests/fuzz/toml.dict -artifact_prefix=build-fuzz/findings/ -print_final_stats=1 \
  build-fuzz/corpus build-fuzz/seeds >"$log" 2>&1 || status=$?
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
if [[ $status -ne 0 ]]; then
  tail -n 60 "$log" >&2
  echo "fuzz: FINDING (exit $status): see above, $log and build-fuzz/findings/" >&2
  exit 1
fi
echo "fuzz: no finding in ${runs:-?} executions (${rate:-?}/s); corpus build-fuzz/corpus"
