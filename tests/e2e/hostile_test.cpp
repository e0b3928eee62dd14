// Hostile input: the corpus in tests/hostile/cases.txt, each case a kiln command line that is a
// user's mistake (bad experiment and sweep files, bad --set values and flags, broken shards and
// run stores, unwritable paths, snapshots of another model). Every case must exit 2 with exactly
// one line on stderr, `kiln: error: ...`: no signal, no abort, no stack trace, no internal error;
// and no run store in the scratch directory may be left with a run 'running'.
//
// The fixtures (a prepared corpus, broken shards and stores, small trained runs whose snapshots
// or data are then damaged) are made once; the cases then run one after another through the
// real binary. One test runs them all, so that ctest (which starts each test in its own process)
// builds the fixtures once; every failing case is reported by its name.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/data/shard.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::run_kiln;
using testing::write_text;

struct Case {
  std::string name;
  std::string args;
  std::string expect;  // text the error line must contain; empty = any
  int line = 0;
};

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

const std::string& hostile_dir() {
  static const std::string dir = std::string(KILN_SOURCE_DIR) + "/tests/hostile";
  return dir;
}

std::vector<Case> load_cases() {
  std::ifstream in(hostile_dir() + "/cases.txt");
  std::vector<Case> cases;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    Case c;
    c.line = number;
    const auto space = line.find_first_of(" \t");
    c.name = line.substr(0, space);
    std::string rest = space == std::string::npos ? "" : line.substr(space);
    const auto arrow = rest.rfind("=>");
    if (arrow != std::string::npos) {
      c.expect = trim(rest.substr(arrow + 2));
      rest = rest.substr(0, arrow);
    }
    c.args = trim(rest);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string int32s(std::initializer_list<int32_t> values, size_t total) {
  std::vector<int32_t> header(total, 0);
  std::copy(values.begin(), values.end(), header.begin());
  return std::string(reinterpret_cast<const char*>(header.data()), total * sizeof(int32_t));
}

std::string uint16s(size_t count, uint16_t value) {
  std::vector<uint16_t> tokens(count, value);
  return std::string(reinterpret_cast<const char*>(tokens.data()), count * sizeof(uint16_t));
}

// A version-1 .npy file: magic, version, header length, the header dict, then `payload`.
std::string npy(const std::string& dict, const std::string& payload, int header_len = -1) {
  std::string header = dict + "\n";
  const int len = header_len >= 0 ? header_len : static_cast<int>(header.size());
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  return out + header + payload;
}

// A fixture that could not be made: the cases would test nothing.
struct SetupFailed {
  std::string what;
};

void require(bool ok, const std::string& what) {
  if (!ok) throw SetupFailed{what};
}

void write_store(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  char* error = nullptr;
  int rc = sqlite3_open(path.c_str(), &db);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string why = error ? error : sqlite3_errmsg(db);
  sqlite3_free(error);
  sqlite3_close(db);
  require(rc == SQLITE_OK, path + ": " + why);
}

bool is_sqlite_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[16] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == 16 && std::string(magic, 16) == std::string("SQLite format 3\0", 16);
}

class HostileInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new ScratchDir();
    const std::string s = scratch_->str();
    fs::create_directories(s + "/cwd");  // kiln's defaults (runs/kiln.db) land here
    // The corpus folder, rendered: {S} becomes the scratch directory.
    for (const auto& entry : fs::directory_iterator(hostile_dir())) {
      if (entry.path().extension() != ".toml") continue;
      write_text(s + "/hostile/" + entry.path().filename().string(),
                 replace_all(read_file(entry.path().string()), "{S}", s));
    }
    try {
      make_data(s);
      make_stores(s);
      make_runs(s);
    } catch (const SetupFailed& e) {
      setup_error_ = e.what;
    }
  }

  static void TearDownTestSuite() {
    delete scratch_;
    scratch_ = nullptr;
  }

  static void make_data(const std::string& s) {
    std::string text;
    for (int i = 0; i < 200; ++i) {
      text += fmt::format("In the beginning was the word number {}, and the word was {}.\n", i,
                          i % 7 == 0 ? "light" : "good");
    }
    write_text(s + "/corpus.txt", text);
    write_text(s + "/empty.txt", "");
    auto prepared =
        run_kiln(fmt::format("prepare {0}/corpus.txt --out {0}/data --val-fraction 0.1 "
                             "--test-fraction 0.1",
                             s));
    require(prepared.exit_code == 0, "kiln prepare: " + prepared.output);
    for (const char* copy : {"data_moved", "data_shrunk", "data_notok", "data_badtok"})
      fs::copy(s + "/data", s + "/" + copy, fs::copy_options::recursive);

    const std::string d = s + "/shards/";
    write_bytes(d + "empty.bin", "");
    write_bytes(d + "short.bin", "0123456789");
    write_bytes(d + "magic.bin",
                int32s({12345, kShardVersion, 100}, kShardHeaderInts) + uint16s(100, 1));
    write_bytes(d + "version.bin",
                int32s({kShardMagic, 7, 100}, kShardHeaderInts) + uint16s(100, 1));
    write_bytes(d + "truncated.bin",
                int32s({kShardMagic, kShardVersion, 1000}, kShardHeaderInts) + uint16s(100, 1));
    write_bytes(d + "negcount.bin",
                int32s({kShardMagic, kShardVersion, -5}, kShardHeaderInts) + uint16s(100, 1));
    fs::create_directories(d + "dir.bin");
    require(::mkfifo((d + "fifo.bin").c_str(), 0644) == 0, "mkfifo " + d + "fifo.bin");
    write_shard(d + "tiny.bin", std::vector<uint16_t>(10, 1));
    write_shard(d + "bigvocab.bin", std::vector<uint16_t>(100, 200));
    // The first shard is fine; the second, reached at step 3, holds an id the model lacks.
    write_shard(d + "mix_000000.bin", std::vector<uint16_t>(100, 3));
    write_shard(d + "mix_000001.bin", std::vector<uint16_t>(100, 200));
    write_bytes(d + "odd.raw", std::string(101, '\1'));
    write_bytes(d + "nomagic.npy", "this is not numpy at all, just text\n");
    const std::string ok_dict = "{'descr': '<u2', 'fortran_order': False, 'shape': ";
    write_bytes(d + "float.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }",
                                     std::string(400, '\0')));
    write_bytes(d + "matrix.npy", npy(ok_dict + "(10, 10), }", uint16s(100, 1)));
    write_bytes(d + "badshape.npy", npy(ok_dict + "(abc,), }", uint16s(100, 1)));
    write_bytes(d + "hugeshape.npy",
                npy(ok_dict + "(99999999999999999999999,), }", uint16s(100, 1)));
    write_bytes(d + "maxshape.npy", npy(ok_dict + "(9223372036854775807,), }", uint16s(100, 1)));
    write_bytes(d + "longheader.npy", npy(ok_dict + "(100,), }", uint16s(100, 1), 60000));
    write_bytes(d + "truncated.npy", npy(ok_dict + "(1000,), }", uint16s(100, 1)));

    write_text(s + "/a_file", "a regular file: nothing can be created under it\n");
    fs::create_directories(s + "/dir.db");
    write_bytes(s + "/invalid_utf8.toml", "[run]\nname = \"\xff\xfe\xfd\"\n");
    write_bytes(s + "/nul_byte.toml", std::string("[run]\nseed = 1\0\n", 16));
    fs::copy_file(s + "/data/train_000000.bin", s + "/binary.toml");
    write_bytes(s + "/weights/garbage.safetensors", "not safetensors, only some text\n");
  }

  static void make_stores(const std::string& s) {
    write_text(s + "/not_sqlite.db", "This is a text file, not a SQLite database.\n");
    write_store(s + "/other_schema.db", "CREATE TABLE runs (who TEXT, what TEXT)");
    write_store(s + "/future.db", "CREATE TABLE runs (id INTEGER); PRAGMA user_version = 99;");
  }

  static void train(const std::string& name, const std::string& extra = "") {
    auto result = run_kiln(
        fmt::format("run {}/hostile/base.toml --name {} {}", scratch_->str(), name, extra));
    require(result.exit_code == 0, "training run '" + name + "': " + result.output);
  }

  // A run's column in {DB}: its folder, uuid or config hash.
  static std::string run_column(const std::string& run, const std::string& column) {
    return testing::scalar(scratch_->str() + "/kiln.db",
                           "select " + column + " from runs where name = '" + run + "'");
  }

  // `to`'s snapshots become copies of `from`'s; `forged`: with manifests that name `to` (its
  // uuid and config hash), so that the snapshot passes as the run's own and only loading it
  // can tell that it was taken with another model or optimizer.
  static void replace_snapshots(const std::string& from, const std::string& to, bool forged) {
    const std::string target = run_column(to, "folder") + "/snapshots";
    fs::remove_all(target);
    fs::copy(run_column(from, "folder") + "/snapshots", target, fs::copy_options::recursive);
    for (const auto& snapshot : fs::directory_iterator(target)) {
      if (!forged) continue;
      const std::string path = (snapshot.path() / "manifest.json").string();
      auto manifest = nlohmann::json::parse(read_file(path));
      manifest["run"] = run_column(to, "uuid");
      manifest["config_hash"] = run_column(to, "config_hash");
      write_text(path, manifest.dump());
    }
  }

  static void make_runs(const std::string& s) {
    train("done");
    train("nosnap", "--set checkpoint.every=0");
    train("notest", "--set 'data.test=\"\"'");
    train("small", "--set model.n_embd=8");
    train("mixed");
    replace_snapshots("small", "mixed", /*forged=*/true);
    train("sgdrun", "--set optimizer.type=sgd --set optimizer.momentum=0.9");
    train("mixedopt");
    replace_snapshots("sgdrun", "mixedopt", /*forged=*/true);
    train("foreign");
    replace_snapshots("done", "foreign", /*forged=*/false);
    train("damaged");
    for (const auto& snapshot :
         fs::directory_iterator(run_column("damaged", "folder") + "/snapshots"))
      fs::resize_file(snapshot.path() / "shard_0.safetensors", 100);
    auto data_of = [&](const std::string& dir) {
      return fmt::format(
          "--set 'data.train={0}/{1}/train_*.bin' --set 'data.val={0}/{1}/val_*.bin'", s, dir);
    };
    train("moved", data_of("data_moved"));
    fs::remove_all(s + "/data_moved");
    train("shrunk", data_of("data_shrunk"));
    write_shard(s + "/data_shrunk/train_000000.bin", std::vector<uint16_t>(50, 1));
    train("notok", data_of("data_notok"));
    fs::remove(s + "/data_notok/tokenizer.json");
    train("badtok", data_of("data_badtok"));
    write_text(s + "/data_badtok/tokenizer.json", "{\"type\": \"char\", \"bytes\": \"abc\"}\n");

    auto exported =
        run_kiln(fmt::format("export small --db {0}/kiln.db -o {0}/weights/small.safetensors", s));
    require(exported.exit_code == 0, "kiln export small: " + exported.output);
    const std::string weights = read_file(s + "/weights/small.safetensors");
    write_bytes(s + "/weights/truncated.safetensors", weights.substr(0, weights.size() / 2));
    // done's own weights with their first float made NaN: the shapes fit {EXP}, the values not.
    auto done_weights =
        run_kiln(fmt::format("export done --db {0}/kiln.db -o {0}/weights/nan.safetensors", s));
    require(done_weights.exit_code == 0, "kiln export done: " + done_weights.output);
    std::string nan_weights = read_file(s + "/weights/nan.safetensors");
    uint64_t header = 0;
    std::memcpy(&header, nan_weights.data(), sizeof header);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(&nan_weights[8 + header], &nan, sizeof nan);
    write_bytes(s + "/weights/nan.safetensors", nan_weights);
    // int8 LoRA runs over done's weights, whose base then moves away (int8gone) or is overwritten
    // by other weights of the same shapes (int8changed): eval and export read an int8 base again
    // for its scales.
    for (const std::string run : {"int8gone", "int8changed"}) {
      const std::string base = s + "/weights/" + run + ".safetensors";
      auto exported_base = run_kiln(fmt::format("export done --db {}/kiln.db -o {}", s, base));
      require(exported_base.exit_code == 0, "kiln export done: " + exported_base.output);
      train(run,
            "--set adapter.type=lora --set adapter.base_dtype=int8 --set model.init_from=" + base);
    }
    fs::remove(s + "/weights/int8gone.safetensors");
    // A LoRA run of a model without a Hugging Face form: no PEFT folder to export.
    auto tlm = run_kiln(fmt::format(
        "run {}/hostile/tlm.toml --name tlmlora --set adapter.type=lora --set checkpoint.every=2",
        s));
    require(tlm.exit_code == 0, "training run 'tlmlora': " + tlm.output);
    auto other_weights = run_kiln(fmt::format(
        "export done --checkpoint 1 --db {0}/kiln.db -o {0}/weights/step1.safetensors", s));
    require(other_weights.exit_code == 0, "kiln export done: " + other_weights.output);
    fs::rename(s + "/weights/step1.safetensors", s + "/weights/int8changed.safetensors");
    // A Hugging Face folder whose config.json is a folder.
    write_bytes(s + "/weights/dir_config/model.safetensors", weights);
    fs::create_directories(s + "/weights/dir_config/config.json");
    // Half a page of a real store: the header survives, the schema does not.
    write_bytes(s + "/truncated.db", read_file(s + "/kiln.db").substr(0, 2048));
  }

  // {S}, {H}, {EXP}, {DB}, {SRC} as cases.txt describes them.
  static std::string expand(const std::string& text) {
    const std::string s = scratch_->str();
    std::string out = replace_all(text, "{EXP}", s + "/hostile/base.toml");
    out = replace_all(out, "{H}", s + "/hostile");
    out = replace_all(out, "{DB}", s + "/kiln.db");
    out = replace_all(out, "{SRC}", KILN_SOURCE_DIR);
    return replace_all(out, "{S}", s);
  }

  // Runs one case; returns what is wrong with its outcome, or "" when it behaved.
  static std::string check(const Case& c) {
    const std::string s = scratch_->str();
    const std::string out = s + "/case.out", err = s + "/case.err";
    // A memory cap, so that a size check that fails to stop a huge model cannot take the machine;
    // no GPU, so that every case means the same on any machine; one BLAS and OpenMP thread, as
    // each thread's stack and buffers count against the cap, which a many-core machine would
    // otherwise reach before any model is built.
    // Leading NAME=VALUE words are the case's environment (RANK=12abc run ...).
    static const std::regex assignments("^(([A-Z][A-Z0-9_]*=[^ ]* )*)(.*)$");
    std::smatch parts;
    const std::string args = expand(c.args);
    std::regex_match(args, parts, assignments);
    const std::string command = fmt::format(
        "cd '{}/cwd' && ulimit -v 8000000 && CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 "
        "{}exec timeout 120 '{}' {} </dev/null >'{}' 2>'{}'",
        s, parts[1].str(), KILN_BINARY, parts[3].str(), out, err);
    const int status = std::system(command.c_str());
    const std::string stderr_text = read_file(err);
    if (std::getenv("KILN_HOSTILE_VERBOSE")) std::cout << c.name << ": " << stderr_text;
    std::vector<std::string> problems;
    int code = -1;
    if (WIFSIGNALED(status)) {
      problems.push_back(fmt::format("killed by signal {}", WTERMSIG(status)));
    } else {
      code = WEXITSTATUS(status);
      if (code == 124) problems.push_back("timed out after 120 s");
      if (code > 128) problems.push_back(fmt::format("killed by signal {}", code - 128));
      if (code != 2) problems.push_back(fmt::format("exit code {}, not 2", code));
    }
    const auto newlines = std::count(stderr_text.begin(), stderr_text.end(), '\n');
    if (newlines != 1 || stderr_text.back() != '\n') {
      problems.push_back(fmt::format("stderr has {} lines, not one", newlines));
    }
    if (stderr_text.rfind("kiln: error: ", 0) != 0) {
      problems.push_back("stderr does not start with 'kiln: error: '");
    }
    for (const char* bad : {"internal error", "terminate called", "Exception raised from",
                            "Aborted", "core dumped", "Segmentation fault"}) {
      if (stderr_text.find(bad) != std::string::npos) {
        problems.push_back(fmt::format("stderr says '{}'", bad));
      }
    }
    const std::string expect = expand(c.expect);
    if (!expect.empty() && stderr_text.find(expect) == std::string::npos) {
      problems.push_back(fmt::format("the error does not mention '{}'", expect));
    }
    for (const auto& entry : fs::recursive_directory_iterator(s)) {
      if (!entry.is_regular_file() || !is_sqlite_file(entry.path())) continue;
      const std::string running =
          testing::scalar(entry.path().string(),
                          "select group_concat(name, ', ') from runs where status = "
                          "'running'");
      // Each such row is blamed on the case that left it, not on every case after it.
      if (!running.empty() && running != "NULL" &&
          reported_running_.insert(entry.path().string() + ": " + running).second) {
        problems.push_back(
            fmt::format("runs left 'running' in {}: {}", entry.path().string(), running));
      }
    }
    if (problems.empty()) return "";
    std::string stdout_text = read_file(out);
    if (stdout_text.size() > 2000)
      stdout_text = "..." + stdout_text.substr(stdout_text.size() - 2000);
    return fmt::format("{}\n    kiln {}\n    stderr: {}    stdout: {}", fmt::join(problems, "; "),
                       expand(c.args), stderr_text.empty() ? "(empty)\n" : stderr_text,
                       stdout_text.empty() ? "(empty)" : stdout_text);
  }

  static ScratchDir* scratch_;
  static std::string setup_error_;  // the fixture that could not be made, if any
  static std::set<std::string> reported_running_;
};

