// `kiln export -o DIR` over an earlier export (core/util/fs.h, replace_folder): where the file
// system refuses to exchange the two folders (EINVAL from renameat2's RENAME_EXCHANGE, as NFS and
// FUSE answer; KILN_FAULT=folder.no_exchange makes it so here, where neither can be mounted) the
// new folder still replaces the old one whole, leaving nothing beside it; and a DIR that is a
// symbolic link stays one, the folder it points to replaced.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::run_kiln;

class FolderReplacement : public testing::TinyRun {
 protected:
  void SetUp() override {
    TinyRun::SetUp();
    auto trained = run_kiln("run " + experiment() +
                            " --name a --set train.steps=10 --set checkpoint.every=10");
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
  }

  testing::CommandResult export_to(const std::string& out, const std::string& extra = "") {
    return run_kiln("export a -o " + out + extra + " --db " + db());
  }

  // Every name in `dir`, sorted.
  std::vector<std::string> names_in(const std::string& dir) const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir))
      out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(FolderReplacement, WithoutAnExchangeTheNewFolderStillReplacesTheOld) {
  const std::string out = dir_ / "exports/out";
  fs::create_directories(dir_ / "exports");
  auto first = export_to(out);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_TRUE(fs::exists(out + "/model.safetensors"));
  const testing::ScopedEnv no_exchange("KILN_FAULT", "folder.no_exchange:1+");
  auto second = export_to(out, " --max-shard-size 4KB");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_FALSE(fs::exists(out + "/model.safetensors")) << "the old export's file stayed";
  EXPECT_TRUE(fs::exists(out + "/model.safetensors.index.json"));
  EXPECT_EQ(names_in(dir_ / "exports"), std::vector<std::string>{"out"})
      << "a staging or set-aside folder was left behind";
}

TEST_F(FolderReplacement, ALinkToAFolderStaysALink) {
  const std::string real = dir_ / "real";
  const std::string link = dir_ / "link";
  auto first = export_to(real);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  fs::create_directory_symlink(real, link);
  auto second = export_to(link, " --max-shard-size 4KB");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(fs::is_symlink(link)) << "the link was replaced by a folder";
  EXPECT_EQ(fs::read_symlink(link), real);
  EXPECT_TRUE(fs::exists(real + "/model.safetensors.index.json")) << "the linked folder is old";
  EXPECT_FALSE(fs::exists(real + "/model.safetensors"));
}

}  // namespace
}  // namespace kiln
