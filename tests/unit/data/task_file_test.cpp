// Task files (core/data/task_file.h): the text asked, spelled out here for a pool the test
// knows; few-shot draws that never pick the item itself and follow the seed; the harness's
// first_n sampler; its exact_match options; and bad files and items named by file:line(:col).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/data/task_file.h"
#include "core/train/task_suite.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::user_error_of;
using testing::write_text;

class TaskFile : public ::testing::Test {
 protected:
  // A task file `name`.toml beside items.jsonl holding `items`.
  std::string task(const std::string& keys, const std::string& items,
                   const std::string& name = "t") {
    write_text(dir_ / "items.jsonl", items);
    const std::string path = dir_ / (name + ".toml");
    write_text(path, keys);
    return path;
  }

  testing::TempDir dir_;
};

const char* const kChoiceItems =
    R"({"context": "a b", "choices": ["c", "d"], "label": 0}
{"context": "e f", "choices": ["g", "h", "i"], "label": 2}

{"context": "j k", "choices": ["l", "m"], "label": 1}
)";

TEST_F(TaskFile, ReadsDefaultsAndItemsBesideTheFile) {
  const TaskSpec spec = read_task_spec(
      task("name = \"cloze\"\nkind = \"choice\"\nitems = \"items.jsonl\"\n", kChoiceItems));
  EXPECT_EQ(spec.name, "cloze");
  EXPECT_EQ(spec.kind, TaskKind::kChoice);
  EXPECT_EQ(spec.items, dir_ / "items.jsonl");
  EXPECT_EQ(spec.num_fewshot, 0);
  EXPECT_EQ(spec.target_delimiter, " ");
  EXPECT_EQ(spec.fewshot_delimiter, "\n\n");
  const Task t = load_task(spec);
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.requests[1].context, "e f");
  EXPECT_EQ(t.requests[1].label, 2);
  EXPECT_EQ(t.requests[1].continuations, (std::vector<std::string>{" g", " h", " i"}));
  EXPECT_EQ(t.requests[2].line, 4);  // the blank line is skipped, not counted away
}

TEST_F(TaskFile, FewShotExamplesAreOtherItemsDrawnBySeed) {
  std::string items;
  for (int i = 0; i < 12; ++i)
    items += "{\"context\": \"q" + std::to_string(i) + "\", \"choices\": [\"a\", \"b\"], " +
             "\"label\": " + std::to_string(i % 2) + "}\n";
  const std::string path = task(
      "kind = \"choice\"\nitems = \"items.jsonl\"\nnum_fewshot = 3\nfewshot_delimiter = \"|\"\n"
      "seed = 5\n",
      items);
  const Task all = load_task(read_task_spec(path));
  for (const TaskRequest& r : all.requests) {
    // Three examples "qK a|" or "qK b|" (the label's choice), then the item's own context.
    const std::string own = "q" + std::to_string(r.item);
    ASSERT_EQ(r.context.substr(r.context.size() - own.size()), own);
    std::set<std::string> shots;
    size_t at = 0;
    for (int k = 0; k < 3; ++k) {
      const size_t bar = r.context.find('|', at);
      ASSERT_NE(bar, std::string::npos) << r.context;
      const std::string shot = r.context.substr(at, bar - at);
      const int index = std::stoi(shot.substr(1, shot.find(' ') - 1));
      EXPECT_EQ(shot, "q" + std::to_string(index) + (index % 2 ? " b" : " a"));
      EXPECT_NE(index, r.item) << "an item is never its own example";
      shots.insert(shot);
      at = bar + 1;
    }
    EXPECT_EQ(shots.size(), 3u) << "three different examples";
  }
  // The draws are a function of the seed: the same again, other ones for another seed.
  EXPECT_EQ(load_task(read_task_spec(path)).requests[7].context, all.requests[7].context);
  write_text(path,
             "kind = \"choice\"\nitems = \"items.jsonl\"\nnum_fewshot = 3\nfewshot_delimiter = "
             "\"|\"\nseed = 6\n");
  const Task reseeded = load_task(read_task_spec(path));
  int differ = 0;
  for (size_t i = 0; i < all.requests.size(); ++i)
    differ += reseeded.requests[i].context != all.requests[i].context;
  EXPECT_GT(differ, 6);
}

