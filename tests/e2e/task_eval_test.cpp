// Evaluation tasks through the kiln binary: scored during training (eval.tasks) and of a
// snapshot (kiln eval --task), recorded in the run store and read back by --where, runs compare,
// runs show, runs plot and the TensorBoard export; under data parallelism, tensor parallelism and
// fsdp the scores equal those one process computes on the same weights; pipeline stages are
// refused before the run starts.
#include <filesystem>

#include "byte_level_tokenizer_json.h"
#include "ranks.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;

class TaskEval : public testing::TinyRun {
 protected:
  void SetUp() override {
    TinyRun::SetUp();
    // The corpus's own sentence: which word ends it ("light" every 7th number), and its middle.
    std::string choices, said;
    for (int i = 0; i < 70; ++i) {  // 5 batches of 16: one rank of two gets a third
      choices += fmt::format(
          "{{\"context\": \"In the beginning was the word number {}, and the word was\", "
          "\"choices\": [\"light.\", \"good.\"], \"label\": {}}}\n",
          i, i % 7 == 0 ? 0 : 1);
      said += fmt::format(
          "{{\"prompt\": \"the word number {}, and the word\", \"answer\": \"was {}\"}}\n", i,
          i % 7 == 0 ? "light" : "good");
    }
    testing::write_text(dir_ / "tasks/words.jsonl", choices);
    testing::write_text(dir_ / "tasks/words.toml", "kind = \"choice\"\nitems = \"words.jsonl\"\n");
    testing::write_text(dir_ / "tasks/said.jsonl", said);
    testing::write_text(dir_ / "tasks/said.toml",
                        "kind = \"generate\"\nitems = \"said.jsonl\"\nuntil = [\".\"]\n"
                        "max_gen_toks = 10\nfilter = \"remove_whitespace\"\nlimit = 20\n");
  }

  std::string tasks() const { return " --set 'eval.tasks=" + (dir_ / "tasks/*.toml") + "'"; }

  // The run's task scores: "step task.metric value" lines in order.
  std::string scores(const std::string& run, const std::string& checkpoint = "") {
    return testing::scalar(
        db(), fmt::format("select group_concat(step || ' ' || task || '.' || metric || ' ' || "
                          "printf('%.12g', value), ' | ') from (select * from task_scores "
                          "join runs on runs.id = run_id where name = '{}' and checkpoint = '{}' "
                          "order by step, task, metric)",
                          run, checkpoint));
  }
};

