// Every path inside a run's folder, made here and nowhere else (as leveldb's db/filename.h
// names every file of a database):
//
//   <run.out_dir>/<run name>/        the run's folder (a sweep member's name has a '/')
//                    lock            flock'ed by the kiln process training the run
//                    console.log     what a sweep member printed
//                    snapshots/      one folder per snapshot (core/checkpoint/snapshot.h)
//                       <label>/
#pragma once

#include <string>

namespace kiln {

class RunPaths {
 public:
  // A UserError when `name` could reach outside out_dir (is_contained_name, core/util/fs.h).
  RunPaths(std::string out_dir, std::string name);

  const std::string& out_dir() const { return out_dir_; }
  const std::string& name() const { return name_; }
  std::string folder() const;
  std::string lock() const;
  std::string console_log() const;
  std::string snapshots() const;
  std::string snapshot(const std::string& label) const;

 private:
  std::string out_dir_;
  std::string name_;
};

}  // namespace kiln
