// MappedFile (core/util/mapped_file.h): a whole file's bytes, empty files, and the one-line
// errors for what cannot be mapped.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/util/error.h"
#include "core/util/mapped_file.h"
#include "test_util.h"

namespace kiln {
namespace {

std::string error_of(const std::string& path, const MapOptions& options = {}) {
  try {
    MappedFile file(path, options);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UserError for " << path;
  return "";
}

TEST(MappedFileTest, MapsTheWholeFile) {
  testing::TempDir dir;
  const std::string text("bytes\0and more", 14);
  testing::write_text(dir / "f.bin", text);
  const MappedFile file(dir / "f.bin");
  ASSERT_EQ(file.size(), text.size());
  EXPECT_EQ(std::string(file.data(), file.size()), text);
}

TEST(MappedFileTest, AnEmptyFileIsAnEmptyView) {
  testing::TempDir dir;
  testing::write_text(dir / "empty", "");
  const MappedFile file(dir / "empty");
  EXPECT_EQ(file.size(), 0u);
  EXPECT_EQ(file.data(), nullptr);
}

TEST(MappedFileTest, AMoveHandsTheMapOver) {
  testing::TempDir dir;
  testing::write_text(dir / "f", "abc");
  MappedFile first(dir / "f");
  const char* data = first.data();
  MappedFile second(std::move(first));
  EXPECT_EQ(second.data(), data);
  EXPECT_EQ(second.size(), 3u);
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(first.size(), 0u);
}

TEST(MappedFileTest, ErrorsNameTheFileWhatItIsAndHowToFixIt) {
  testing::TempDir dir;
  const std::string missing = dir / "missing.bin";
  EXPECT_EQ(
      error_of(missing, {"token shard", "run `kiln prepare`", false}),
      "cannot open token shard '" + missing + "': No such file or directory: run `kiln prepare`");
  EXPECT_EQ(error_of(missing), "cannot open file '" + missing + "': No such file or directory");
  EXPECT_EQ(error_of(dir.str(), {"weights", "", false}),
            "cannot map weights '" + dir.str() + "': it is a directory");
}

TEST(MappedFileTest, AFifoIsRefusedWithoutBlocking) {
  testing::TempDir dir;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_NE(error_of(fifo).find("it is not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace kiln
