#include "core/config/config.h"

#include <gtest/gtest.h>

#include "core/config/canonical.h"
#include "core/config/options.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

const char* kMinimal = R"(
[model]
type = "gpt"
n_layer = 2

[train]
steps = 10
micro_batch = 4
seq_len = 16
)";

// Appends the one section without a default, so that each test meets only its own mistake.
std::string with_model(const std::string& text) {
  return text + "\n[model]\ntype = \"gpt\"\n";
}

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_text(text.find("[model]") == std::string::npos ? with_model(text) : text,
                     "exp.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Config, FillsDefaultsFromSectionsAndPlugins) {
  ResolvedConfig c = load_config_text(kMinimal, "exp.toml", {});
  EXPECT_EQ(c.params("train").integer("steps"), 10);
  EXPECT_EQ(c.params("model").integer("n_layer"), 2);
  EXPECT_EQ(c.params("model").integer("n_head"), 12);  // gpt's declared default
  EXPECT_EQ(c.type("optimizer"), "adamw");             // the plugin that declares itself default
  EXPECT_EQ(c.type("precision"), "fp32");
  EXPECT_DOUBLE_EQ(c.params("train").real("grad_clip"), 1.0);
}

// --set section.type=OTHER over a file whose section holds the old plugin's keys: the keys the
// new plugin does not take are left out with one note naming them, as a file that changes the
// plugin already drops its base's (else the default experiment with --set
// optimizer.type=muon is refused over optimizer.beta1). Keys both take stay.
TEST(Config, ASetThatSwitchesThePluginDropsTheFilesKeysItDoesNotTake) {
  const std::string file = with_model(
      "[optimizer]\ntype = \"adamw\"\nlr = 6e-3\nbeta1 = 0.9\nbeta2 = 0.99\nweight_decay = 0.1\n");
  const ResolvedConfig muon = load_config_text(file, "exp.toml", {"optimizer.type=\"muon\""});
  EXPECT_EQ(muon.type("optimizer"), "muon");
  EXPECT_DOUBLE_EQ(muon.params("optimizer").real("lr"), 6e-3);
  EXPECT_DOUBLE_EQ(muon.params("optimizer").real("weight_decay"), 0.1);
  ASSERT_EQ(muon.notes.size(), 1u);
  EXPECT_EQ(muon.notes[0],
            "note: --set optimizer.type=muon replaces the files' adamw: left out "
            "optimizer.beta1, optimizer.beta2 (muon takes no such key); kept optimizer.lr, "
            "optimizer.weight_decay");
  // A key the new plugin does not take, given by a --set, is still the user's mistake.
  EXPECT_NE(error_of(file, {"optimizer.type=\"muon\"", "optimizer.beta1=0.8"})
                .find("unknown key 'optimizer.beta1'"),
            std::string::npos);
  // Without a switch nothing is dropped.
  EXPECT_TRUE(load_config_text(file, "exp.toml", {}).notes.empty());
}

TEST(Config, TypoNamesFileLineColumnAndSuggestsTheNearestKey) {
  std::string e = error_of("[train]\nsteps = 5\nstpes = 10\n");
  EXPECT_NE(e.find("exp.toml:3:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'train.stpes'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'train.steps'?"), std::string::npos) << e;
}

