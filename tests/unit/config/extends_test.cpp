// Experiment files that extend others: which value wins, where each came from, the files read,
// and the one-line errors of a chain that cannot be read. Expected values are written out here,
// the SHA-256 as sha256sum prints it for the same bytes.
#include <gtest/gtest.h>

#include <string>

#include "core/config/config.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::write_text;

// Bytes whose SHA-256 sha256sum gave as kBaseSha256.
const char* kBase =
    "[model]\ntype = \"gpt\"\nn_layer = 2\n\n[train]\nsteps = 10\nmicro_batch = 4\n";
const char* kBaseSha256 = "a3486fbb82ac3c9168dc44c50fd5f35cfa78bb3ffd8d4bd0c8625b57b56f6d84";

class ConfigExtends : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_ / name; }
  void write(const std::string& name, const std::string& text) const {
    write_text(path(name), text);
  }
  std::string error_of(const std::string& name) const {
    try {
      load_config(path(name), {});
    } catch (const UserError& e) {
      return e.what();
    }
    return "(no error)";
  }

  testing::TempDir dir_;
};

TEST_F(ConfigExtends, OwnKeysWinOverTheBasesAndSetWinsOverAll) {
  write("base.toml", kBase);
  write("exp.toml", "extends = \"base.toml\"\n\n[train]\nsteps = 20\n");
  const ResolvedConfig c = load_config(path("exp.toml"), {"train.micro_batch=8"});
  EXPECT_EQ(c.params("model").integer("n_layer"), 2);
  EXPECT_EQ(c.params("train").integer("steps"), 20);
  EXPECT_EQ(c.params("train").integer("micro_batch"), 8);
  EXPECT_EQ(c.params("train").integer("seq_len"), 256);  // core's default
  EXPECT_EQ(c.source_of("model.n_layer").str(), path("base.toml") + ":3");
  EXPECT_EQ(c.where("model.n_layer").str(), path("base.toml") + ":3:11");
  EXPECT_EQ(c.source_of("model.type").str(), path("base.toml") + ":2");
  EXPECT_EQ(c.source_of("train.steps").str(), path("exp.toml") + ":4");
  EXPECT_EQ(c.source_of("train.micro_batch").str(), "--set");
  EXPECT_EQ(c.where("train.micro_batch").str(), "--set train.micro_batch=8");
  EXPECT_EQ(c.source_of("train.seq_len").str(), "default");
  EXPECT_EQ(c.source_of("model.n_head").str(), "default (plugin gpt)");
  EXPECT_EQ(c.source_of("model.init_from").str(), "default");  // core's key of every model
  EXPECT_EQ(c.source_of("optimizer.type").str(), "default");
  EXPECT_EQ(c.source_of("optimizer.lr").str(), "default (plugin adamw)");
  ASSERT_EQ(c.sources().size(), 2u);
  EXPECT_EQ(c.sources()[0].path, path("base.toml"));
  EXPECT_EQ(c.sources()[0].sha256, kBaseSha256);
  EXPECT_EQ(c.sources()[1].path, path("exp.toml"));
}

TEST_F(ConfigExtends, AListIsAppliedInOrderAndASharedBaseOnce) {
  // exp extends [left, right]; both extend root. right does not write the lr, so left's must
  // stay: applying root again for right would bring back root's.
  write("root.toml", "[model]\ntype = \"gpt\"\n\n[optimizer]\nlr = 0.1\nbeta1 = 0.5\n");
  write("left.toml", "extends = \"root.toml\"\n[optimizer]\nlr = 0.2\nbeta2 = 0.9\n");
  write("right.toml", "extends = \"root.toml\"\n[optimizer]\nbeta2 = 0.8\n");
  write("exp.toml", "extends = [\"left.toml\", \"right.toml\"]\n[optimizer]\nbeta1 = 0.7\n");
  const ResolvedConfig c = load_config(path("exp.toml"), {});
  EXPECT_DOUBLE_EQ(c.params("optimizer").real("lr"), 0.2);
  EXPECT_DOUBLE_EQ(c.params("optimizer").real("beta2"), 0.8);
  EXPECT_DOUBLE_EQ(c.params("optimizer").real("beta1"), 0.7);
  std::vector<std::string> order;
  for (const auto& file : c.sources())
    order.push_back(file.path);
  EXPECT_EQ(order, std::vector<std::string>({path("root.toml"), path("left.toml"),
                                             path("right.toml"), path("exp.toml")}));
}

TEST_F(ConfigExtends, PathsAreRelativeToTheFileThatNamesThem) {
  write("common/model.toml", "[model]\ntype = \"gpt\"\nn_embd = 64\n");
  write("common/base.toml", "extends = \"model.toml\"\n[train]\nsteps = 7\n");
  write("runs/a/exp.toml", "extends = \"../../common/base.toml\"\n");
  testing::InDirectory elsewhere(path("runs"));
  const ResolvedConfig c = load_config("a/exp.toml", {});
  EXPECT_EQ(c.params("model").integer("n_embd"), 64);
  EXPECT_EQ(c.params("train").integer("steps"), 7);
  EXPECT_EQ(c.source_of("model.n_embd").str(), "../common/model.toml:3");
}

