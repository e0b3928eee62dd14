#include "core/checkpoint/state_shards.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/weights_io.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

std::string part_name(const StateSlice& part) {
  bool at_origin = true;
  for (int64_t offset : part.offsets)
    at_origin = at_origin && offset == 0;
  return at_origin ? part.tensor : fmt::format("{}@{}", part.tensor, fmt::join(part.offsets, ","));
}

// A part as the manifest describes it.
struct StoredPart {
  std::string file;
  at::ScalarType dtype;
  std::vector<int64_t> whole, offsets, shape;
  int64_t begin = 0;
};

std::map<std::string, std::vector<StoredPart>> stored_parts(const nlohmann::json& files) {
  std::map<std::string, std::vector<StoredPart>> out;
  for (const auto& [file, entry] : files.items()) {
    if (!entry.contains("parts")) continue;
    for (const auto& part : entry.at("parts")) {
      out[part.at("tensor").get<std::string>()].push_back(
          {file, dtype_of_safetensors(part.at("dtype").get<std::string>()),
           part.at("whole").get<std::vector<int64_t>>(),
           part.at("offsets").get<std::vector<int64_t>>(),
           part.at("shape").get<std::vector<int64_t>>(), part.at("begin").get<int64_t>()});
    }
  }
  return out;
}

// The snapshot's files, opened once each for the reads of one load.
class OpenFiles {
 public:
  explicit OpenFiles(std::string dir) : dir_(std::move(dir)) {}
  ~OpenFiles() {
    for (auto& [name, fd] : fds_)
      ::close(fd);
  }
  OpenFiles(const OpenFiles&) = delete;
  OpenFiles& operator=(const OpenFiles&) = delete;

  // `bytes` bytes at `offset` of `file` into `into`.
  void read(const std::string& file, int64_t offset, void* into, int64_t bytes) {
    const std::string path = dir_ + "/" + file;
    auto [it, fresh] = fds_.emplace(file, -1);
    if (fresh) it->second = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (it->second < 0) {
      throw UserError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
    }
    char* out = static_cast<char*>(into);
    while (bytes > 0) {
      const ssize_t got = ::pread(it->second, out, static_cast<size_t>(bytes), offset);
      if (got <= 0) {
        throw UserError(fmt::format("cannot read '{}' at byte {}: {}", path, offset,
                                    got == 0 ? "the file ends there" : std::strerror(errno)));
      }
      out += got;
      offset += got;
      bytes -= got;
      read_ += got;
    }
  }
  int64_t bytes_read() const { return read_; }

 private:
  std::string dir_;
  std::map<std::string, int> fds_;
  int64_t read_ = 0;
};

// Copies into `part` what `stored` holds of it, reading only the stored rows that overlap it
// (whole rows: the other dims are cut in memory); returns the elements copied.
int64_t copy_overlap(OpenFiles& files, const StoredPart& stored, const StateSlice& part) {
  const size_t dims = part.whole.size();
  std::vector<int64_t> low(dims), high(dims);
  for (size_t d = 0; d < dims; ++d) {
    low[d] = std::max(part.offsets[d], stored.offsets[d]);
    high[d] = std::min(part.offsets[d] + part.local.size(static_cast<int64_t>(d)),
                       stored.offsets[d] + stored.shape[d]);
    if (low[d] >= high[d]) return 0;
  }
  std::vector<int64_t> rows_shape = stored.shape;
  int64_t first_row = 0;
  if (dims > 0) {
    first_row = low[0] - stored.offsets[0];
    rows_shape[0] = high[0] - low[0];
  }
  at::Tensor rows = at::empty(rows_shape, at::TensorOptions(stored.dtype));
  const int64_t row_bytes = dims > 0 ? static_cast<int64_t>(rows.nbytes()) / rows_shape[0] : 0;
  files.read(stored.file, stored.begin + first_row * row_bytes, rows.data_ptr(),
             static_cast<int64_t>(rows.nbytes()));
  at::Tensor from = rows, into = part.local;
  int64_t elements = 1;
  for (size_t d = 0; d < dims; ++d) {
    const auto dim = static_cast<int64_t>(d);
    if (d > 0) from = from.narrow(dim, low[d] - stored.offsets[d], high[d] - low[d]);
    into = into.narrow(dim, low[d] - part.offsets[d], high[d] - low[d]);
    elements *= high[d] - low[d];
  }
  into.copy_(from);
  return elements;
}

}  // namespace

