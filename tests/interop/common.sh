# Sourced by the interop tests (tests/interop/*_test.sh): the source tree's root as the working
# directory, the test libraries ready (or exit 77 with its SKIP line where .venv/ lacks them, from
# tools/interop.sh), a scratch folder removed on exit, the [run] section of an experiment that
# writes its store and runs there, and the sections that snapshot a model as it was loaded.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tools/interop.sh --prepare || exit $?
scratch=$(mktemp -d /tmp/kiln-interop.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

run_section() {
  printf '[run]\ndb = "%s/kiln.db"\nout_dir = "%s/runs"\nthreads = 1\n' "$scratch" "$scratch"
}

# The sections after [model] of an experiment whose one step, at lr 0 with sgd (no weight decay),
# trains nothing on $scratch/tokens.bin and snapshots it: the snapshot holds the weights as they
# were loaded, and `kiln eval` reads them there.
loaded_as_snapshot_sections() {
  cat <<TOML
[data]
train = "$scratch/tokens.bin"

[train]
steps = 1
micro_batch = 4
seq_len = 32

[optimizer]
type = "sgd"
lr = 0.0

[eval]
every = 0

[checkpoint]
every = 1
TOML
}