ScratchDir* HostileInput::scratch_ = nullptr;
std::string HostileInput::setup_error_;
std::set<std::string> HostileInput::reported_running_;

TEST(HostileCorpus, HasAHundredUniquelyNamedCasesWhoseFilesExist) {
  const auto cases = load_cases();
  EXPECT_GE(cases.size(), 100u);
  std::set<std::string> names, used = {"base.toml", "tlm.toml"};
  for (const auto& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << "cases.txt:" << c.line << ": duplicate " << c.name;
    for (size_t at = c.args.find("{H}/"); at != std::string::npos;
         at = c.args.find("{H}/", at + 1)) {
      const std::string file = c.args.substr(at + 4, c.args.find(' ', at) - at - 4);
      used.insert(file);
      EXPECT_TRUE(fs::exists(hostile_dir() + "/" + file))
          << "cases.txt:" << c.line << ": " << c.name << " names a missing file " << file;
    }
  }
  for (const auto& entry : fs::directory_iterator(hostile_dir())) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() == ".toml") {
      EXPECT_TRUE(used.count(file)) << "tests/hostile/" << file << " is used by no case";
    }
  }
}

TEST_F(HostileInput, EveryCaseExitsTwoWithOneErrorLine) {
  // Only the cases whose names start with KILN_HOSTILE_ONLY, when set (to rerun one quickly);
  // KILN_HOSTILE_VERBOSE=1 prints every case's error line, to read them all.
  ASSERT_TRUE(setup_error_.empty()) << "a fixture could not be made: " << setup_error_;
  const char* only = std::getenv("KILN_HOSTILE_ONLY");
  std::vector<std::string> failed;
  const auto start = std::chrono::steady_clock::now();
  size_t ran = 0;
  for (const auto& c : load_cases()) {
    if (only && c.name.rfind(only, 0) != 0) continue;
    ++ran;
    const std::string problem = check(c);
    if (!problem.empty()) {
      failed.push_back(c.name);
      ADD_FAILURE() << "hostile case " << c.name << " (tests/hostile/cases.txt:" << c.line
                    << "): " << problem;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("{} hostile cases in {:.1f} s; {} failed{}{}\n", ran, seconds,
                           failed.size(), failed.empty() ? "" : ": ", fmt::join(failed, ", "));
}

}  // namespace
}  // namespace kiln