TEST(Config, UnknownSectionSuggestsTheNearestSection) {
  std::string e = error_of("[trian]\nsteps = 5\n");
  EXPECT_NE(e.find("exp.toml:1:2"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean [train]?"), std::string::npos) << e;
}

TEST(Config, PluginKeysAreCheckedAgainstTheChosenPlugin) {
  std::string e = error_of("[model]\ntype = \"gpt\"\nn_layers = 3\n");
  EXPECT_NE(e.find("exp.toml:3:1: unknown key 'model.n_layers': did you mean 'model.n_layer'?"),
            std::string::npos)
      << e;
}

TEST(Config, WrongTypeIsAnError) {
  std::string e = error_of("[train]\nsteps = \"ten\"\n");
  EXPECT_NE(e.find("exp.toml:2:9"), std::string::npos) << e;
  EXPECT_NE(e.find("'train.steps' must be int"), std::string::npos) << e;
  EXPECT_NE(error_of("[train]\nsteps = 2.5\n").find("must be int"), std::string::npos);
}

// adapter.targets takes PEFT's form, an array of names, as the comma-separated string it holds:
// both load to the same value and hash, from a file or a --set; an array of other than names, or
// where a key takes no list, is refused at its place.
TEST(Config, AListKeyTakesAnArrayOfNamesAsItsCommaSeparatedString) {
  const std::string lora = "[adapter]\ntype = \"lora\"\n";
  const auto load = [&](const std::string& extra, const std::vector<std::string>& sets = {}) {
    return load_config_text(with_model(lora + extra), "exp.toml", sets);
  };
  const ResolvedConfig array = load("targets = [\"q_proj\", \"v_proj\"]\n");
  EXPECT_EQ(array.params("adapter").text("targets"), "q_proj,v_proj");
  EXPECT_EQ(array.hash(), load("targets = \"q_proj,v_proj\"\n").hash());
  EXPECT_EQ(load("", {"adapter.targets=[\"c_attn\"]"}).params("adapter").text("targets"), "c_attn");
  std::string e = error_of(lora + "targets = [\"q_proj\", 3]\n");
  EXPECT_NE(e.find("exp.toml:3:11: 'adapter.targets' takes an array of names without commas, "
                   "and one is integer 3"),
            std::string::npos)
      << e;
  e = error_of(lora + "targets = [\"q_proj,v_proj\"]\n");
  EXPECT_NE(e.find("takes an array of names without commas"), std::string::npos) << e;
  e = error_of(lora + "init = [\"gaussian\"]\n");
  EXPECT_NE(e.find("'adapter.init' must be string"), std::string::npos) << e;
}

TEST(Config, IntegersAreAcceptedWhereFloatsAreDeclared) {
  ResolvedConfig c = load_config_text(with_model("[optimizer]\nlr = 1\n"), "exp.toml", {});
  EXPECT_DOUBLE_EQ(c.params("optimizer").real("lr"), 1.0);
}

TEST(Config, OutOfRangeIsAnError) {
  std::string e = error_of("[train]\nsteps = 0\n");
  EXPECT_NE(e.find("'train.steps' is 0, out of range: must be >= 1"), std::string::npos) << e;
  e = error_of("[model]\ntype = \"gpt\"\ndropout = 1.5\n");
  EXPECT_NE(e.find("'model.dropout' is 1.5, out of range"), std::string::npos) << e;
  e = error_of("[run]\ndevice = \"tpu\"\n");
  EXPECT_NE(e.find("must be one of \"auto\", \"cpu\", \"cuda\", \"cuda:N\""), std::string::npos)
      << e;
  for (const char* device : {"cuda:", "cuda:x", "cuda:12345", "cuda:-1", "cuda0", "xcuda:1"}) {
    e = error_of(std::string("[run]\ndevice = \"") + device + "\"\n");
    EXPECT_NE(e.find("'run.device' is"), std::string::npos) << device << ": " << e;
  }
  EXPECT_EQ(error_of("[run]\ndevice = \"cuda:3\"\n"), "(no error)");
  EXPECT_EQ(error_of("[run]\ndevice = \"cuda:1024\"\n"), "(no error)");
}

TEST(Config, UnknownPluginListsTheAvailableOnes) {
  std::string e = error_of("[optimizer]\ntype = \"adamw2\"\n");
  EXPECT_NE(e.find("exp.toml:2:8: unknown optimizer plugin 'adamw2'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'adamw'?"), std::string::npos) << e;
  EXPECT_NE(e.find("sgd"), std::string::npos) << e;
}

TEST(Config, ModelNeedsAType) {
  try {
    load_config_text("[train]\nsteps = 3\n", "exp.toml", {});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("[model] needs a type"), std::string::npos) << e.what();
  }
}

TEST(Config, SyntaxErrorsCarryLineAndColumn) {
  std::string e = error_of("[train]\nsteps = = 5\n");
  EXPECT_NE(e.find("exp.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos) << e;
}

TEST(Config, MissingFileIsAClearError) {
  try {
    load_config("/nonexistent/exp.toml", {});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open experiment file '/nonexistent/exp.toml'"),
              std::string::npos);
  }
}

TEST(Config, OverridesWinOverTheFileAndLaterOverridesWinOverEarlier) {
  ResolvedConfig c = load_config_text(
      kMinimal, "exp.toml",
      {"train.steps=20", "optimizer.lr=3e-3", "train.steps=30", "run.name=lr3e-3"});
  EXPECT_EQ(c.params("train").integer("steps"), 30);
  EXPECT_DOUBLE_EQ(c.params("optimizer").real("lr"), 3e-3);
  EXPECT_EQ(c.params("run").text("name"), "lr3e-3");  // not TOML: taken as a bare string
  EXPECT_EQ(c.where("train.steps").str(), "--set train.steps=30");
  EXPECT_EQ(c.where("model.n_layer").str(), "exp.toml:4:11");
}

TEST(Config, OverridesAreValidatedLikeTheFile) {
  std::string e = error_of(kMinimal, {"train.stpes=5"});
  EXPECT_NE(e.find("--set train.stpes=5: unknown key 'train.stpes': did you mean 'train.steps'?"),
            std::string::npos)
      << e;
  e = error_of(kMinimal, {"train.steps=many"});
  EXPECT_NE(e.find("--set train.steps=many: 'train.steps' must be int"), std::string::npos) << e;
  EXPECT_NE(error_of(kMinimal, {"steps"}).find("expected section.key=value"), std::string::npos);
}

TEST(Config, CanonicalTextReloadsToTheSameConfigAndHash) {
  ResolvedConfig a = load_config_text(kMinimal, "exp.toml", {"optimizer.lr=0.1"});
  ResolvedConfig b = load_config_text(a.to_toml(), "stored", {});
  EXPECT_EQ(a.to_toml(), b.to_toml());
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash().size(), 16u);
}

TEST(Config, HashIgnoresNamesAndPathsButNotNumbers) {
  ResolvedConfig a = load_config_text(kMinimal, "exp.toml", {});
  EXPECT_EQ(a.hash(),
            load_config_text(kMinimal, "exp.toml", {"run.name=x", "run.db=/tmp/x.db"}).hash());
  EXPECT_NE(a.hash(), load_config_text(kMinimal, "exp.toml", {"run.seed=1"}).hash());
  EXPECT_NE(a.hash(), load_config_text(kMinimal, "exp.toml", {"optimizer.lr=1e-3"}).hash());
}

// eval.tasks and eval.task_every came after runs existed (ParamSpec::added_later): at their
// defaults the hashed text has no line of them, so those runs keep their hashes; set, they count.
TEST(Config, AKeyAddedLaterCountsInTheHashOnlyOnceSet) {
  ResolvedConfig a = load_config_text(kMinimal, "exp.toml", {});
  EXPECT_NE(a.to_toml().find("task_every = 0"), std::string::npos);  // shown, as every key
  EXPECT_EQ(a.hash(), load_config_text(kMinimal, "exp.toml", {"eval.task_every=0"}).hash());
  EXPECT_EQ(a.hash(), load_config_text(kMinimal, "exp.toml", {"eval.task_batch=4"}).hash());
  EXPECT_NE(a.hash(), load_config_text(kMinimal, "exp.toml", {"eval.task_every=50"}).hash());
  EXPECT_NE(a.hash(), load_config_text(kMinimal, "exp.toml", {"eval.tasks=t.toml"}).hash());
  // The default experiment's hash as a kiln without those keys computed it (the schema less the
  // three, built and asked with `kiln config`): a key added later must leave it so.
  EXPECT_EQ(load_config(std::string(KILN_SOURCE_DIR) + "/experiments/kjv_char.toml", {}).hash(),
            "e917eaaf775e29f8");
}

TEST(Config, GradientAccumulationMustDivideExactly) {
  ResolvedConfig c = load_config_text(kMinimal, "exp.toml", {"train.batch_tokens=256"});
  EXPECT_EQ(train_options(c).grad_accum(1, c), 4);  // 256 / (4 x 16)
  EXPECT_EQ(train_options(c).grad_accum(2, c), 2);
  ResolvedConfig bad = load_config_text(kMinimal, "exp.toml", {"train.batch_tokens=100"});
  try {
    train_options(bad).grad_accum(1, bad);
    FAIL() << "no error";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("--set train.batch_tokens=100"), std::string::npos) << m;
    EXPECT_NE(m.find("not a multiple of micro_batch x seq_len x world_size = 4 x 16 x 1 = 64"),
              std::string::npos)
        << m;
  }
}

