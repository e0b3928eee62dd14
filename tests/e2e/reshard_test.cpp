// Sharded snapshots resharded at load: a snapshot two fsdp ranks wrote (each its own file, its
// row blocks) resumes on three fsdp ranks, whose snapshot resumes on one process, and under ddp
// and zero; every curve is the single process's. Each rank of the three reads about a third of
// the snapshot's tensor bytes (the manifest's own count of them), one process all of them; eval,
// sample and export read a sharded snapshot from one process.
#include <sstream>

#include <nlohmann/json.hpp>

#include "ranks.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;
using Reshard = testing::TinyRun;

// The bytes of every part the snapshot's manifest lists, and the files that hold parts.
struct ShardedManifest {
  int64_t part_bytes = 0;
  std::vector<std::string> shards;
};

ShardedManifest read_manifest(const std::string& snapshot) {
  const auto manifest = nlohmann::json::parse(testing::read_file(snapshot + "/manifest.json"));
  ShardedManifest out;
  for (const auto& [file, entry] : manifest.at("files").items()) {
    if (!entry.contains("parts")) continue;
    out.shards.push_back(file);
    for (const auto& part : entry.at("parts"))
      out.part_bytes += part.at("end").get<int64_t>() - part.at("begin").get<int64_t>();
  }
  return out;
}

// The bytes each rank read, from the resume's line on rank 0's console.
std::vector<int64_t> bytes_read(const std::string& output) {
  const std::string marker = "bytes of tensors read by rank: ";
  const size_t at = output.find(marker);
  std::vector<int64_t> out;
  if (at == std::string::npos) return out;
  std::istringstream line(output.substr(at + marker.size(), output.find('\n', at) - at));
  for (int64_t bytes = 0; line >> bytes;)
    out.push_back(bytes);
  return out;
}

TEST_F(Reshard, ATwoRankFsdpSnapshotResumesOnThreeOnOneAndUnderDdpAndZero) {
  const std::string exp = experiment();
  // 768 tokens a step: 6, 3 or 2 micro-steps of 4 x 32 on 1, 2 or 3 ranks.
  const std::string same =
      " --set train.micro_batch=4 --set train.batch_tokens=768 --set eval.every=0";
  ASSERT_EQ(
      run_kiln("run " + exp + " --name one --set train.steps=12 --set checkpoint.every=12" + same)
          .exit_code,
      0);
  const std::string logs = dir_ / "rank";
  for (const std::string name : {"a", "b", "c"}) {
    auto codes = run_ranks(2,
                           "run " + exp + " --name " + name +
                               " --set train.steps=4 --set checkpoint.every=4 "
                               "--set parallel.type=fsdp" +
                               same,
                           logs + name);
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + name + "0.log");
  }
  const ShardedManifest two = read_manifest(folder_of("a") + "/snapshots/step_000004");
  EXPECT_EQ(two.shards, (std::vector<std::string>{"shard_0.safetensors", "shard_1.safetensors"}));

  // a: 2 fsdp ranks -> 3 fsdp ranks to step 8 -> one process to 12.
  auto codes = run_ranks(3,
                         "resume a --db " + db() +
                             " --set train.steps=8 --set checkpoint.every=8 --set "
                             "parallel.type=fsdp",
                         logs + "a3_");
  ASSERT_EQ(codes, (std::vector<int>{0, 0, 0})) << testing::read_file(logs + "a3_0.log");
  const std::vector<int64_t> on_three = bytes_read(testing::read_file(logs + "a3_0.log"));
  ASSERT_EQ(on_three.size(), 3u) << testing::read_file(logs + "a3_0.log");
  for (int64_t read : on_three) {
    EXPECT_GT(read, two.part_bytes / 4);
    EXPECT_LT(read, two.part_bytes * 2 / 5);  // a third, and the small buffers every rank reads
  }
  EXPECT_EQ(read_manifest(folder_of("a") + "/snapshots/step_000008").shards.size(), 3u);
  auto back =
      run_kiln("resume a --db " + db() + " --set train.steps=12 --set parallel.type=single");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  const ShardedManifest three = read_manifest(folder_of("a") + "/snapshots/step_000008");
  EXPECT_EQ(bytes_read(back.output), (std::vector<int64_t>{three.part_bytes})) << back.output;

  // b and c: 2 fsdp ranks -> 2 ranks under ddp and under zero.
  for (const std::string strategy : {"ddp", "zero"}) {
    const std::string name = strategy == "ddp" ? "b" : "c";
    codes = run_ranks(2,
                      "resume " + name + " --db " + db() +
                          " --set train.steps=12 --set parallel.type=" + strategy,
                      logs + name + "_");
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + name + "_0.log");
  }
  for (const std::string run : {"a", "b", "c"})
    expect_same_curve("one", run, 12);

  // One process reads a sharded snapshot: eval's loss is the single process's at the same step.
  const auto loss_of = [&](const std::string& run) {
    auto eval = run_kiln("eval " + run + " --steps 2 --db " + db());
    EXPECT_EQ(eval.exit_code, 0) << eval.output;
    return std::stod(testing::scalar(db(),
                                     "select printf('%.17g', e.loss) from evals e join runs r on "
                                     "r.id = e.run_id where e.checkpoint != '' and r.name = '" +
                                         run + "'"));
  };
  EXPECT_NEAR(loss_of("c"), loss_of("one"), 1e-4);
  auto sample = run_kiln("sample c --prompt \"In the\" --tokens 4 --seed 1 --db " + db());
  EXPECT_EQ(sample.exit_code, 0) << sample.output;
  auto exported = run_kiln("export c -o " + (dir_ / "exported") + " --db " + db());
  EXPECT_EQ(exported.exit_code, 0) << exported.output;
}

}  // namespace
}  // namespace kiln
