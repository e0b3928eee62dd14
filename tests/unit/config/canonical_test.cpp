// The one TOML parse entry point (toml_text.h) and the one way values are written and a config
// flattened (canonical.h).
#include "core/config/canonical.h"

#include <gtest/gtest.h>

#include "core/config/toml_text.h"
#include "core/util/error.h"

namespace kiln {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_toml(text, "exp.toml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TomlText, MalformedTextIsAUserErrorWithItsPosition) {
  EXPECT_EQ(error_of("a = 1\nb = \n").rfind("exp.toml:2:", 0), 0u) << error_of("a = 1\nb = \n");
  EXPECT_NE(error_of("a = 1\nb = \n").find("TOML syntax error"), std::string::npos);
}

TEST(TomlText, NonAsciiOutsideAStringIsRefusedBeforeTheParserSeesIt) {
  const std::string text = "a = 1\n\xC3\xA9 = 2\n";
  EXPECT_EQ(error_of(text).rfind("exp.toml:2:1: TOML syntax error: a non-ASCII character", 0), 0u)
      << error_of(text);
  EXPECT_FALSE(try_parse_toml(text));
  EXPECT_FALSE(try_parse_toml("a = "));
  EXPECT_EQ(try_parse_toml("s = \"\xC3\xA9\"")->get("s")->value<std::string>(), "\xC3\xA9");
}

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

}  // namespace
}  // namespace kiln