TEST_F(TaskEval, ScoresDuringTrainingLandInTheStoreAndEveryView) {
  const std::string exp = experiment();
  for (const std::string seed : {"1", "2"}) {
    auto run = run_kiln("run " + exp + " --name s" + seed + " --set run.seed=" + seed +
                        " --set checkpoint.every=10 --set checkpoint.keep=3" + tasks());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("step 30: task words: acc "), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("step 10: task said: exact_match "), std::string::npos);
  }
  // Steps 10, 20, 30: words acc, acc_norm and acc_bytes, said exact_match; by the rules now.
  EXPECT_EQ(testing::scalar(db(), "select count(*) from task_scores"), "24");
  EXPECT_EQ(testing::scalar(db(), "select count(*) from task_scores where rules = 2"), "24");
  // By step 30 the model tells light from good better than chance.
  EXPECT_GT(std::stod(testing::scalar(
                db(),
                "select value from task_scores where step = 30 and metric = 'acc' and "
                "run_id = (select id from runs where name = 's1')")),
            0.5);

  auto listed =
      run_kiln("runs list --db " + db() + " --where 'words.acc@step=30 >= 0' --format csv");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find(",s1,"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find(",s2,"), std::string::npos);
  auto compared =
      run_kiln("runs compare s1 s2 --group-by run.seed --metric words.acc@step=30 --db " + db());
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  EXPECT_NE(compared.output.find("words.acc@step=30 (the last eval at or before step 30)"),
            std::string::npos)
      << compared.output;
  auto shown = run_kiln("runs show s1 --db " + db());
  EXPECT_NE(shown.output.find("task scores"), std::string::npos) << shown.output;
  EXPECT_EQ(shown.output.find("note: "), std::string::npos) << shown.output;
  // Scores computed by older rules beside today's: both views say so.
  const std::string of_s1 = " where run_id = (select id from runs where name = 's1')";
  auto set_rules = [&](int rules) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db().c_str(), &raw), SQLITE_OK);
    const std::string sql = "update task_scores set rules = " + std::to_string(rules) + of_s1;
    EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  };
  set_rules(1);
  const std::string note =
      "note: the words scores of s1 were computed by Kiln's scoring rules before version 2";
  auto mixed =
      run_kiln("runs compare s1 s2 --group-by run.seed --metric words.acc@step=30 --db " + db());
  EXPECT_NE(mixed.output.find(note), std::string::npos) << mixed.output;
  EXPECT_NE(run_kiln("runs show s1 --db " + db()).output.find("note: the said, words scores of s1"),
            std::string::npos);
  set_rules(2);
  auto plotted = run_kiln("runs plot s1 s2 --metric said.exact_match -o " + (dir_ / "said.svg") +
                          " --db " + db());
  EXPECT_EQ(plotted.exit_code, 0) << plotted.output;

  auto exported =
      run_kiln("runs export s1 --format tensorboard -o " + (dir_ / "tb") + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::string events;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_ / "tb"))
    if (entry.is_regular_file()) events += testing::read_file(entry.path().string());
  EXPECT_NE(events.find("task/words/acc_norm"), std::string::npos);
  EXPECT_NE(events.find("task/said/exact_match"), std::string::npos);

  // Of a snapshot: the same scores as during training at that step, recorded under its label.
  auto evaluated = run_kiln("eval s1 --task words --db " + db());
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  EXPECT_NE(evaluated.output.find("task words: acc "), std::string::npos) << evaluated.output;
  const std::string during = scores("s1");
  const std::string label =
      testing::scalar(db(), "select checkpoint from task_scores where checkpoint != '' limit 1");
  EXPECT_EQ(label, "step_000030");
  EXPECT_NE(during.find(scores("s1", label)), std::string::npos)
      << during << " ~ " << scores("s1", label);

  // A resume from step 10 scores steps 20 and 30 again: their old rows go, none is doubled, and
  // the snapshot's own scores (kiln eval's) stay.
  auto resumed = run_kiln("resume s2 --checkpoint 10 --set train.steps=30 --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(testing::scalar(db(),
                            "select count(*) from task_scores join runs on runs.id = run_id "
                            "where name = 's2' and checkpoint = ''"),
            "12");
  EXPECT_EQ(testing::scalar(db(), "select count(*) from task_scores where checkpoint != ''"), "3");
}

// A run that names tasks and never evaluates its loss (eval.every = 0) still scores them, at its
// last step: the tasks are what it asked to be measured on.
TEST_F(TaskEval, TasksAreScoredAtTheLastStepEvenWithoutEvalEvery) {
  auto run = run_kiln("run " + experiment() +
                      " --name quiet --set eval.every=0 --set train.steps=12" + tasks());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(testing::scalar(db(), "select group_concat(distinct step) from task_scores"), "12");
  EXPECT_EQ(testing::scalar(db(), "select count(*) from task_scores"), "4");
}

