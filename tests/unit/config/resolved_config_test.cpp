// ResolvedConfig::flat() reads the resolved sections themselves; flatten_config reads the
// canonical TOML back through toml++, as `kiln runs` reads a stored config. Callers compare
// configs through flat() in-process, so the two must agree on every key and value: over every
// shipped experiment, every member of every shipped sweep, and configs chosen for what a printer
// could get wrong (escaped strings, floats, a family's nested entries, a section without a type).
#include "core/config/resolved_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/app/sweeps/spec.h"
#include "core/app/sweeps/spec_file.h"
#include "core/config/config.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

void expect_flat_is_the_printed_text_flattened(const ResolvedConfig& config) {
  const FlatConfig from_text = flatten_config(config.to_toml());
  ASSERT_FALSE(from_text.empty());
  EXPECT_EQ(config.flat(), from_text);
}

TEST(ResolvedConfigFlat, IsTheCanonicalTomlFlattenedForEveryShippedExperimentAndSweepMember) {
  // Sweep files name their base experiment relative to the source tree, as users run kiln there.
  const testing::InDirectory in_source_tree(KILN_SOURCE_DIR);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator("experiments")) {
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  int experiments = 0, members = 0;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    if (is_sweep_file(file.string())) {
      const SweepSpec spec = load_sweep_file(file.string());
      for (const auto& member : expand_sweep(spec)) {
        SCOPED_TRACE(member.name);
        expect_flat_is_the_printed_text_flattened(load_config(spec.base, member.overrides));
        ++members;
      }
      continue;
    }
    expect_flat_is_the_printed_text_flattened(load_config(file.string(), {}));
    ++experiments;
  }
  // Guards against an empty listing passing vacuously.
  EXPECT_GE(experiments, 8);
  EXPECT_GE(members, 3);
}

TEST(ResolvedConfigFlat, AgreesOnEscapedStringsFloatsAndAFamilysEntries) {
  const char* const blend = R"([model]
type = "gpt"

[data]
type = "blend"

[data.sources.web]
train = "web/*.bin"
weight = 0.7

[data.sources.code]
train = "code/*.bin"
)";
  const ResolvedConfig config =
      load_config_text(blend, "exp.toml",
                       {"data.sources.code.weight=1e-3",
                        R"(run.name="quote \" back\\slash tab\t é")", "optimizer.lr=3"});
  expect_flat_is_the_printed_text_flattened(config);
  const FlatConfig flat = config.flat();
  EXPECT_EQ(flat.at("data.sources.code.weight"), "0.001");
  EXPECT_EQ(flat.at("data.type"), "\"blend\"");
  EXPECT_EQ(flat.at("run.name"), R"("quote \" back\\slash tab\t é")");
  EXPECT_EQ(flat.at("optimizer.lr"), "3.0");
  EXPECT_EQ(flat.count("run.type"), 0u);  // a core section names no plugin
}

}  // namespace
}  // namespace kiln
