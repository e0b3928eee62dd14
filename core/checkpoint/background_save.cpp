#include "core/checkpoint/background_save.h"

#include <chrono>
#include <utility>

namespace kiln {

BackgroundSave::~BackgroundSave() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundSave::start(std::function<void()> save) {
  done_ = false;
  error_ = nullptr;
  // The thread inherits this one's blocked SIGINT and SIGTERM (core/util/stop_signal.h).
  thread_ = std::thread([this, save = std::move(save)] {
    try {
      save();
    } catch (...) {
      error_ = std::current_exception();
    }
    done_ = true;
  });
}

double BackgroundSave::wait() {
  if (!thread_.joinable()) return 0;
  const auto start = std::chrono::steady_clock::now();
  thread_.join();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return waited;
}

}  // namespace kiln