// A family of named entries (ParamSpec::family: a blend's [data.sources.NAME] tables): the file's
// tables and --set's dotted keys name the same keys, the fields an entry leaves out take their
// defaults, and the canonical text loads back to the same config and hash.
TEST(ConfigFamilies, TablesAndSetsNameTheSameKeysAndRoundTrip) {
  const std::string file = with_model(R"(
[data]
type = "blend"
[data.sources.web]
train = "web/*.bin"
weight = 0.7
[data.sources.code]
train = "code/*.bin"
)");
  const ResolvedConfig c = load_config_text(file, "exp.toml", {"data.sources.code.weight=0.3"});
  const Params& data = c.params("data");
  EXPECT_EQ(data.entries("sources"), (std::vector<std::string>{"code", "web"}));
  EXPECT_DOUBLE_EQ(data.real("sources.web.weight"), 0.7);
  EXPECT_DOUBLE_EQ(data.real("sources.code.weight"), 0.3);
  EXPECT_EQ(data.integer("sources.web.epochs"), 0);  // a default, filled in
  EXPECT_EQ(data.text("sources.web.val"), "");
  EXPECT_EQ(c.where("data.sources.code.weight").str(), "--set data.sources.code.weight=0.3");
  EXPECT_EQ(c.where("data.sources.web.weight").line, 6);

  const ResolvedConfig again = load_config_text(c.to_toml(), "canonical.toml", {});
  EXPECT_EQ(again.hash(), c.hash());
  EXPECT_DOUBLE_EQ(again.params("data").real("sources.code.weight"), 0.3);
  const auto flat = flatten_config(c.to_toml());
  EXPECT_EQ(flat.at("data.sources.code.weight"), "0.3");
  EXPECT_EQ(flat.at("data.sources.web.train"), "\"web/*.bin\"");

  // Another weight is another config.
  EXPECT_NE(load_config_text(file, "exp.toml", {"data.sources.code.weight=0.5"}).hash(), c.hash());
}

TEST(ConfigFamilies, AMisspelledFieldOrAnArrayOfTablesIsNamedWithTheFamilysKeys) {
  const std::string blend = "[data]\ntype = \"blend\"\n";
  EXPECT_NE(error_of(blend + "[data.sources.web]\nwieght = 1\n")
                .find("exp.toml:4:1: unknown key 'data.sources.web.wieght': an entry of "
                      "data.sources takes: train, val, weight, epochs"),
            std::string::npos);
  EXPECT_NE(error_of(blend + "[[data.sources]]\nweight = 1\n").find("holds named tables"),
            std::string::npos);
  EXPECT_NE(error_of(blend, {"data.sources.web.weight=0"}).find("must be > 0"), std::string::npos);
  // A plain section keeps refusing nested tables, naming the table, and a --set of three parts.
  EXPECT_NE(error_of("[train.schedule]\nwarmup = 2\n").find("unknown key 'train.schedule'"),
            std::string::npos);
  EXPECT_NE(error_of("[train]\nsteps = { value = 3 }\n").find("'train.steps' must be int"),
            std::string::npos);
  EXPECT_NE(error_of("", {"train.steps.x=1"}).find("'train.steps.x' is not a section.key path"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
