// What this kiln binary was built from, recorded when CMake configured the build
// (cmake/build_info.cmake), not asked of git at run time.
#pragma once

namespace kiln {

// The git commit (40 hex digits) of the source tree, or "" when it was not a git checkout.
const char* build_git_commit();

}  // namespace kiln