// A sweep ranked by a task's metric starts on a store that holds no score of it yet (its base's
// eval.tasks declares it), ranks its members by it, and `kiln sweep status` and `kiln sweep best`
// take the sweep file as well as the sweep's name, best ranking by the file's metric.
TEST_F(TaskEval, ASweepRankedByATaskMetricStartsOnAFreshStore) {
  const std::string file = dir_ / "by_task.toml";
  testing::write_text(file, "base = \"" + experiment() +
                                "\"\nname = \"bt\"\n[search]\ntype = \"random\"\ntrials = 2\n"
                                "seed = 3\nmetric = \"words.acc\"\nmode = \"max\"\n[space]\n"
                                "optimizer.lr = { log_uniform = [1e-3, 3e-2] }\n[set]\n"
                                "train.steps = 10\neval.every = 10\neval.tasks = \"" +
                                (dir_ / "tasks/words.toml") + "\"\n");
  ASSERT_FALSE(std::filesystem::exists(db()));
  auto ran = run_kiln("sweep " + file);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("sorted by -max(words.acc)"), std::string::npos) << ran.output;
  const std::string winner = testing::scalar(
      db(),
      "select name from runs join task_scores on runs.id = run_id where sweep = 'bt' and "
      "metric = 'acc' order by value desc, runs.id limit 1");
  for (const std::string& named : {file, std::string("bt")}) {
    auto best = run_kiln("sweep best " + named + " --db " + db());
    ASSERT_EQ(best.exit_code, 0) << best.output;
    // A name carries no metric: best_val ranks unless --by says otherwise.
    const std::string by = named == file ? "by -max(words.acc)" : "by best_val";
    EXPECT_NE(best.output.find(by), std::string::npos) << named << best.output;
    if (named == file) {
      EXPECT_NE(best.output.find("#   " + winner + " (id "), std::string::npos) << best.output;
    }
    auto status = run_kiln("sweep status " + named + " --db " + db());
    ASSERT_EQ(status.exit_code, 0) << status.output;
    EXPECT_NE(status.output.find("sweep 'bt': 2 members, 2 completed"), std::string::npos)
        << status.output;
  }
  testing::expect_one_error_line(run_kiln("sweep best bt --by nonsense --db " + db()),
                                 "sweep best bt --by nonsense", "--by 'nonsense': ");
}

// One process, 2 ddp ranks, tp 2 and 2 fsdp ranks train the same curve; each scores the tasks
// on its weights at step 20, and kiln eval of that step's snapshot (one process) gives the same
// scores: the sharding over ranks changes nothing.
TEST_F(TaskEval, ParallelRanksScoreWhatOneProcessScoresOnTheSameWeights) {
  const std::string exp = experiment();
  const std::string same =
      " --set train.steps=20 --set train.micro_batch=4 "
      "--set train.batch_tokens=256 --set checkpoint.every=20" +
      tasks();
  auto single = run_kiln("run " + exp + " --name one" + same);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  for (const std::string strategy : {"ddp", "tensor", "fsdp"}) {
    SCOPED_TRACE(strategy);
    const std::string logs = dir_ / (strategy + "_rank");
    auto codes =
        run_ranks(2,
                  "run " + exp + " --name " + strategy + same + " --set parallel.type=" + strategy +
                      (strategy == "tensor" ? " --set parallel.tp=2" : ""),
                  logs);
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
    auto evaluated =
        run_kiln("eval " + strategy + " --task '" + (dir_ / "tasks/*.toml") + "' --db " + db());
    ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
    const std::string during = scores(strategy);
    EXPECT_NE(during.find(scores(strategy, "step_000020")), std::string::npos)
        << during << " ~ " << scores(strategy, "step_000020");
    // And the curve is one process's, so are its scores here.
    EXPECT_EQ(during, scores("one"));
  }
}

// The block of a `runs compare --group-by` report that starts with `title`.
std::string block_of(const std::string& report, const std::string& title) {
  const size_t at = report.find("\n" + title);
  if (at == std::string::npos) return "";
  return report.substr(at + 1, report.find("\n\n", at + 1) - at - 1);
}

