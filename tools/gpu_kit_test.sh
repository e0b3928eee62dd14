#!/usr/bin/env bash
# Proof, on a CPU machine, that the device kit (tools/gpu.sh kit) holds everything a GPU machine
# without Kiln's libraries needs besides LibTorch: the kit is made and unpacked as the device
# check unpacks it; then, in a private mount namespace where the system's copies of the kit
# packages' headers, CMake and pkg-config files are covered, Kiln is configured from the kit alone
# and builds what uses each kit library (the torch-free kiln_base; the objects that include
# xxHash, CLI11, cpp-httplib and GoogleTest); a probe links every kit library from the kit, with
# `--trace` showing each came from it; and every shared library in the kit must find each library
# it loads in the kit or in the C and C++ runtimes the GPU machine has. Needs root (mounts).
# Last line: "gpu-kit: RESULT: ...".
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "gpu-kit: RESULT: FAILED: $*" >&2
  exit 1
}
[[ $(id -u) -eq 0 ]] || fail "needs root, to cover the system's copies in a mount namespace"

tools/gpu.sh kit
prefix=$(mktemp -d "${TMPDIR:-/tmp}/kiln-kit-prefix.XXXXXX")
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kiln-kit-build.XXXXXX")
trap 'rm -rf "$prefix" "$scratch"' EXIT
tools/gpu.sh unpack-kit "$prefix"
lib="$prefix/usr/lib/x86_64-linux-gnu"

# 1. Every kit library's needs are met inside the kit or by the runtimes the GPU image has.
runtime='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
missing=()
while IFS= read -r so; do
  while IFS= read -r needed; do
    [[ "$needed" =~ $runtime ]] && continue
    [[ -e "$lib/$needed" || -e "$prefix/lib/x86_64-linux-gnu/$needed" ]] || missing+=("$(basename "$so") needs $needed")
  done < <(objdump -p "$so" | awk '/NEEDED/ { print $2 }')
done < <(find "$prefix" -name '*.so*' -type f)
((${#missing[@]} == 0)) || fail "the kit lacks libraries its own load: ${missing[*]}"

# 2. The files CMake and the compiler would find of the system's copies: each kit package's
# headers, CMake and pkg-config files, as this machine installed them.
hidden="$scratch/hidden.txt"
for deb in .gpu-kit/debs/*.deb; do
  dpkg -L "$(dpkg-deb -f "$deb" Package)" 2>/dev/null || true
done | grep -E '^/usr/(include/|lib/x86_64-linux-gnu/(cmake|pkgconfig)/|share/(pkgconfig|cmake)/|lib/cmake/)' |
  while IFS= read -r path; do [[ -f "$path" && ! -L "$path" ]] && echo "$path"; done | sort -u >"$hidden"
echo "gpu-kit: covering $(wc -l <"$hidden") files of the system's copies"

# 3. Inside the namespace: each covered file reads as empty, so a build that fell back to one
# would fail; then configure from the kit and build.
torch_prefix=$(.venv/bin/python -W ignore -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')/Torch
unshare --mount --propagation private bash -euo pipefail -c '
  while IFS= read -r path; do mount --bind /dev/null "$path"; done <"$1"
  prefix=$2 scratch=$3 lib=$2/usr/lib/x86_64-linux-gnu
  cmake -S . -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON \
    -DKILN_PCH=OFF -DKILN_UNITY=OFF -DTorch_DIR="$4" \
    -DCMAKE_PREFIX_PATH="$prefix/usr;$lib/cmake" -DPKG_CONFIG_EXECUTABLE="$prefix/bin/pkg-config" \
    -DCMAKE_CXX_FLAGS="-isystem $prefix/usr/include/x86_64-linux-gnu" \
    >"$scratch/configure.log" || { cat "$scratch/configure.log"; exit 1; }
  cmake --build "$scratch/build" -j "$(nproc)" --target kiln_base
  # The translation units that include xxHash, CLI11, cpp-httplib and GoogleTest, compiled with
  # their own command lines (compile_commands.json): a target of objects would first build every
  # library its executable links, all of LibTorch'"'"'s translation units among them.
  python3 - "$scratch/build/compile_commands.json" <<PY || exit 1
import json, subprocess, sys
wanted = ("core/checkpoint/snapshot.cpp", "tools/kiln/main.cpp", "tools/kiln/serve_command.cpp",
          "tests/unit/util/sha256_test.cpp")
found = set()
for entry in json.load(open(sys.argv[1])):
    if entry["file"].endswith(wanted):
        print("gpu-kit: compiling", entry["file"], flush=True)
        subprocess.run(entry["command"], shell=True, cwd=entry["directory"], check=True)
        found.update(w for w in wanted if entry["file"].endswith(w))
if set(wanted) - found:
    sys.exit("gpu-kit: not in compile_commands.json: " + ", ".join(sorted(set(wanted) - found)))
PY
  # Every kit library linked into one probe, each found in the kit (ld --trace names the files).
  echo "int main() { return 0; }" >"$scratch/probe.cpp"
  c++ "$scratch/probe.cpp" -o "$scratch/probe" -L"$lib" -Wl,-rpath-link,"$lib" -Wl,--no-as-needed \
    -Wl,--trace -ltomlplusplus -lsqlite3 -lpcre2-8 -lpq -lcpp-httplib -lxxhash -lcrypto \
    -luuid -lgtest -lgmock \
    >"$scratch/trace.log" 2>&1 || { cat "$scratch/trace.log"; exit 1; }
  outside=$(grep -E "lib(tomlplusplus|sqlite3|pcre2-8|pq|cpp-httplib|xxhash|crypto|uuid|gtest|gmock)\.so" "$scratch/trace.log" | grep -v "^$prefix" || true)
  [[ -z "$outside" ]] || { echo "linked from outside the kit: $outside"; exit 1; }
' kit-proof "$hidden" "$prefix" "$scratch" "$torch_prefix" || fail "Kiln does not build from the kit alone (above)"

echo "gpu-kit: RESULT: passed: $(du -sm .gpu-kit | cut -f1) MiB kit; configured and built kiln_base," \
     "the xxHash, CLI11, cpp-httplib and GoogleTest objects, and a probe linking every kit library, with the" \
     "system's copies covered"
