#!/usr/bin/env bash
# The real client libraries a user opens Kiln's files with, run against files the host's kiln
# wrote: Hugging Face transformers 5.12, tokenizers 0.23 and safetensors, with PyTorch 2.14 (and
# Optuna 4.1 with SciPy, which Kiln's TPE is measured against), from Debian sid's packages, in
# the chroot tools/torch2.sh --sid makes (/var/cache/kiln/sid; no PyPI).
# Only Python runs there; nothing of Kiln is built in it.
#   tools/interop.sh --prepare        make the chroot (if missing) and add the Python packages
#   tools/interop.sh DIR CMD ARGS...  run CMD in the chroot, with DIR (a scratch folder of the
#                                     caller's) at the same path inside and the source tree at
#                                     /kiln, read-only
# Exit 77 (ctest's skip) when the chroot cannot be made here (not root, no mirror, no mounts),
# with the reason on a "SKIP:" line; on CI (CI=true) that fails instead (exit 2), as torch2.sh
# --if-possible does.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${KILN_TORCH2_ROOT:-/var/cache/kiln/sid}
packages=(python3-transformers python3-tokenizers python3-safetensors python3-torch python3-numpy
  python3-optuna python3-scipy)
cannot() {
  if [[ "${CI:-}" == "true" ]]; then echo "interop: error: $1" >&2; exit 2; fi
  echo "SKIP: interop: $1"
  exit 77
}

prepare() {
  [[ $(id -u) -eq 0 ]] || cannot "needs root (debootstrap, chroot, mount)"
  # The chroot itself, made once and shared with the LibTorch 2.14 build.
  local made
  made=$(tools/torch2.sh --sid --if-possible --prepare 2>&1) || cannot "torch2.sh: $made"
  [[ $made == *"skipped:"* ]] && cannot "${made#*skipped: }"
  local missing=()
  for p in "${packages[@]}"; do
    chroot "$root" dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "interop: adding ${missing[*]} to $root"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    { chroot "$root" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive chroot "$root" \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
      cannot "installing ${missing[*]} in $root failed"
  fi
}

if [[ "${1:-}" == "--prepare" ]]; then
  prepare
  exec "$0" /tmp python3 -c 'import transformers, tokenizers, torch
print("interop: transformers", transformers.__version__, "tokenizers", tokenizers.__version__,
      "torch", torch.__version__)'
fi

scratch=${1:?usage: tools/interop.sh --prepare | tools/interop.sh DIR CMD [ARGS...]}
shift
[[ -d "$scratch" && "$scratch" == /* ]] || { echo "interop: error: '$scratch' is not an absolute folder" >&2; exit 2; }
[[ -x "$root/usr/bin/python3" && -d "$root/usr/lib/python3/dist-packages/transformers" ]] ||
  cannot "$root has no transformers: run tools/interop.sh --prepare first"

mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() {  # bind SOURCE TARGET [ro]
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2" || cannot "this machine does not allow bind mounts"
  mounts+=("$root$2")
  [[ "${3:-}" == ro ]] && mount -o remount,bind,ro "$root$2"
  return 0
}
bind /proc /proc
bind "$scratch" "$scratch"
bind "$PWD" /kiln ro
# Offline, as a user's machine without the Hub: nothing may be fetched behind the test's back.
chroot "$root" env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1 \
  HOME=/tmp PYTHONDONTWRITEBYTECODE=1 \
  "$@"
