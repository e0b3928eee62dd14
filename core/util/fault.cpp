#include "core/util/fault.h"

#include <csignal>
#include <cstdlib>
#include <string>

namespace kiln {

namespace {

struct Fault {
  std::string name;  // empty: no fault asked for
  long remaining = 0;
  bool and_after = false;  // "NAME:N+": the N-th visit and every one after it
};

Fault parse(const char* spec) {
  Fault fault;
  if (!spec || !*spec) return fault;
  std::string text(spec);
  if (!text.empty() && text.back() == '+') {
    fault.and_after = true;
    text.pop_back();
  }
  const auto colon = text.rfind(':');
  fault.name = text.substr(0, colon);
  fault.remaining = colon == std::string::npos ? 1 : std::atol(text.c_str() + colon + 1);
  return fault;
}

// What a due crash point raises: SIGKILL, or SIGSTOP under KILN_FAULT_SIGNAL=STOP.
int crash_signal() {
  const char* name = std::getenv("KILN_FAULT_SIGNAL");
  return name && std::string(name) == "STOP" ? SIGSTOP : SIGKILL;
}

}  // namespace

bool fault_due(const char* name) {
  static Fault fault = parse(std::getenv("KILN_FAULT"));
  if (fault.name.empty() || fault.name != name) return false;
  return --fault.remaining == 0 || (fault.and_after && fault.remaining < 0);
}

void fault_point(const char* name) {
  if (fault_due(name)) std::raise(crash_signal());
}

}  // namespace kiln
