// The one integer parser (core/util/env.h): the whole string is the number, in range, or nothing;
// checked against the values a launcher or a user could leave in the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "core/util/env.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(ParseInteger, TheWholeStringInRangeOrNothing) {
  EXPECT_EQ(parse_integer("0", 0, 10), 0);
  EXPECT_EQ(parse_integer("10", 0, 10), 10);
  EXPECT_EQ(parse_integer("+7", 0, 10), 7);
  EXPECT_EQ(parse_integer("-3", -5, 5), -3);
  EXPECT_EQ(parse_integer("007", 0, 10), 7);
  EXPECT_EQ(parse_integer("9223372036854775807", 0, std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max());
  for (const char* bad : {"", " 3", "3 ", "12abc", "abc", "3.0", "1e3", "0x10", "-", "+", "--1",
                          "+-1", "11", "-1", "9223372036854775808", "99999999999999999999"}) {
    EXPECT_EQ(parse_integer(bad, 0, 10), std::nullopt) << "'" << bad << "'";
  }
}

TEST(EnvInteger, UnsetOrEmptyIsTheFallbackAndGarbageIsOneLine) {
  ::unsetenv("KILN_TEST_INTEGER");
  EXPECT_EQ(env_integer("KILN_TEST_INTEGER", 42, 0, 100), 42);
  ::setenv("KILN_TEST_INTEGER", "", 1);
  EXPECT_EQ(env_integer("KILN_TEST_INTEGER", 42, 0, 100), 42);
  EXPECT_EQ(env_text("KILN_TEST_INTEGER"), std::nullopt);
  ::setenv("KILN_TEST_INTEGER", "17", 1);
  EXPECT_EQ(env_integer("KILN_TEST_INTEGER", 42, 0, 100), 17);
  ::setenv("KILN_TEST_INTEGER", "17x", 1);
  EXPECT_EQ(testing::user_error_of([] { env_integer("KILN_TEST_INTEGER", 42, 0, 100); }),
            "environment variable KILN_TEST_INTEGER='17x' is not a whole number from 0 to 100: "
            "set it to one, or unset it");
  ::setenv("KILN_TEST_INTEGER", "101", 1);
  EXPECT_NE(testing::user_error_of([] { env_integer("KILN_TEST_INTEGER", 42, 0, 100); }),
            "(no error)");
  ::unsetenv("KILN_TEST_INTEGER");
}

}  // namespace
}  // namespace kiln
