// The one way values are written and a config flattened (canonical.h).
#include "core/config/canonical.h"

#include <gtest/gtest.h>

#include "core/config/toml_text.h"

namespace kiln {
namespace {

TEST(Canonical, QuotingEscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(quote_toml("nan"), "\"nan\"");
  EXPECT_EQ(quote_toml("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_toml("a\nb\x01\x7f"), "\"a\\nb\\u0001\\u007f\"");
  // Whatever the string, it reads back as itself.
  const std::string nasty = "x\"\\\n\t\r\x1b\x7fy";
  EXPECT_EQ(try_parse_toml("v = " + quote_toml(nasty))->get("v")->value<std::string>(), nasty);
}

TEST(Canonical, FloatsAlwaysReadAsFloats) {
  EXPECT_EQ(format_value(1.0), "1.0");
  EXPECT_EQ(format_value(0.003), "0.003");
  EXPECT_EQ(format_value(int64_t{3}), "3");
  EXPECT_EQ(format_value(true), "true");
}

TEST(Canonical, FlatteningWritesEveryValueInCanonicalForm) {
  const auto flat = flatten_config(
      "[optimizer]\ntype = \"adamw\"\nlr = 3e-3\n[train]\nsteps = 10\ngrad_clip = 1\n"
      "[run]\nname = \"\"\n");
  EXPECT_EQ(flat.at("optimizer.type"), "\"adamw\"");
  EXPECT_EQ(flat.at("optimizer.lr"), "0.003");
  EXPECT_EQ(flat.at("train.steps"), "10");
  EXPECT_EQ(flat.at("train.grad_clip"), "1");  // an integer in the text stays one
  EXPECT_EQ(flat.at("run.name"), "\"\"");
  EXPECT_TRUE(flatten_config("not toml [").empty());
}

TEST(Canonical, DifferingKeysNameEachKeyWithEveryConfigsValueAndADashWhereOneLacksIt) {
  const std::vector<FlatConfig> configs = {
      {{"run.name", "\"a\""}, {"train.steps", "10"}, {"optimizer.lr", "0.001"}},
      {{"run.name", "\"b\""},
       {"train.steps", "20"},
       {"optimizer.lr", "0.001"},
       {"optimizer.beta1", "0.9"}}};
  const auto differing = differing_keys(configs);
  ASSERT_EQ(differing.size(), 2u);  // run.name labels a run; the same lr is no difference
  EXPECT_EQ(differing[0].first, "optimizer.beta1");
  EXPECT_EQ(differing[0].second, (std::vector<std::string>{"-", "0.9"}));
  EXPECT_EQ(differing[1].first, "train.steps");
  EXPECT_EQ(differing[1].second, (std::vector<std::string>{"10", "20"}));
}

}  // namespace
}  // namespace kiln
