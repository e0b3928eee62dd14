// Typed parameters: what a config section or a plugin declares (ParamSpec) and the validated,
// defaults-filled values handed to it (Params). No LibTorch here: the config loader, the
// registry listing and the tests use it without paying for torch headers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

enum class ParamType { kInt, kFloat, kBool, kString };
const char* type_name(ParamType type);

using ParamValue = std::variant<int64_t, double, bool, std::string>;  // canonical.h writes it

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kInt;
  ParamValue default_value;
  std::string doc;
  std::optional<double> min;  // inclusive bounds for numbers
  std::optional<double> max;
  std::vector<std::string> choices;  // allowed strings; empty = any
  bool hashed = true;  // false for keys that name or place a run but cannot change its numbers
  // A path or glob of files the run reads (data.train, model.init_from): relative to the directory
  // the run is made in. The run store keeps its absolute form and a fingerprint of the files
  // beside the value as given (core/store/runs/inputs.h), and every later command reads them
  // there, from whatever directory it runs in; the hash keeps the value as given.
  bool names_files = false;
  // A key added after runs were made with its section: at its default it stays out of the hash,
  // so those runs keep theirs (a resume, snapshot ownership and grouping compare hashes).
  bool hashed_when_set = false;
  // A family of named entries: tables [data.sources.web], [data.sources.code], ... each holding
  // the keys `fields` declares, read as the keys sources.web.weight, sources.code.train, ... (and
  // set as --set data.sources.web.weight=0.5). An entry exists once any of its keys is written;
  // its other fields take their defaults. Empty for a plain key.
  std::vector<ParamSpec> fields;
  bool min_exclusive = false;  // `min` itself is out of range (above())
  // A string key that also takes an array of strings, held as their comma-separated join (so
  // ["q_proj", "v_proj"] and "q_proj,v_proj" are the same value, and hash alike).
  bool takes_list = false;

  static ParamSpec integer(std::string name, int64_t def, std::string doc);
  static ParamSpec real(std::string name, double def, std::string doc);
  static ParamSpec flag(std::string name, bool def, std::string doc);
  static ParamSpec text(std::string name, std::string def, std::string doc);
  static ParamSpec family(std::string name, std::string doc, std::vector<ParamSpec> fields);
  bool is_family() const { return !fields.empty(); }

  ParamSpec&& at_least(double bound) &&;
  ParamSpec&& above(double bound) &&;  // > bound
  ParamSpec&& at_most(double bound) &&;
  // A choice "NAME:N" also accepts NAME:0, NAME:1, ... (up to 4 digits): run.device's cuda:N.
  ParamSpec&& one_of(std::vector<std::string> allowed) &&;
  ParamSpec&& unhashed() &&;
  ParamSpec&& files() &&;        // names_files
  ParamSpec&& list() &&;         // takes_list
  ParamSpec&& added_later() &&;  // hashed_when_set

  // Why `value` is not acceptable, or nothing when it is.
  std::optional<std::string> check(const ParamValue& value) const;
  std::string describe_range() const;
};

// The spec of `key` among `specs`: a plain key, or a family's field ("sources.web.weight": the
// field "weight" of family "sources"). Null when none matches.
const ParamSpec* find_param(const std::vector<ParamSpec>& specs, const std::string& key);

// Why the entry a family key (sources.NAME.FIELD) names cannot be one (letters, digits, '_' and
// '-' only), or nothing; nothing for a plain key.
std::optional<std::string> entry_name_problem(const std::string& key);

// Why `key` of section `section`, which matches no spec, is not a key of one of the families
// among `specs` (a family given a value or an array of tables, an entry's unknown field), or
// nothing when it does not look like one.
std::optional<std::string> family_key_problem(const std::vector<ParamSpec>& specs,
                                              const std::string& section, const std::string& key);

// The resolved values of one section: every declared key present, types already checked.
class Params {
 public:
  void set(const std::string& key, ParamValue value) { values_[key] = std::move(value); }
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  bool flag(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  const ParamValue& value(const std::string& key) const;
  // A names_files key as the run reads it: the absolute form recorded for it (resolve_path),
  // else its value made absolute against the current directory; "" stays "".
  std::string path(const std::string& key) const;
  // Where the key's files are for this run (the run store's record of its start): not part of
  // the values, so neither the config's text nor its hash changes.
  void resolve_path(const std::string& key, std::string absolute) {
    resolved_paths_[key] = std::move(absolute);
  }
  const std::map<std::string, ParamValue>& values() const { return values_; }
  // The entries of family `family` (the NAMEs of its keys family.NAME.FIELD), in name order.
  std::vector<std::string> entries(const std::string& family) const;

 private:
  std::map<std::string, ParamValue> values_;
  std::map<std::string, std::string> resolved_paths_;
};

// The keys of `spec` that `params` lacks and that take their defaults: the key itself, or for a
// family, the fields its entries leave out.
std::vector<std::string> missing_keys(const ParamSpec& spec, const Params& params);

}  // namespace kiln
