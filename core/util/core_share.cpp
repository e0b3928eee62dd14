#include "core/util/core_share.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include <ATen/Parallel.h>

#include "core/util/env.h"

namespace kiln {
namespace {

std::string registry_dir() {
  const auto runtime = env_text("XDG_RUNTIME_DIR");
  const std::string base = runtime ? *runtime + "/kiln" : "/tmp/kiln-" + std::to_string(::getuid());
  return base + "/running";
}

// `path` made, or found, as a real directory of this user's that no one else may write: in a
// shared /tmp another user could have made it first, to watch or steer this user's runs.
bool make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat found;
  return ::lstat(path.c_str(), &found) == 0 && S_ISDIR(found.st_mode) &&
         found.st_uid == ::getuid() && (found.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// The cgroup v2 quota of this process in CPUs ("max": none), from its own cgroup's cpu.max or,
// inside a cgroup namespace, the root's.
std::optional<double> cgroup_cpu_quota() {
  std::ifstream membership("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(membership, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  for (const std::string& dir : {"/sys/fs/cgroup" + path, std::string("/sys/fs/cgroup")}) {
    std::ifstream max(dir + "/cpu.max");
    std::string quota;
    double period = 0;
    if (!(max >> quota >> period)) continue;
    if (quota == "max" || period <= 0) return std::nullopt;
    char* end = nullptr;
    const double microseconds = std::strtod(quota.c_str(), &end);
    if (*end == '\0' && microseconds > 0) return microseconds / period;
  }
  return std::nullopt;
}

}  // namespace

int usable_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  int cpus = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0
                 ? CPU_COUNT(&allowed)
                 : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (const std::optional<double> quota = cgroup_cpu_quota())
    cpus = std::min(cpus, static_cast<int>(std::ceil(*quota)));
  return std::max(1, cpus);
}

CoreShare::CoreShare(int cores) : cores_(std::max(1, cores)), dir_(registry_dir()) {
  if (!make_dir(dir_.substr(0, dir_.rfind('/'))) || !make_dir(dir_)) return;
  const std::string pid = std::to_string(::getpid());
  const std::string temporary = dir_ + "/." + pid;
  const int fd = ::open(temporary.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0 ||
      ::rename(temporary.c_str(), (dir_ + "/" + pid).c_str()) != 0) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return;
  }
  fd_ = fd;
  path_ = dir_ + "/" + pid;
}

CoreShare::~CoreShare() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

int CoreShare::processes() {
  if (fd_ < 0) return 1;
  DIR* dir = ::opendir(dir_.c_str());
  if (dir == nullptr) return 1;
  int live = 0;
  const std::string mine = path_.substr(path_.rfind('/') + 1);
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.empty() || name[0] == '.') continue;  // ".", "..", files not yet in place
    if (name == mine) {
      ++live;
      continue;
    }
    const std::string path = dir_ + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
      ++live;  // held: its process lives
    } else {
      ::unlink(path.c_str());  // its process died without removing it
    }
    ::close(fd);
  }
  ::closedir(dir);
  return std::max(1, live);
}

int CoreShare::fair_threads() {
  return std::max(1, cores_ / processes());
}

int CoreShare::rebalance(std::chrono::milliseconds every) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < every) return at::get_num_threads();
  last_ = now;
  const int threads = fair_threads();
  if (threads != at::get_num_threads()) at::set_num_threads(threads);
  return threads;
}

}  // namespace kiln