TEST_F(TaskFile, ChatTemplateLaysOutTurns) {
  const Task t = load_task(read_task_spec(task(
      "kind = \"generate\"\nitems = \"items.jsonl\"\ntemplate = \"plain\"\nnum_fewshot = 1\n",
      "{\"prompt\": \"one?\", \"answer\": \"1\"}\n{\"prompt\": \"two?\", \"answer\": \"2\"}\n")));
  EXPECT_EQ(t.requests[0].context, "User: two?\nAssistant: 2\n\nUser: one?\nAssistant: ");
  EXPECT_EQ(t.requests[0].until, std::vector<std::string>{"\n\n"});
}

// lm_eval/api/samplers.py FirstNSampler: the pool's first items, less any equal to the item.
TEST_F(TaskFile, FirstNTakesThePoolsFirstItemsLessTheItemAsked) {
  const Task t = load_task(read_task_spec(task(
      "kind = \"generate\"\nitems = \"items.jsonl\"\nnum_fewshot = 2\n"
      "fewshot_sampler = \"first_n\"\nfewshot_delimiter = \"|\"\n",
      "{\"prompt\": \"p0\", \"answer\": \"a0\"}\n{\"prompt\": \"p1\", \"answer\": \"a1\"}\n"
      "{\"prompt\": \"p2\", \"answer\": \"a2\"}\n{\"prompt\": \"p0\", \"answer\": \"a0\"}\n")));
  EXPECT_EQ(t.requests[0].context, "p1 a1|p2 a2|p0");  // item 3 equals item 0: left out too
  EXPECT_EQ(t.requests[1].context, "p0 a0|p2 a2|p1");
  EXPECT_EQ(t.requests[2].context, "p0 a0|p1 a1|p2");
  EXPECT_EQ(t.requests[3].context, "p1 a1|p2 a2|p0");
  EXPECT_EQ(t.requests[0].until, std::vector<std::string>{"|"});  // the fewshot delimiter
}

// lm_eval/api/metrics.py exact_match_hf_evaluate, after the remove_whitespace filter
// (lm_eval/filters/extraction.py: strip()); the expected values are Python's.
TEST(TaskAnswers, ExactMatchOptionsAndStopStrings) {
  TaskSpec spec;
  EXPECT_FALSE(exact_match(spec, " two", "two"));  // no filter: the space counts
  spec.remove_whitespace = true;
  EXPECT_TRUE(exact_match(spec, " two\n", "two"));
  EXPECT_FALSE(exact_match(spec, "two", " two"));  // the filter is the output's only
  EXPECT_FALSE(exact_match(spec, "Forty-Two!", "forty-two"));
  spec.ignore_case = true;
  EXPECT_FALSE(exact_match(spec, "Forty-Two!", "forty-two"));
  spec.ignore_punctuation = true;
  EXPECT_TRUE(exact_match(spec, "Forty-Two!", "fortytwo"));
  EXPECT_TRUE(exact_match(spec, "ÉTÉ", "été"));    // "ÉTÉ".lower() == "été"
  spec.regexes_to_ignore = {"\\d+ ", "^[Tt]he "};  // in order, on both texts
  EXPECT_TRUE(exact_match(spec, "The 12 answer", "the answer"));
  EXPECT_FALSE(exact_match(spec, "answer 12", "answer"));
  EXPECT_TRUE(exact_match(spec, "12 The answer", "answer"));  // the first opens the second
  EXPECT_EQ(cut_at_stop(" twelve\nQuestion", {"\n"}), " twelve");
  EXPECT_EQ(cut_at_stop("abcXYdefZ", {"Z", "XY"}), "abc");
  EXPECT_EQ(cut_at_stop("none here", {"\n", ""}), "none here");
}

