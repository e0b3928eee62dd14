#include "core/config/registry.h"

#include <stdexcept>

#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

Catalog& Catalog::global() {
  static Catalog catalog;
  return catalog;
}

void Catalog::add(PluginSpec spec) {
  auto& kind = by_kind_[spec.kind];
  if (kind.count(spec.name)) {
    throw std::logic_error("two " + spec.kind + " plugins are both named '" + spec.name + "'");
  }
  kind.emplace(spec.name, std::move(spec));
}

const PluginSpec* Catalog::find(const std::string& kind, const std::string& name) const {
  auto k = by_kind_.find(kind);
  if (k == by_kind_.end()) return nullptr;
  auto p = k->second.find(name);
  return p == k->second.end() ? nullptr : &p->second;
}

const PluginSpec* Catalog::default_for(const std::string& kind) const {
  for (const PluginSpec* spec : plugins(kind)) {
    if (spec->is_default) return spec;
  }
  return nullptr;
}

std::vector<std::string> Catalog::kinds() const {
  std::vector<std::string> out;
  for (const auto& [kind, _] : by_kind_)
    out.push_back(kind);
  return out;
}

std::vector<const PluginSpec*> Catalog::plugins(const std::string& kind) const {
  std::vector<const PluginSpec*> out;
  auto k = by_kind_.find(kind);
  if (k == by_kind_.end()) return out;
  for (const auto& [_, spec] : k->second)
    out.push_back(&spec);
  return out;
}

std::vector<std::string> Catalog::names(const std::string& kind) const {
  std::vector<std::string> out;
  for (const PluginSpec* spec : plugins(kind))
    out.push_back(spec->name);
  return out;
}

void throw_unknown(const std::string& kind, const std::string& name) {
  throw UserError("unknown " + kind + " plugin '" + name +
                  "': available: " + join(Catalog::global().names(kind), ", "));
}

}  // namespace kiln
