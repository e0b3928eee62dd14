#include "core/util/freed_memory.h"

#include <dlfcn.h>
#include <sys/types.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace kiln {

namespace {

using Mallctl = int(const char*, void*, size_t*, void*, size_t);

// jemalloc's control entry point where it is this process's malloc; null under any other.
Mallctl* mallctl() {
  static Mallctl* const entry = reinterpret_cast<Mallctl*>(dlsym(RTLD_DEFAULT, "mallctl"));
  return entry;
}

// The user chose the decay for this process (jemalloc(3), "TUNING").
bool decay_set_by_user() {
  const char* conf = std::getenv("MALLOC_CONF");
  return conf != nullptr && std::strstr(conf, "decay_ms") != nullptr;
}

constexpr unsigned kAllArenas = 4096;  // MALLCTL_ARENAS_ALL of jemalloc.h

}  // namespace

void keep_freed_memory() {
  Mallctl* ctl = mallctl();
  if (ctl == nullptr || decay_set_by_user()) return;
  ssize_t never = -1;
  // The default of arenas made from now on (a new thread's, the arena of allocations above
  // opt.oversize_threshold), then each arena that exists; a slot not yet made answers EFAULT.
  for (const char* name : {"arenas.dirty_decay_ms", "arenas.muzzy_decay_ms"})
    ctl(name, nullptr, nullptr, &never, sizeof(never));
  unsigned arenas = 0;
  size_t size = sizeof(arenas);
  if (ctl("arenas.narenas", &arenas, &size, nullptr, 0) != 0) return;
  for (unsigned i = 0; i < arenas; ++i) {
    for (const char* decay : {"dirty_decay_ms", "muzzy_decay_ms"}) {
      const std::string name = "arena." + std::to_string(i) + "." + decay;
      ctl(name.c_str(), nullptr, nullptr, &never, sizeof(never));
    }
  }
}

void return_freed_memory() {
  Mallctl* ctl = mallctl();
  if (ctl == nullptr) return;
  const std::string purge = "arena." + std::to_string(kAllArenas) + ".purge";
  ctl(purge.c_str(), nullptr, nullptr, nullptr, 0);
}

}  // namespace kiln
