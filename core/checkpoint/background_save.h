// checkpoint.async: a snapshot written by a background thread while training goes on. The
// training thread serializes the model and optimizer into buffers this object keeps and reuses
// (archives()), then start() hands them to the thread, which writes, checksums, fsyncs and
// renames the snapshot (core/checkpoint/snapshot_writer.h). At most one save is in flight:
// archives() and start() are for an idle one, and wait() ends the one in flight. The run store
// is not touched here: the caller records the snapshot once wait() says it is in place.
#pragma once

#include <atomic>
#include <exception>
#include <string>
#include <thread>

#include "core/checkpoint/snapshot_writer.h"

namespace kiln {

class BackgroundSave {
 public:
  BackgroundSave() = default;
  ~BackgroundSave();  // waits for a save in flight (its error is dropped: wait() reports one)
  BackgroundSave(const BackgroundSave&) = delete;
  BackgroundSave& operator=(const BackgroundSave&) = delete;

  // The buffers the next save writes from; only while none is in flight.
  SnapshotArchives& archives() { return archives_; }
  // Writes archives() and `state` as `dir/label` on the background thread.
  void start(const std::string& dir, const std::string& label, SnapshotState state);

  bool in_flight() const { return thread_.joinable(); }
  // In flight and already done writing: wait() would return at once.
  bool finished() const { return in_flight() && done_.load(); }
  // Waits for the save in flight to end and rethrows what it threw (the snapshot is then not in
  // place); returns the seconds waited. None in flight: 0.
  double wait();

 private:
  SnapshotArchives archives_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
};

}  // namespace kiln
