#include "core/layers/interchange_weights.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/util/error.h"

namespace kiln {

void check_interchange_weights(const std::map<std::string, at::Tensor>& given,
                               const std::vector<InterchangeTensor>& needed,
                               const std::string& model,
                               const std::function<bool(const std::string& name)>& ignorable) {
  std::vector<std::string> problems;
  std::set<std::string> known;
  for (const auto& [name, shape] : needed) {
    known.insert(name);
    auto it = given.find(name);
    if (it == given.end()) {
      problems.push_back("missing " + name);
    } else if (it->second.sizes().vec() != shape) {
      problems.push_back(fmt::format("{} is [{}] but the model needs [{}]", name,
                                     fmt::join(it->second.sizes().vec(), ", "),
                                     fmt::join(shape, ", ")));
    }
  }
  for (const auto& [name, _] : given) {
    if (!known.count(name) && !ignorable(name)) problems.push_back("unexpected " + name);
  }
  if (!problems.empty()) {
    throw UserError(fmt::format("the weights do not fit this {} ({} problem(s)): {}", model,
                                problems.size(), fmt::join(problems, "; ")));
  }
}

}  // namespace kiln
