// The plugin registry. Every concrete model, optimizer, schedule, precision policy, parallelism
// strategy, data source and tokenizer lives in one file under plugins/ and registers itself
// there, by name, with the parameters it declares:
//
//   const bool registered = ScheduleRegistry::add(
//       {"constant", "the same learning rate at every step", {...params...}},
//       [](const Params& p, double base_lr, int64_t steps) { return std::make_shared<...>(...); });
//
// Core code asks for a product by name and never names a plugin itself. The Catalog holds
// what the config loader and `kiln plugins` need (names, parameter specs, docs) with no
// LibTorch; Registry<Kind> adds the typed factory.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config/params.h"

namespace kiln {

struct PluginSpec {
  PluginSpec(std::string name, std::string doc, std::vector<ParamSpec> params,
             bool is_default = false)
      : name(std::move(name)),
        doc(std::move(doc)),
        params(std::move(params)),
        is_default(is_default) {}

  std::string name;
  std::string doc;
  std::vector<ParamSpec> params;
  bool is_default = false;  // picked when a config section names no `type`
  std::string kind;         // filled in by Registry<Kind>::add
};

class Catalog {
 public:
  static Catalog& global();

  void add(PluginSpec spec);
  const PluginSpec* find(const std::string& kind, const std::string& name) const;
  const PluginSpec* default_for(const std::string& kind) const;
  std::vector<std::string> kinds() const;
  std::vector<const PluginSpec*> plugins(const std::string& kind) const;
  std::vector<std::string> names(const std::string& kind) const;

 private:
  std::map<std::string, std::map<std::string, PluginSpec>> by_kind_;
};

// A UserError listing the plugins of `kind` that do exist.
[[noreturn]] void throw_unknown(const std::string& kind, const std::string& name);

// Kind is a tag type naming the kind and the factory signature, e.g.
//   struct ScheduleKind { static constexpr const char* name = "schedule";
//                         using Product = Schedule;
//                         using Factory = std::function<std::shared_ptr<Schedule>(...)>; };
template <class Kind>
class Registry {
 public:
  using Factory = typename Kind::Factory;
  using Product = typename Kind::Product;

  static bool add(PluginSpec spec, Factory factory) {
    spec.kind = Kind::name;
    factories()[spec.name] = std::move(factory);
    Catalog::global().add(std::move(spec));
    return true;
  }

  // The config loader has already checked that `name` exists; a miss here is a bug.
  template <class... Args>
  static std::shared_ptr<Product> create(const std::string& name, Args&&... args) {
    auto it = factories().find(name);
    if (it == factories().end()) throw_unknown(Kind::name, name);
    return it->second(std::forward<Args>(args)...);
  }

 private:
  static std::map<std::string, Factory>& factories() {
    static std::map<std::string, Factory> table;
    return table;
  }
};

}  // namespace kiln
