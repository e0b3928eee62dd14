// Every output option against every kind of file it must not replace, through the real binary:
// a file the command itself reads (a task's file, items and few-shot pool, a run's recorded data
// and model.init_from, prepare's --tokenizer-file and inputs), a SQLite database that is not the
// command's store (known by its header: each target here has another name's suffix), a file in a
// run's folder, and a file in the `--hf` folder being scored. Each is refused with one error line,
// and afterwards every file in the scratch folder but the command's own store is byte for byte
// what it was, and the SQLite databases still answer a query.
#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "byte_level_tokenizer_json.h"
#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_kiln;

// A SQLite database made by SQLite itself, holding one row.
void write_database(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE runs (name TEXT); INSERT INTO runs VALUES ('mine')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
}

class OutputTargets : public testing::TinyRun {
 protected:
  // Every file under the scratch folder with its bytes, but the store the commands use and the
  // run folders' locks.
  std::map<std::string, std::string> contents() const {
    std::map<std::string, std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(dir_.str())) {
      const std::string path = entry.path().string();
      if (!entry.is_regular_file() || path.rfind(db(), 0) == 0 || entry.path().filename() == "lock")
        continue;
      out[path] = read_file(path);
    }
    return out;
  }
};

TEST_F(OutputTargets, EveryOutputOptionRefusesWhatTheCommandReadsAnyDatabaseAndAModelFolder) {
  const std::string train =
      " --set model.vocab_size=256 --set train.steps=10 --set checkpoint.every=10";
  auto victim = run_kiln("run " + experiment() + " --name victim" + train);
  ASSERT_EQ(victim.exit_code, 0) << victim.output;
  const std::string base = dir_ / "base.safetensors", hf = dir_ / "hf";
  for (const std::string& out : {base, hf}) {
    auto exported = run_kiln("export victim -o " + out + " --db " + db());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
  }
  testing::write_byte_tokenizer_json(hf + "/tokenizer.json");
  auto tuned =
      run_kiln("run " + experiment() + " --name tuned --set model.init_from=" + base + train);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;

  const std::string task = dir_ / "tasks/mc.toml", items = dir_ / "tasks/mc.jsonl",
                    pool = dir_ / "tasks/pool.jsonl";
  const std::string item =
      "{\"context\": \"In the\", \"choices\": [\"beginning\", \"end\"], \"label\": 0}\n";
  testing::write_text(items, item + item);
  testing::write_text(pool, item);
  testing::write_text(
      task,
      "kind = \"choice\"\nitems = \"mc.jsonl\"\nfewshot_file = \"pool.jsonl\"\nnum_fewshot = 1\n");
  const std::string corpus = dir_ / "inside/corpus.txt";
  testing::write_text(corpus, read_file(dir_ / "corpus.txt"));
  // SQLite databases named as each option's output would be.
  std::vector<std::string> databases;
  for (const char* name : {"scratch.db", "scratch.jsonl", "scratch.npy", "scratch.safetensors",
                           "scratch.json", "scratch.svg", "scratch.html", "scratch"}) {
    databases.push_back(dir_ / name);
    write_database(databases.back());
  }
  const std::string run_file = folder_of("victim") + "/run.json";
  const std::string val = dir_ / "data/val_000000.bin";
  const std::string shard = dir_ / "shards/val.bin";
  fs::create_directories(dir_ / "shards");
  fs::copy_file(val, shard);
  const auto before = contents();

  const std::string details = "eval victim --task " + task + " --details ";
  const std::string hf_details = "eval --hf " + hf + " --task " + task + " --details ";
  const std::string reads = "which this command reads", database = "SQLite database",
                    run_folder = "inside the run folder", model_folder = "the --hf model folder";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {details + task, reads},
      {details + items, reads},
      {details + pool, reads},
      {details + val, reads},
      {details + dir_ / "scratch.db", database},
      {details + dir_ / "scratch.jsonl", database},
      {details + dir_ / "scratch.db-wal", database},
      {details + run_file, run_folder},
      {hf_details + task, reads},
      {hf_details + items, reads},
      {hf_details + hf + "/model.safetensors", model_folder},
      {hf_details + hf + "/config.json", model_folder},
      {hf_details + hf + "/tokenizer.json", model_folder},
      {hf_details + hf + "/new.jsonl", model_folder},
      {hf_details + dir_ / "scratch.jsonl", database},
      {"eval victim --logits " + val, reads},
      {"eval victim --data " + shard + " --logits " + shard, reads},
      {"eval victim --logits " + dir_ / "scratch.npy", database},
      {"eval victim --logits " + folder_of("victim") + "/log.npy", run_folder},
      {"export tuned -o " + base, reads},
      {"export victim -o " + dir_ / "scratch.safetensors", database},
      {"runs export victim -o " + dir_ / "scratch.json", database},
      {"runs export victim -o " + dir_ / "scratch", database},
      {"runs export victim -o " + run_file, run_folder},
      {"runs plot victim -o " + dir_ / "scratch.svg", database},
      {"runs plot victim -o " + folder_of("victim") + "/curves.svg", run_folder},
      {"report victim -o " + dir_ / "scratch.html", database},
      {"report victim -o " + folder_of("victim") + "/report.html", run_folder},
      {"prepare " + corpus + " --out " + dir_ / "inside", reads},
      {"prepare " + corpus + " --tokenizer hf --tokenizer-file " + hf + "/tokenizer.json --out " +
           hf,
       reads},
      {"prepare " + corpus + " --out " + dir_ / "scratch", database},
      {"prepare " + corpus + " --out " + folder_of("victim") + "/data", run_folder},
  };
  for (const auto& [args, expected] : cases) {
    const std::string command = args + (args.rfind("prepare", 0) == 0 ? "" : " --db " + db());
    testing::expect_one_error_line(run_kiln(command), command, expected);
    // Compared after each case, so that a failure names the command that changed a file.
    const auto after = contents();
    for (const auto& [path, bytes] : before) {
      EXPECT_TRUE(after.count(path) && after.at(path) == bytes)
          << "kiln " << command << " changed or removed " << path;
    }
    for (const auto& [path, bytes] : after)
      EXPECT_TRUE(before.count(path)) << "kiln " << command << " wrote " << path;
  }
  for (const std::string& path : databases)
    EXPECT_EQ(testing::scalar(path, "select name from runs"), "mine") << path;
  // The same commands with outputs of their own still work; --threads sets LibTorch's threads.
  for (const std::string& args :
       {hf_details + dir_ / "out/hf.jsonl --threads 3", details + dir_ / "out/d.jsonl",
        "eval victim --threads 1 --logits " + dir_ / "out/l.npy"}) {
    auto ran = run_kiln(args + " --db " + db());
    EXPECT_EQ(ran.exit_code, 0) << args << "\n" << ran.output;
    if (args.rfind("eval --hf", 0) == 0) {
      EXPECT_NE(ran.output.find("run 'hf-hf', 3 CPU threads\n"), std::string::npos) << ran.output;
    }
  }
}

}  // namespace
}  // namespace kiln
