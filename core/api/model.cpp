#include "core/api/model.h"

#include <unistd.h>

#include <new>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

torch::Tensor Model::forward(const torch::Tensor& tokens) {
  torch::Tensor x = tokens;
  for (const auto& layer : layers_)
    x = layer->forward(x);
  return x;
}

int64_t Model::parameter_count() const {
  int64_t total = 0;
  for (const auto& p : parameters())
    total += p.numel();
  return total;
}

double Model::flops_per_token(int64_t /*seq_len*/) const {
  return 6.0 * static_cast<double>(parameter_count());
}

std::vector<std::pair<std::string, torch::Tensor>> Model::export_weights() const {
  throw UserError("this model type has no interchange format to export to");
}

void Model::import_weights(const std::map<std::string, torch::Tensor>&) {
  throw UserError("this model type cannot load model.init_from weights");
}

std::shared_ptr<Model> build_within_memory(double parameters, const std::string& description,
                                           const std::function<std::shared_ptr<Model>()>& build) {
  const double bytes = 4 * parameters;
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                        static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory) {
    throw UserError(fmt::format(
        "model: {} has {:.3g} parameters ({:.1f} GiB in float32), more than this machine's "
        "{:.1f} GiB of memory: make the model smaller",
        description, parameters, bytes / (1 << 30), memory / (1 << 30)));
  }
  try {
    return build();
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("model: cannot build {}: {}: make the model smaller", description,
                                e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    throw UserError(
        fmt::format("model: out of memory building {}: make the model smaller", description));
  }
}

}  // namespace kiln
