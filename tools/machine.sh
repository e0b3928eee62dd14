#!/usr/bin/env bash
# A short summary of the machine, printed first by .ci/run so that a failure on another machine
# can be read from the log alone: the CPU as the kernel and as cpuid name it (hypervisors may
# rewrite one and not the other), the flags that choose kernels (AMX among them), the kernel,
# memory, cores (and a cgroup's CPU quota), /tmp's file system, locale, time zone, user, the
# Python that makes .venv/ and the torch pinned for it (before tools/setup.sh has run, .venv/
# may not exist yet).
set -uo pipefail

field() { lscpu 2>/dev/null | sed -n "s/^$1:[[:space:]]*//p" | head -1; }
interesting="avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16 amx_tile amx_bf16"
flags=" $(field Flags) "
present=""
for flag in $interesting; do
  [[ "$flags" == *" $flag "* ]] && present+="$flag "
done

# cpuid's brand string, read by a five-line program (no Kiln binary exists yet at this point).
brand="(no C compiler yet)"
if command -v cc >/dev/null; then
  probe=$(mktemp -d)
  cat >"$probe/brand.c" <<'C'
#include <cpuid.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  unsigned r[12] = {0};
  for (unsigned i = 0; i < 3; ++i)
    if (!__get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]))
      return 1;
  char s[49] = {0};
  memcpy(s, r, 48);
  printf("%s\n", s);
  return 0;
}
C
  if cc -O0 -o "$probe/brand" "$probe/brand.c" 2>/dev/null; then
    brand=$("$probe/brand" | sed 's/^ *//; s/ *$//') || brand="(no brand string)"
  else
    brand="(not x86, or no cpuid.h)"
  fi
  rm -rf "$probe"
fi

quota="none"
if [[ -r /sys/fs/cgroup/cpu.max ]]; then
  read -r max period </sys/fs/cgroup/cpu.max
  [[ "$max" != max ]] && quota="$(awk -v m="$max" -v p="$period" 'BEGIN { printf "%.2f", m / p }') CPUs"
fi
package() {
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not installed yet"
}

echo "machine: CPU (kernel):  $(field 'Model name') ($(field 'Vendor ID'), family $(field 'CPU family'), model $(field 'Model'))"
echo "machine: CPU (cpuid):   $brand"
hypervisor=$(field "Hypervisor vendor")
echo "machine: hypervisor:    ${hypervisor:-none}, flags: ${present% }"
echo "machine: kernel:        $(uname -srm)"
echo "machine: memory:        $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "machine: cores:         nproc $(nproc), online $(getconf _NPROCESSORS_ONLN), cgroup quota $quota"
echo "machine: /tmp:          $(findmnt -no FSTYPE -T /tmp 2>/dev/null || echo unknown), $(df -h --output=avail /tmp | tail -1 | tr -d ' ') free"
echo "machine: locale, zone:  LANG=${LANG:-unset} LC_ALL=${LC_ALL:-unset}, TZ=${TZ:-unset} ($(date +%Z))"
echo "machine: user:          $(id -un) (uid $(id -u))"
echo "machine: Python:        $(/usr/bin/python3 --version 2>&1 || echo 'none'), python3-venv $(package python3-venv)"
echo "machine: LibTorch:      PyPI's $(grep -m1 '^torch==' tools/requirements/torch.txt | cut -d' ' -f1), in .venv/: $(.venv/bin/python -W ignore -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not yet')"
