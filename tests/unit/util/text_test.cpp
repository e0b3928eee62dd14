// Sizes as save_pretrained(max_shard_size=...) takes them: the values transformers'
// convert_file_size_to_int gives for the same spellings.
#include <gtest/gtest.h>

#include "core/util/text.h"

namespace kiln {
namespace {

TEST(ByteSize, ReadsTheSpellingsOfSavePretrained) {
  EXPECT_EQ(parse_byte_size("2GB"), 2000000000);
  EXPECT_EQ(parse_byte_size("5GiB"), int64_t{5} << 30);
  EXPECT_EQ(parse_byte_size("500MB"), 500000000);
  EXPECT_EQ(parse_byte_size("100kb"), 100000);
  EXPECT_EQ(parse_byte_size("3 MiB"), 3 << 20);
  EXPECT_EQ(parse_byte_size("1234"), 1234);
  EXPECT_EQ(parse_byte_size("7B"), 7);
}

TEST(ByteSize, RefusesWhatIsNotASize) {
  for (const char* bad : {"", "GB", "2TB", "-1MB", "0", "0GB", "2.5GB", "5 GB ", "GB5",
                          "99999999999999999GB", "9999999999999GiB"}) {
    EXPECT_EQ(parse_byte_size(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace kiln
