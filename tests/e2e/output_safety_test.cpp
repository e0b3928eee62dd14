// "What Kiln writes never replaces what Kiln keeps", through the real binary: every output option
// of every command (--details, --logits, -o of export, runs export, runs plot, report, prepare's
// --out, a tensorboard folder) refuses a path inside a run's folder, by `..`, a symlink or a hard
// link, and the run's snapshots stay byte for byte; `kiln export -o DIR` refuses a folder of the
// user's own files unless --force, keeps files that are not the export's, and leaves no shard of
// an earlier export beside the new set.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_kiln;

class OutputSafety : public testing::TinyRun {
 protected:
  // Trains run `name` (20 steps, snapshots at 10 and 20) and returns its latest snapshot folder.
  std::string train(const std::string& name) {
    auto trained = run_kiln("run " + experiment() + " --name " + name +
                            " --set train.steps=20 --set checkpoint.every=10 --set "
                            "checkpoint.keep=2");
    EXPECT_EQ(trained.exit_code, 0) << trained.output;
    return folder_of(name) + "/snapshots/step_000020";
  }

  // Every file under `folder` with its bytes.
  static std::map<std::string, std::string> contents(const std::string& folder) {
    std::map<std::string, std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(folder)) {
      if (entry.is_regular_file() && entry.path().filename() != "lock")
        out[entry.path().string()] = read_file(entry.path().string());
    }
    return out;
  }

  void expect_refused(const std::string& args, const std::string& expected) {
    testing::expect_one_error_line(run_kiln(args + " --db " + db()), args, expected);
  }

  // The files of an exported model directory, sorted.
  static std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir))
      out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(OutputSafety, NoOutputOptionReachesIntoARunsFolderByAnyPath) {
  const std::string snapshot = train("victim");
  const std::string folder = folder_of("victim");
  ASSERT_TRUE(fs::exists(snapshot + "/shard_0.safetensors"));
  const auto before = contents(folder);
  const std::string task = dir_ / "t.toml";
  testing::write_text(task, "kind = \"choice\"\nitems = \"t.jsonl\"\n");
  testing::write_text(dir_ / "t.jsonl",
                      "{\"context\": \"In the\", \"choices\": [\"beginning\", \"end\"], "
                      "\"label\": 0}\n");
  fs::create_directory_symlink(folder, dir_ / "link");
  fs::create_hard_link(snapshot + "/optimizer_0.pt", dir_ / "hard.npy");
  const std::string inside = "that is inside the run folder '" + folder + "'";

  expect_refused("eval victim --task " + task + " --details " + snapshot + "/shard_0.safetensors",
                 inside);
  expect_refused("eval victim --logits " + snapshot + "/optimizer_0.pt", inside);
  expect_refused("eval victim --logits " + (dir_ / "link/snapshots/step_000020/state.json"),
                 inside);
  expect_refused(
      "eval victim --logits " + folder + "/snapshots/../snapshots/step_000010/shard_0.safetensors",
      inside);
  expect_refused("eval victim --logits " + (dir_ / "hard.npy"), "has 2 hard links");
  expect_refused("runs export victim -o " + folder + "/run.json", inside);
  expect_refused("runs export victim --format tensorboard -o " + folder + "/tb", inside);
  expect_refused("runs plot victim -o " + folder + "/curves.svg", inside);
  expect_refused("report victim -o " + (dir_ / "link/report.html"), inside);
  expect_refused("export victim -o " + snapshot, inside);
  expect_refused("export victim -o " + folder + "/w.safetensors", inside);
  testing::expect_one_error_line(
      run_kiln(fmt::format("prepare {} --out {}/data", dir_ / "corpus.txt", folder)), "prepare",
      inside);
  // A folder that holds the store (beside the runs) is no place for an export either.
  expect_refused("export victim -o " + dir_.str(), ": choose a folder of its own");

  EXPECT_EQ(contents(folder), before) << "a refused command changed the run's files";
  auto eval = run_kiln("eval victim --db " + db());
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
}

TEST_F(OutputSafety, AnExportKeepsAUsersFilesAndLeavesNoStaleShards) {
  train("a");
  const std::string mine = dir_ / "mine";
  fs::create_directories(mine);
  testing::write_text(mine + "/config.json", "{\"mine\": true}\n");
  testing::write_text(mine + "/notes.txt", "my notes\n");
  expect_refused("export a -o " + mine, "not a Kiln export (config.json, notes.txt)");
  EXPECT_EQ(read_file(mine + "/config.json"), "{\"mine\": true}\n");

  auto forced = run_kiln("export a -o " + mine + " --force --db " + db());
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(mine + "/config.json")).at("n_embd"), 32);
  EXPECT_EQ(read_file(mine + "/notes.txt"), "my notes\n");

  // Over a Kiln export: no --force needed, and each new shard set replaces the old one whole.
  const std::string out = dir_ / "out";
  std::set<size_t> shard_counts;
  for (const char* size : {"4KB", "40KB", ""}) {
    const std::string shard = *size ? std::string(" --max-shard-size ") + size : "";
    auto exported = run_kiln("export a -o " + out + shard + " --db " + db());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    std::vector<std::string> weights;
    for (const auto& name : files_in(out)) {
      if (name.find(".safetensors") != std::string::npos && name.find(".json") == std::string::npos)
        weights.push_back(name);
    }
    if (!*size) {
      EXPECT_EQ(weights, std::vector<std::string>{"model.safetensors"});
      EXPECT_FALSE(fs::exists(out + "/model.safetensors.index.json"));
      continue;
    }
    std::set<std::string> indexed;
    const auto index = nlohmann::json::parse(read_file(out + "/model.safetensors.index.json"));
    for (const auto& [tensor, file] : index.at("weight_map").items())
      indexed.insert(file.get<std::string>());
    EXPECT_EQ(std::set<std::string>(weights.begin(), weights.end()), indexed) << size;
    shard_counts.insert(weights.size());
  }
  EXPECT_EQ(shard_counts.size(), 2u) << "the two shard sizes should give two shard counts";
  for (const auto& name : files_in(dir_.str()))
    EXPECT_EQ(name.find(".staging"), std::string::npos) << name << " was left behind";
}

// A prepare that fails (an empty input) leaves no --out folder it made: nothing half-written.
TEST_F(OutputSafety, AFailedPrepareLeavesNoFolderItMade) {
  testing::write_text(dir_ / "empty.txt", "");
  auto prepared = run_kiln(fmt::format("prepare {} --out {}", dir_ / "empty.txt", dir_ / "made"));
  EXPECT_EQ(prepared.exit_code, 2) << prepared.output;
  EXPECT_NE(prepared.output.find("kiln: error: the input text is empty"), std::string::npos)
      << prepared.output;
  EXPECT_FALSE(fs::exists(dir_ / "made"));
}

// A store imported into itself through a symlink is one file by two names: refused, and the
// run's marker still lists one store, the one it was made in.
TEST_F(OutputSafety, AStoreImportedIntoItselfThroughASymlinkIsRefused) {
  train("self");
  const std::string marker = folder_of("self") + "/run.json";
  const std::string before = read_file(marker);
  fs::create_symlink(db(), dir_ / "link.db");
  testing::expect_one_error_line(run_kiln("runs import " + (dir_ / "link.db") + " --db " + db()),
                                 "runs import link.db", "are the same run store (one file)");
  EXPECT_EQ(read_file(marker), before);
}

}  // namespace
}  // namespace kiln
