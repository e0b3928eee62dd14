// The non-tensor part of a snapshot (snapshot_state.h): state.json's fields, and the RNG states
// it holds as hex strings. Apart from snapshot.cpp, which writes, checks and loads the files.
#include "core/checkpoint/snapshot_state.h"

#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/cuda.h>

namespace kiln {

namespace {

std::string to_hex(const at::Tensor& bytes) {
  auto contiguous = bytes.contiguous();
  const auto* data = contiguous.data_ptr<uint8_t>();
  std::string out;
  out.reserve(2 * static_cast<size_t>(contiguous.numel()));
  for (int64_t i = 0; i < contiguous.numel(); ++i)
    out += fmt::format("{:02x}", data[i]);
  return out;
}

at::Tensor from_hex(const std::string& hex) {
  auto out = at::empty({static_cast<int64_t>(hex.size() / 2)}, at::kByte);
  auto* data = out.data_ptr<uint8_t>();
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    data[i / 2] = static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

std::vector<at::Generator> generators() {
  std::vector<at::Generator> out = {at::detail::getDefaultCPUGenerator()};
  // device_count() is a size_t up to 2.x and a DeviceIndex in 2.14.
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(at::globalContext().defaultGenerator(
        at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i))));
  }
  return out;
}

}  // namespace

nlohmann::json capture_rng_states() {
  nlohmann::json states = nlohmann::json::array();
  for (auto& gen : generators()) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.push_back(to_hex(gen.get_state()));
  }
  return states;
}

void restore_rng(const nlohmann::json& states) {
  auto gens = generators();
  for (size_t i = 0; i < gens.size() && i < states.size(); ++i) {
    std::lock_guard<std::mutex> lock(gens[i].mutex());
    gens[i].set_state(from_hex(states[i].get<std::string>()));
  }
}

nlohmann::json state_to_json(const SnapshotState& s) {
  nlohmann::json positions = nlohmann::json::array();
  for (const auto& p : s.data_positions) {
    positions.push_back({{"shard", p.shard}, {"offset", p.offset}, {"epoch", p.epoch}});
  }
  nlohmann::json j = {
      {"step", s.step},
      {"tokens_seen", s.tokens_seen},
      {"world_size", s.world_size},
      {"data_positions", positions},
      {"precision", s.precision},
      {"config_hash", s.config_hash},
      {"config", s.config_toml},
      {"rng_by_rank",
       s.rng_by_rank.empty() ? nlohmann::json::array({capture_rng_states()}) : s.rng_by_rank}};
  j["best_val_loss"] = s.best_val_loss ? nlohmann::json(*s.best_val_loss) : nlohmann::json();
  return j;
}

SnapshotState state_from_json(const nlohmann::json& j) {
  SnapshotState s;
  s.step = j.at("step");
  s.tokens_seen = j.at("tokens_seen");
  s.world_size = j.at("world_size");
  for (const auto& p : j.at("data_positions")) {
    s.data_positions.push_back({p.at("shard"), p.at("offset"), p.at("epoch")});
  }
  if (!j.at("best_val_loss").is_null()) s.best_val_loss = j.at("best_val_loss").get<double>();
  s.precision = j.at("precision");
  s.config_hash = j.at("config_hash");
  s.config_toml = j.at("config");
  // Before per-rank states, "rng" held rank 0's, which every rank took.
  s.rng_by_rank =
      j.contains("rng_by_rank") ? j.at("rng_by_rank") : nlohmann::json::array({j.at("rng")});
  return s;
}

}  // namespace kiln
