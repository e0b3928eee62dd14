// checkpoint.async: a snapshot written by a background thread while training goes on. The
// training thread copies its parts of the training state into host buffers it keeps and reuses,
// then start() hands the thread the save: write, checksum and fsync this rank's files, and on
// rank 0 commit the snapshot (core/checkpoint/snapshot_writer.h). At most one save is in
// flight: start() is for an idle one, and wait() ends the one in flight. The run store is not
// touched here: the caller records the snapshot once wait() says it is in place.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <thread>

namespace kiln {

class BackgroundSave {
 public:
  BackgroundSave() = default;
  ~BackgroundSave();  // waits for a save in flight (its error is dropped: wait() reports one)
  BackgroundSave(const BackgroundSave&) = delete;
  BackgroundSave& operator=(const BackgroundSave&) = delete;

  // Runs `save` on the background thread; only while none is in flight.
  void start(std::function<void()> save);

  bool in_flight() const { return thread_.joinable(); }
  // In flight and already done writing: wait() would return at once.
  bool finished() const { return in_flight() && done_.load(); }
  // Waits for the save in flight to end and rethrows what it threw (the snapshot is then not in
  // place); returns the seconds waited. None in flight: 0.
  double wait();

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
};

}  // namespace kiln
