#include "core/kernels/kernel_cpuinfo.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace kiln {

namespace {

std::string_view trimmed(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

std::optional<int> as_int(std::string_view s) {
  try {
    size_t used = 0;
    const int value = std::stoi(std::string(s), &used);
    if (used == s.size()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

KernelCpuInfo parse_kernel_cpuinfo(std::string_view text) {
  KernelCpuInfo info;
  bool in_block = false;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (trimmed(line).empty()) {
      if (in_block) break;  // the first processor's block ends at the first blank line
      continue;
    }
    in_block = true;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trimmed(line.substr(0, colon));
    const std::string_view value = trimmed(line.substr(colon + 1));
    if (key == "vendor_id") {
      info.vendor = value;
    } else if (key == "cpu family") {
      info.family = as_int(value);
    } else if (key == "model") {
      info.model = as_int(value);
    } else if (key == "model name") {
      info.model_name = value;
    } else if (key == "flags") {
      std::istringstream words{std::string(value)};
      info.flags.emplace();
      for (std::string word; words >> word;)
        info.flags->insert(word);
    }
  }
  return info;
}

KernelCpuInfo read_kernel_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_kernel_cpuinfo(text.str());
}

std::vector<std::string> cpu_disagreements(const CpuFeatures& cpu, const KernelCpuInfo& kernel) {
  std::vector<std::string> differences;
  if (!kernel.flags) return differences;
  auto yes_no = [](bool b) { return b ? "yes" : "no"; };
  for (const auto& [flag, has] : named_features(cpu)) {
    const bool kernel_has = kernel.flags->count(flag) == 1;
    if (has != kernel_has) {
      differences.push_back(
          fmt::format("{}: cpuid {}, kernel {}", flag, yes_no(has), yes_no(kernel_has)));
    }
  }
  // The peak's FMA width depends on the vendor and the family (cpu_peak.cpp).
  if (!kernel.vendor.empty() && kernel.vendor != cpu.vendor) {
    differences.push_back(fmt::format("vendor_id: cpuid {}, kernel {}", cpu.vendor, kernel.vendor));
  }
  if (kernel.family && *kernel.family != cpu.family) {
    differences.push_back(
        fmt::format("cpu family: cpuid {}, kernel {}", cpu.family, *kernel.family));
  }
  if (kernel.model && *kernel.model != cpu.model) {
    differences.push_back(fmt::format("model: cpuid {}, kernel {}", cpu.model, *kernel.model));
  }
  return differences;
}

std::string cpu_display_name(const std::string& cpuid_name, const std::string& kernel_name) {
  if (cpuid_name.empty()) return kernel_name.empty() ? "unknown model" : kernel_name;
  if (kernel_name.empty() || kernel_name == cpuid_name) return cpuid_name;
  return fmt::format("{} (kernel: {})", cpuid_name, kernel_name);
}

}  // namespace kiln
