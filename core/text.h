// Small string helpers shared by the config loader, the CLI and the console.
#pragma once

#include <string>
#include <vector>

namespace kiln {

std::string join(const std::vector<std::string>& parts, const std::string& sep);
std::vector<std::string> split(const std::string& s, char sep);
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);
// "1h02m", "3m05s", "12s": how long an ETA or a run takes, readable at a glance.
std::string format_duration(double seconds);
// Expands `*` and `?` in the file-name part of a path pattern; sorted; no match -> empty.
std::vector<std::string> glob_files(const std::string& pattern);
// Creates a file's parent directories; a UserError naming the path when that fails.
void ensure_parent_dir(const std::string& path);
// A file written to `path.tmp`, flushed, fsync'ed and renamed over `path`: readers see the old
// file or the new one, never half of one.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace kiln
