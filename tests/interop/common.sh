# Sourced by the interop tests (tests/interop/*_test.sh): the source tree's root as the working
# directory, the test libraries ready (or exit 77 with its SKIP line where .venv/ lacks them, from
# tools/interop.sh), a scratch folder removed on exit, and the [run] section of an experiment
# that writes its store and runs there.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tools/interop.sh --prepare || exit $?
scratch=$(mktemp -d /tmp/kiln-interop.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

run_section() {
  printf '[run]\ndb = "%s/kiln.db"\nout_dir = "%s/runs"\nthreads = 1\n' "$scratch" "$scratch"
}