// The line of `text` that starts, after its indent, with `label`.
std::string line_of(const std::string& text, const std::string& label) {
  const size_t at = text.find("\n  " + label + " ");
  if (at == std::string::npos) return "";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

// The stored score, as `runs compare` prints a mean: six decimals.
std::string stored_score(const std::string& db, const std::string& run, int64_t step) {
  return fmt::format("{:.6f}",
                     testing::query_doubles(db, fmt::format("select value from task_scores join "
                                                            "runs on runs.id = run_id where "
                                                            "name = '{}' and step = {} and "
                                                            "metric = 'acc'",
                                                            run, step))
                         .at(0));
}

// Scores of `kiln eval --task` (under a snapshot's label) are read by `runs compare --metric` as
// by --where: the one way a metric at a point is read.
TEST_F(TaskEval, CompareReadsASnapshotsScoresAsWhereDoes) {
  const std::string exp = experiment();
  for (const std::string seed : {"1", "2"}) {
    auto run = run_kiln("run " + exp + " --name e" + seed + " --set run.seed=" + seed +
                        " --set checkpoint.every=30");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    auto evaluated =
        run_kiln("eval e" + seed + " --task " + (dir_ / "tasks/words.toml") + " --db " + db());
    ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  }
  EXPECT_EQ(testing::scalar(db(), "select group_concat(distinct checkpoint) from task_scores"),
            "step_000030");
  auto listed =
      run_kiln("runs list --db " + db() + " --where 'words.acc@step=30 >= 0' --format csv");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find(",e1,"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find(",e2,"), std::string::npos) << listed.output;
  auto compared =
      run_kiln("runs compare e1 e2 --group-by run.seed --metric words.acc@step=30 --db " + db());
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  const std::string block = block_of(compared.output, "words.acc@step=30 ");
  EXPECT_NE(line_of(block, "run.seed=1").find(stored_score(db(), "e1", 30)), std::string::npos)
      << compared.output;
  EXPECT_NE(line_of(block, "run.seed=2").find(stored_score(db(), "e2", 30)), std::string::npos)
      << compared.output;
}

// A Hugging Face directory's scores (`kiln eval --hf`, a run of no steps) are at step 0 for
// --where and `runs compare --metric`, and its config holds no key it never had.
TEST_F(TaskEval, AHfDirectorysScoresAreAtStepZeroAndItsConfigHasNoTrainingKeys) {
  auto trained = run_kiln("run " + experiment() +
                          " --name src --set model.vocab_size=256 --set train.steps=2 "
                          "--set eval.every=0 --set checkpoint.every=2");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  for (const std::string folder : {"gpt_a", "gpt_b"}) {
    auto exported = run_kiln("export src -o " + (dir_ / folder) + " --db " + db());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    testing::write_byte_tokenizer_json(dir_ / (folder + "/tokenizer.json"));
    auto scored = run_kiln("eval --hf " + (dir_ / folder) + " --task " +
                           (dir_ / "tasks/words.toml") + " --db " + db());
    ASSERT_EQ(scored.exit_code, 0) << scored.output;
  }
  auto listed =
      run_kiln("runs list --db " + db() + " --where 'words.acc@step=0 >= 0' --format csv");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find(",hf-gpt_a,"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find(",hf-gpt_b,"), std::string::npos) << listed.output;
  auto compared = run_kiln(
      "runs compare hf-gpt_a hf-gpt_b --group-by model.n_layer --metric "
      "words.acc@step=0 --db " +
      db());
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  EXPECT_NE(block_of(compared.output, "words.acc@step=0 ").find(stored_score(db(), "hf-gpt_a", 0)),
            std::string::npos)
      << compared.output;

  // Beside the run it came from: keys the directory never had are absent, not defaults.
  auto side_by_side = run_kiln("runs compare src hf-gpt_a --db " + db());
  ASSERT_EQ(side_by_side.exit_code, 0) << side_by_side.output;
  for (const std::string key : {"optimizer.lr", "train.steps", "schedule.type"}) {
    const std::string line = line_of(side_by_side.output, key);
    ASSERT_FALSE(line.empty()) << key << "\n" << side_by_side.output;
    EXPECT_EQ(line.substr(line.find_last_not_of(' ')), "-") << line;
  }
}

TEST_F(TaskEval, PipelineStagesAreRefusedBeforeTheRunStarts) {
  const std::string logs = dir_ / "pp_rank";
  auto codes = run_ranks(2,
                         "run " + experiment() +
                             " --name pp --set parallel.type=pipeline --set parallel.pp=2 "
                             "--set parallel.microbatches=2" +
                             tasks(),
                         logs);
  EXPECT_EQ(codes, (std::vector<int>{2, 2}));
  EXPECT_NE(testing::read_file(logs + "0.log")
                .find("eval.tasks are not scored under pipeline parallelism"),
            std::string::npos)
      << testing::read_file(logs + "0.log");
  EXPECT_FALSE(std::filesystem::exists(db()));  // refused before the run store was opened
}

}  // namespace
}  // namespace kiln
