// The check every command that reads a run store and writes a file (`kiln runs export`,
// `kiln runs plot`, `kiln report`, `kiln export`) makes before it opens the store: the file it
// writes must not be the store, nor one of the files SQLite keeps beside it (`-wal`, `-shm`,
// `-journal`), by any path (`./x.db`, a symlink, a hard link). Writing there would replace
// every run with a CSV or an HTML page.
#pragma once

#include <string>

namespace kiln {

// A UserError "OPTION OUTPUT: that is the run store 'DB': ..." (or "that is 'DB-wal', the
// write-ahead log of the run store 'DB'", ...) when `output` and the store at `db` (or one of its
// side files) are the same file; nothing otherwise. Same file: the same inode when both exist, else
// the same absolute path with symlinks in its existing part resolved and `.`/`..` removed.
void refuse_output_over_store(const std::string& output, const std::string& db,
                              const std::string& option = "-o");
// A UserError "OPTION OUTPUT: that is inside FOLDER, WHAT: ..." when `output` is `folder` or lies
// under it (paths resolved as above); nothing otherwise.
void refuse_output_inside(const std::string& output, const std::string& folder,
                          const std::string& what, const std::string& option = "-o");

}  // namespace kiln
