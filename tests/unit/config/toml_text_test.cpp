// The one TOML parse entry point (toml_text.h): errors with their position, the text refused
// before toml++ sees it, and the bounds Kiln's guard puts on it: dotted parts of a key and
// nesting of arrays and inline tables. Past them toml++ 3.3.0 recurses until the stack
// overflows (50,000 parts: SIGSEGV), so each limit is checked here right at its edge.
#include <gtest/gtest.h>

#include <string>

#include "core/config/toml_text.h"
#include "core/util/error.h"

namespace kiln {
namespace {

std::string syntax_error_of(const std::string& text) {
  try {
    parse_toml(text, "exp.toml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// "a.a. ... .b": `parts` parts.
std::string dotted_key(int parts) {
  std::string key;
  for (int i = 1; i < parts; ++i)
    key += "a.";
  return key + "b";
}

std::string nested_array(int depth) {
  return std::string(static_cast<size_t>(depth), '[') + "1" +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(TomlText, MalformedTextIsAUserErrorWithItsPosition) {
  EXPECT_EQ(syntax_error_of("a = 1\nb = \n").rfind("exp.toml:2:", 0), 0u)
      << syntax_error_of("a = 1\nb = \n");
  EXPECT_NE(syntax_error_of("a = 1\nb = \n").find("TOML syntax error"), std::string::npos);
}

TEST(TomlText, NonAsciiOutsideAStringIsRefusedBeforeTheParserSeesIt) {
  const std::string text = "a = 1\n\xC3\xA9 = 2\n";
  EXPECT_EQ(
      syntax_error_of(text).rfind("exp.toml:2:1: TOML syntax error: a non-ASCII character", 0), 0u)
      << syntax_error_of(text);
  EXPECT_FALSE(try_parse_toml(text));
  EXPECT_FALSE(try_parse_toml("a = "));
  EXPECT_EQ(try_parse_toml("s = \"\xC3\xA9\"")->get("s")->value<std::string>(), "\xC3\xA9");
}

TEST(TomlLimits, AKeyOfFiftyThousandPartsIsRefusedWhereItGoesTooFar) {
  // Column 1 + 2 * 64: the 64th '.', which would start part 65.
  EXPECT_EQ(syntax_error_of("[" + dotted_key(50000) + "]\nx = 1\n"),
            "exp.toml:1:129: TOML syntax error: a key of more than 64 dotted parts: Kiln's keys "
            "are section.key");
  EXPECT_EQ(syntax_error_of("[s]\n" + dotted_key(65) + " = 1\n").rfind("exp.toml:2:128: ", 0), 0u);
  EXPECT_EQ(syntax_error_of("[s]\nx = {" + dotted_key(65) + " = 1}\n").rfind("exp.toml:2:133: ", 0),
            0u);
  EXPECT_FALSE(try_parse_toml("[" + dotted_key(50000) + "]"));
}

TEST(TomlLimits, SixtyFourPartsAreParsed) {
  const toml::table table = parse_toml("[" + dotted_key(63) + "]\nx = 1\n", "exp.toml");
  EXPECT_EQ(table.at_path(dotted_key(63) + ".x").value<int64_t>(), 1);
  EXPECT_NO_THROW(parse_toml("[s]\n" + dotted_key(64) + " = 1\ny = {" + dotted_key(64) + " = 2}\n",
                             "exp.toml"));
  // Dots inside values and quoted keys are no key parts.
  EXPECT_NO_THROW(
      parse_toml("[s]\nx = \"" + dotted_key(100) + "\"\ny = 1.5\n'" + dotted_key(100) + "' = 2\n",
                 "exp.toml"));
}

TEST(TomlLimits, ArraysAndInlineTablesNestThirtyTwoDeepAtMost) {
  EXPECT_NO_THROW(parse_toml("x = " + nested_array(32) + "\n", "exp.toml"));
  EXPECT_EQ(syntax_error_of("x = " + nested_array(33) + "\n"),
            "exp.toml:1:37: TOML syntax error: arrays or inline tables nested more than 32 deep: "
            "Kiln's values are numbers, strings, booleans and lists of them");
  std::string tables = "x = ";
  for (int i = 0; i < 40; ++i)
    tables += "{a = [";
  EXPECT_EQ(syntax_error_of(tables).rfind("exp.toml:1:", 0), 0u) << syntax_error_of(tables);
  EXPECT_NE(syntax_error_of(tables).find("nested more than 32 deep"), std::string::npos);
  // Arrays across lines count as one nesting.
  EXPECT_NO_THROW(parse_toml("x = [\n  [1, 2],\n  [3],\n]\n", "exp.toml"));
}

// Found by tools/fuzz.sh: after a malformed value, toml++ 3.3.0 reads no array at `[`, and the
// non-ASCII character in what follows reached its __builtin_unreachable() (UBSan).
TEST(TomlLimits, ABracketAfterAMalformedValueOpensNoArray) {
  EXPECT_EQ(syntax_error_of("seed = 0X[\"\xD1\xA5\"\n"),
            "exp.toml:1:12: TOML syntax error: a non-ASCII character outside a string or comment: "
            "TOML allows them only in those");
  EXPECT_NO_THROW(
      parse_toml("x = [ # a comment\n  [\"\xD1\xA5\"],\n  {a = [\"\xD1\xA5\"]},\n]\n", "exp.toml"));
}

}  // namespace
}  // namespace kiln
