#include "core/distributed/roll_call.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "core/util/env.h"

namespace kiln {
namespace {

std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

std::string key_of(const char* what, int rank) {
  return fmt::format("{}/{}", what, rank);
}

}  // namespace

void publish_whereabouts(c10d::Store& store, int rank) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::optional<std::string> node = env_text("SLURMD_NODENAME");
  store.set(key_of("whereabouts", rank),
            bytes_of(fmt::format("pid {} on host {}{}", ::getpid(), host,
                                 node ? fmt::format(" (Slurm node {})", *node) : "")));
}

std::vector<std::string> silent_ranks(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                      int size) {
  // In a thread of its own: a call to a store whose serving process is stopped blocks for good.
  struct Roll {
    std::mutex mutex;
    std::condition_variable done;
    bool finished = false;
    std::vector<std::string> silent;
  };
  auto roll = std::make_shared<Roll>();
  std::thread([roll, store, rank, size] {
    std::vector<std::string> silent;
    try {
      store->set(key_of("alive", rank), bytes_of("1"));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      std::vector<int> missing;
      do {
        missing.clear();
        for (int r = 0; r < size; ++r)
          if (!store->check({key_of("alive", r)})) missing.push_back(r);
        if (!missing.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      } while (!missing.empty() && std::chrono::steady_clock::now() < deadline);
      for (int r : missing) {
        const std::string key = key_of("whereabouts", r);
        const std::vector<uint8_t> where =
            store->check({key}) ? store->get(key) : bytes_of("where unknown");
        silent.push_back(fmt::format("rank {} ({})", r, std::string(where.begin(), where.end())));
      }
    } catch (const std::exception&) {
      silent = {"rank 0 (which serves the rendezvous store)"};
    }
    std::lock_guard lock(roll->mutex);
    roll->silent = std::move(silent);
    roll->finished = true;
    roll->done.notify_all();
  }).detach();
  std::unique_lock lock(roll->mutex);
  if (!roll->done.wait_for(lock, std::chrono::seconds(10), [&] { return roll->finished; })) {
    return {"rank 0 (which serves the rendezvous store)"};
  }
  return roll->silent;
}

}  // namespace kiln
