#include "core/config/extends.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "core/config/toml_text.h"
#include "core/util/error.h"
#include "core/util/sha256.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

// Far beyond any experiment file: a bigger base is some other file (/proc/kcore, a data shard).
constexpr size_t kMaxBaseBytes = 1 << 20;

// The same file whatever path reaches it (`./a.toml`, `../x/a.toml`, a symlink), so that a
// cycle is found however its names are spelled.
std::string identity(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? fs::absolute(path).lexically_normal().string() : canonical.string();
}

std::string where(const std::string& file, const toml::node& node) {
  const auto& begin = node.source().begin;
  return fmt::format("{}:{}:{}", file, begin.line, begin.column);
}

// A name an `extends` wrote, and its node (for the place of an error).
struct BaseName {
  std::string written;
  const toml::node* node = nullptr;
};

std::vector<BaseName> base_names(const std::string& file, const toml::table& root) {
  const toml::node* node = root.get("extends");
  if (!node) return {};
  auto refuse = [&](const toml::node& at) {
    throw UserError(fmt::format(
        "{}: 'extends' must be a file name or a list of file names, e.g. extends = \"base.toml\"",
        where(file, at)));
  };
  if (const auto* name = node->as_string()) return {{name->get(), node}};
  const auto* list = node->as_array();
  if (!list) refuse(*node);
  std::vector<BaseName> names;
  for (const auto& element : *list) {
    const auto* name = element.as_string();
    if (!name) refuse(element);
    names.push_back({name->get(), &element});
  }
  return names;
}

class ChainReader {
 public:
  ChainReader(std::string kind, const LayerRefusal& refuse)
      : kind_(std::move(kind)), refuse_(refuse) {}

  // `path` and, first, its bases into layers.
  void read(const std::string& path, const std::string& text) {
    toml::table root = parse_toml(text, path);
    const bool is_base = !reading_.empty();
    if (is_base) {
      if (std::string why = refuse_(root); !why.empty()) fail(fmt::format("'{}' {}", path, why));
    }
    reading_.push_back(identity(path));
    for (const auto& base : base_names(path, root)) {
      if (!is_base) origin_ = where(path, *base.node);
      chain_.push_back(base.written);
      const std::string base_path =
          (fs::path(path).parent_path() / base.written).lexically_normal().string();
      const std::string id = identity(base_path);
      if (std::find(reading_.begin(), reading_.end(), id) != reading_.end()) fail("a cycle");
      if (!applied_.count(id)) read(base_path, read_base(base_path));
      chain_.pop_back();
    }
    reading_.pop_back();
    root.erase("extends");
    applied_.insert(identity(path));
    layers.push_back({path, sha256_hex(text), std::move(root)});
  }

  std::vector<TomlLayer> layers;

 private:
  std::string read_base(const std::string& path) const {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      fail(fmt::format("no such file '{}': check the path (relative to the file that names it)",
                       path));
    }
    if (fs::is_directory(path, ec)) fail(fmt::format("'{}' is a directory, not {}", path, kind_));
    // Not a FIFO or a device, whose reading would wait forever or never end.
    if (!fs::is_regular_file(path, ec)) {
      fail(fmt::format("'{}' is not a regular file, so not {}", path, kind_));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
    // Read up to the limit rather than trusting the size: files of /proc say they are empty.
    std::string text;
    char chunk[1 << 16];
    while (text.size() <= kMaxBaseBytes && in.read(chunk, sizeof chunk).gcount() > 0)
      text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBaseBytes) {
      fail(fmt::format("'{}' is larger than 1 MiB, so not {} (those are a few kilobytes)", path,
                       kind_));
    }
    return text;
  }

  // "a.toml:1:11: extends 'b.toml', which extends 'c.toml': <what>"
  [[noreturn]] void fail(const std::string& what) const {
    std::string chain = "extends '" + chain_.front() + "'";
    for (size_t i = 1; i < chain_.size(); ++i)
      chain += ", which extends '" + chain_[i] + "'";
    throw UserError(fmt::format("{}: {}: {}", origin_, chain, what));
  }

  std::string kind_;
  const LayerRefusal& refuse_;
  std::set<std::string> applied_;     // identities of the files already in `layers`
  std::vector<std::string> reading_;  // identities of the files being read, the first file first
  std::vector<std::string> chain_;    // the names written from the first file to the one read
  std::string origin_;                // the place in the first file where chain_ starts
};

}  // namespace

std::vector<TomlLayer> read_extends_chain(const std::string& path, const std::string& text,
                                          const std::string& kind, const LayerRefusal& refuse) {
  ChainReader reader(kind, refuse);
  reader.read(path, text);
  return std::move(reader.layers);
}

}  // namespace kiln
