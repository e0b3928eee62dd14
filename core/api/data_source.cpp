#include "core/api/data_source.h"

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

// How an error names the files a request reads: `data.val = "GIVEN"`, with the absolute form
// the run reads when that differs, or `--data PATTERN`.
std::string named_pattern(const Params& p, const DataRequest& request, const std::string& pattern) {
  if (!request.files.empty()) return fmt::format("--data {}", pattern);
  const std::string& given = p.text(request.split);
  if (given == pattern) return fmt::format("data.{} = \"{}\"", request.split, given);
  return fmt::format("data.{} = \"{}\" (read as {})", request.split, given, pattern);
}

}  // namespace

std::optional<SplitFiles> split_files(const Params& p, const DataRequest& request,
                                      const std::string& empty_train,
                                      const std::string& no_match_fix) {
  SplitFiles split{request.files.empty() ? p.path(request.split) : request.files, {}};
  if (split.pattern.empty()) {
    if (request.split != "train") return std::nullopt;
    throw UserError(empty_train);
  }
  split.files = glob_files(split.pattern);
  if (split.files.empty()) {
    throw UserError(fmt::format("{} matches no file: {}", named_pattern(p, request, split.pattern),
                                no_match_fix));
  }
  return split;
}

}  // namespace kiln