TEST_F(ConfigExtends, ANewPluginStartsItsSectionAfresh) {
  write("base.toml",
        "[model]\ntype = \"gpt\"\n[optimizer]\ntype = \"adamw\"\nlr = 0.01\nbeta1 = 0.8\n"
        "[schedule]\nwarmup = 7\n");
  // lion keeps no adamw key: its lr is its own default (1e-4), not adamw's 0.01. The schedule
  // base named no type, so its warmup stays under the type chosen here.
  write("exp.toml",
        "extends = \"base.toml\"\n[optimizer]\ntype = \"lion\"\n[schedule]\ntype = \"cosine\"\n");
  const ResolvedConfig c = load_config(path("exp.toml"), {});
  EXPECT_EQ(c.type("optimizer"), "lion");
  EXPECT_DOUBLE_EQ(c.params("optimizer").real("lr"), 1e-4);
  EXPECT_EQ(c.source_of("optimizer.lr").str(), "default (plugin lion)");
  EXPECT_EQ(c.params("schedule").integer("warmup"), 7);
  // The same type again keeps the keys.
  write("same.toml", "extends = \"base.toml\"\n[optimizer]\ntype = \"adamw\"\n");
  EXPECT_DOUBLE_EQ(load_config(path("same.toml"), {}).params("optimizer").real("lr"), 0.01);
}

TEST_F(ConfigExtends, AnEmptyValueRemovesWhatABaseSet) {
  write("base.toml",
        "[model]\ntype = \"gpt\"\n[data]\ntrain = \"t_*.bin\"\nval = \"v_*.bin\"\n"
        "[eval]\nevery = 10\n");
  write("exp.toml", "extends = \"base.toml\"\n[data]\nval = \"\"\n[eval]\nevery = 0\n");
  const ResolvedConfig c = load_config(path("exp.toml"), {});
  EXPECT_EQ(c.params("data").text("val"), "");
  EXPECT_EQ(c.params("eval").integer("every"), 0);
  EXPECT_EQ(c.params("data").text("train"), "t_*.bin");
}

TEST_F(ConfigExtends, ACycleIsOneLineNamingTheChain) {
  write("a.toml", "extends = \"b.toml\"\n");
  write("b.toml", "extends = \"c.toml\"\n");
  write("c.toml", "extends = \"./a.toml\"\n");
  EXPECT_EQ(error_of("a.toml"), path("a.toml") +
                                    ":1:11: extends 'b.toml', which extends 'c.toml', which "
                                    "extends './a.toml': a cycle");
  write("self.toml", "extends = \"self.toml\"\n");
  EXPECT_EQ(error_of("self.toml"), path("self.toml") + ":1:11: extends 'self.toml': a cycle");
}

TEST_F(ConfigExtends, AMissingBaseOrOneThatIsNoExperimentIsOneLine) {
  write("a.toml", "extends = \"b.toml\"\n");
  write("b.toml", "extends = \"gone.toml\"\n");
  EXPECT_EQ(error_of("a.toml"), path("a.toml") +
                                    ":1:11: extends 'b.toml', which extends 'gone.toml': no "
                                    "such file '" +
                                    path("gone.toml") +
                                    "': check the path (relative to the file that names it)");
  write("sweep.toml", "base = \"a.toml\"\n[grid]\ntrain.steps = [1, 2]\n");
  write("on_sweep.toml", "extends = \"sweep.toml\"\n");
  EXPECT_NE(error_of("on_sweep.toml")
                .find("extends 'sweep.toml': '" + path("sweep.toml") + "' is a sweep file"),
            std::string::npos)
      << error_of("on_sweep.toml");
  write("dir/x.toml", "");
  write("on_dir.toml", "extends = \"dir\"\n");
  EXPECT_NE(error_of("on_dir.toml").find("is a directory, not an experiment file"),
            std::string::npos);
  write("number.toml", "extends = [\"a.toml\", 1]\n");
  EXPECT_EQ(error_of("number.toml"),
            path("number.toml") +
                ":1:22: 'extends' must be a file name or a list of file names, e.g. extends = "
                "\"base.toml\"");
}

TEST_F(ConfigExtends, AnUnknownKeyInABaseIsReportedWhereTheBaseWroteIt) {
  write("base.toml", "[model]\ntype = \"gpt\"\n\n[train]\nstpes = 3\n");
  write("exp.toml", "extends = \"base.toml\"\n[train]\nsteps = 4\n");
  EXPECT_EQ(error_of("exp.toml"), path("base.toml") +
                                      ":5:1: unknown key 'train.stpes': did you mean "
                                      "'train.steps'?");
  write("late.toml", "[model]\ntype = \"gpt\"\n[train]\nextends = \"base.toml\"\n");
  EXPECT_NE(error_of("late.toml")
                .find("late.toml:4:1: unknown key 'train.extends': extends = ... "
                      "goes at the top of the file"),
            std::string::npos)
      << error_of("late.toml");
}

TEST_F(ConfigExtends, TextInMemoryIsOneSourceNamedByItsSourceName) {
  const ResolvedConfig c = load_config_text(kBase, "memory.toml", {});
  ASSERT_EQ(c.sources().size(), 1u);
  EXPECT_EQ(c.sources()[0].path, "memory.toml");
  EXPECT_EQ(c.sources()[0].sha256, kBaseSha256);
  EXPECT_EQ(c.source_of("train.steps").str(), "memory.toml:6");
}

}  // namespace
}  // namespace kiln