TEST_F(TaskFile, BadFilesAndItemsAreNamedWithTheirPlace) {
  const std::string items = dir_ / "items.jsonl";
  auto spec_error = [&](const std::string& keys) {
    return user_error_of([&] { read_task_spec(task(keys, kChoiceItems)); });
  };
  EXPECT_EQ(spec_error("kind = \"choice\"\nitems = \"items.jsonl\"\nlimt = 3\n"),
            dir_ / "t.toml" + ":3:1: unknown task key 'limt': did you mean 'limit'?");
  EXPECT_EQ(spec_error("kind = \"pick\"\nitems = \"items.jsonl\"\n"),
            dir_ / "t.toml" + ":1:8: kind 'pick' is not a task kind: use choice or generate");
  EXPECT_NE(spec_error("kind = \"choice\"\nitems = \"items.jsonl\"\nname = \"a.b\"\n")
                .find(":3:8: task name 'a.b' must be a letter then letters"),
            std::string::npos);
  EXPECT_NE(spec_error("items = \"items.jsonl\"\n").find("no kind"), std::string::npos);
  EXPECT_NE(spec_error("kind = \"choice\"\nitems = \"items.jsonl\"\nnum_fewshot = -1\n")
                .find(":3:15: num_fewshot must be at least 0"),
            std::string::npos);

  auto item_error = [&](const std::string& jsonl, const std::string& extra = "") {
    return user_error_of([&] {
      load_task(
          read_task_spec(task("kind = \"choice\"\nitems = \"items.jsonl\"\n" + extra, jsonl)));
    });
  };
  EXPECT_EQ(item_error("{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 0}\n"
                       "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 2}\n"),
            items + ":2: \"label\" is 2, and the item has 2 choices: use 0 to 1: fix the item");
  EXPECT_EQ(item_error("{\"context\": \"a\", \"choices\": [], \"label\": 0}\n"),
            items + ":1: \"choices\" has none: an item needs two or more: fix the item");
  // One choice is always right: an accuracy over such items says nothing.
  EXPECT_EQ(item_error("{\"context\": \"a\", \"choices\": [\"b\"], \"label\": 0}\n"),
            items + ":1: \"choices\" has one: an item needs two or more: fix the item");
  EXPECT_EQ(item_error("{\"choices\": [\"b\"], \"label\": 0}\n"),
            items + ":1: the item has no \"context\": fix the item");
  EXPECT_NE(item_error("{\"context\": \"a\", \"choices\": [\"b\"], \"label\": 0, \"x\": 1e999}\n")
                .find(items + ":1: not a JSON object: "),
            std::string::npos);
  EXPECT_NE(item_error(kChoiceItems, "num_fewshot = 3\n")
                .find("num_fewshot = 3 but the pool (" + items +
                      ", less the item asked) has 2 items to draw from"),
            std::string::npos);
  // The harness warns of a choice that starts with whitespace after a delimiter ending in it.
  EXPECT_EQ(item_error("{\"context\": \"a\", \"choices\": [\"b\", \" c\"], \"label\": 0}\n"),
            items +
                ":1: choice 1 \" c\" starts with whitespace, and target_delimiter \" \" ends "
                "with it: write it as \"c\" (the delimiter comes before it), or set "
                "target_delimiter = \"\" in the task file: fix the item");
  EXPECT_NO_THROW(load_task(
      read_task_spec(task("kind = \"choice\"\nitems = \"items.jsonl\"\ntarget_delimiter = \"\"\n",
                          "{\"context\": \"a\", \"choices\": [\" b\", \" c\"], \"label\": 0}\n"))));
  EXPECT_EQ(spec_error("kind = \"choice\"\nitems = \"items.jsonl\"\nstop = [\"x\"]\n"),
            dir_ / "t.toml" +
                ":3:1: task key 'stop' is now until (lm-evaluation-harness's names; "
                "docs/tasks.md): rename it");
  EXPECT_EQ(spec_error("kind = \"generate\"\nitems = \"items.jsonl\"\nuntil = [\"\"]\n"),
            dir_ / "t.toml" +
                ":3:10: until: a stop string is empty: give each at least one "
                "character");
}

TEST_F(TaskFile, TwoTasksOfOneNameAreRefused) {
  task("name = \"same\"\nkind = \"choice\"\nitems = \"items.jsonl\"\n", kChoiceItems, "a");
  task("name = \"same\"\nkind = \"choice\"\nitems = \"items.jsonl\"\n", kChoiceItems, "b");
  EXPECT_EQ(user_error_of([&] { load_tasks(dir_ / "*.toml", "eval.tasks"); }),
            dir_ / "b.toml" + ": task name 'same' is given twice, here and in " +
                (dir_ / "a.toml") + ": give one of them another name");
  EXPECT_NE(user_error_of([&] {
              load_tasks(dir_ / "none*.toml", "eval.tasks");
            }).find("matches no task file"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