std::string state_shard_name(int rank) {
  return fmt::format("shard_{}.safetensors", rank);
}

void copy_to_host(const std::vector<StateSlice>& slices, std::vector<StateSlice>& into) {
  std::vector<StateSlice> written;
  for (const auto& part : slices) {
    if (part.writes && part.local.numel() > 0) written.push_back(part);
  }
  bool reuse = written.size() == into.size();
  for (size_t i = 0; reuse && i < written.size(); ++i) {
    reuse = into[i].local.sizes() == written[i].local.sizes() &&
            into[i].local.scalar_type() == written[i].local.scalar_type();
  }
  for (size_t i = 0; i < written.size(); ++i) {
    const at::Tensor& from = written[i].local;
    at::Tensor host =
        reuse ? into[i].local
              : at::empty(from.sizes(),
                          from.options().device(at::kCPU).pinned_memory(from.is_cuda()));
    host.copy_(from);
    written[i].local = host;
  }
  into = std::move(written);
}

nlohmann::json write_state_shard(const std::string& path, const std::vector<StateSlice>& slices,
                                 const std::function<void()>& after_first_part) {
  std::vector<at::Tensor> data;  // on the host, contiguous
  std::vector<TensorBlob> blobs;
  for (const auto& part : slices) {
    if (!part.writes || part.local.numel() == 0) continue;
    data.push_back(part.local.detach().to(at::kCPU).contiguous());
    const at::Tensor& t = data.back();
    blobs.push_back({part_name(part), safetensors_dtype(t.scalar_type()), t.sizes().vec(),
                     t.data_ptr(), t.nbytes()});
  }
  const std::string header = safetensors_header(blobs, {{"format", "kiln state shard"}});
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> sum(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(sum.get());
  SyncedFileWriter file(path);
  const auto write = [&](const void* bytes, size_t size) {
    file.write(bytes, size);
    XXH3_64bits_update(sum.get(), bytes, size);
  };
  write(header.data(), header.size());
  nlohmann::json parts = nlohmann::json::array();
  auto begin = static_cast<int64_t>(header.size());
  size_t k = 0;
  for (const auto& part : slices) {
    if (!part.writes || part.local.numel() == 0) continue;
    const TensorBlob& blob = blobs[k++];
    write(blob.data, blob.bytes);
    if (k == 1) after_first_part();
    const auto end = begin + static_cast<int64_t>(blob.bytes);
    parts.push_back({{"tensor", part.tensor},
                     {"dtype", blob.dtype},
                     {"whole", part.whole},
                     {"offsets", part.offsets},
                     {"shape", blob.shape},
                     {"begin", begin},
                     {"end", end}});
    begin = end;
  }
  file.finish();
  return {{"bytes", begin},
          {"xxh3", fmt::format("{:016x}", XXH3_64bits_digest(sum.get()))},
          {"parts", parts}};
}

int64_t read_state_shards(const std::string& dir, const nlohmann::json& files,
                          const std::vector<StateSlice>& slices) {
  const auto stored = stored_parts(files);
  OpenFiles open(dir);
  std::vector<std::string> problems;
  at::NoGradGuard no_grad;
  for (const auto& part : slices) {
    const auto found = stored.find(part.tensor);
    if (found == stored.end()) {
      problems.push_back(part.tensor + " is not in the snapshot");
      continue;
    }
    if (found->second.front().whole != part.whole) {
      problems.push_back(fmt::format("{} is [{}] in the snapshot, [{}] in the model", part.tensor,
                                     fmt::join(found->second.front().whole, ", "),
                                     fmt::join(part.whole, ", ")));
      continue;
    }
    int64_t copied = 0;
    for (const auto& piece : found->second)
      copied += copy_overlap(open, piece, part);
    if (copied != part.local.numel()) {
      problems.push_back(fmt::format("the snapshot holds {} of the {} elements of {}'s part here",
                                     copied, part.local.numel(), part.tensor));
    }
  }
  if (!problems.empty()) {
    const size_t shown = std::min<size_t>(problems.size(), 3);
    throw UserError(fmt::format(
        "{} tensor(s) differ: {}{}", problems.size(),
        fmt::join(problems.begin(), problems.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
        shown < problems.size() ? "; ..." : ""));
  }
  return open.bytes_read();
}

}  // namespace kiln
