#include "trainer/checkpoint/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace falcon::trainer::checkpoint {
namespace {

constexpr char kMagic[8] = {'F', 'L', 'C', 'N', 'C', 'K', 'P', '1'};

std::string LayerPath(const std::string& dir, int layer) {
  return absl::StrCat(dir, "/layer_", layer, ".bin");
}

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

// Writes `data` to path atomically (temp file + rename).
absl::Status WriteFileAtomic(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return IoError("cannot create", tmp);
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !ok) return IoError("cannot write", tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return IoError("cannot rename to", path);
  return absl::OkStatus();
}

// The manifest's layer split fits its shape (or is empty).
absl::Status CheckSplit(const CheckpointManifest& m) {
  if (m.layer_split.empty()) return absl::OkStatus();
  if (static_cast<int>(m.layer_split.size()) != m.dp) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer_split has ", m.layer_split.size(), " entries for dp ", m.dp));
  }
  for (size_t d = 0; d < m.layer_split.size(); ++d) {
    const std::vector<int>& stages = m.layer_split[d];
    int64_t sum = 0;
    for (int b : stages) {
      if (b < 1) return absl::InvalidArgumentError(absl::StrCat("layer_split[", d, "] has ", b));
      sum += b;
    }
    if (static_cast<int>(stages.size()) != m.pp || sum != m.model.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer_split[", d, "] has ", stages.size(), " stages of ", sum,
          " blocks; the checkpoint has pp ", m.pp, " and ", m.model.num_blocks, " blocks"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create checkpoint directory '", dir, "': ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteManifest(const std::string& dir, const CheckpointManifest& m) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  nlohmann::json j = {
      {"format", "falcon-trainer-checkpoint-1"},
      {"iteration", m.iteration},
      {"plan_version", m.plan_version},
      {"seed", m.seed},
      {"model",
       {{"vocab_size", m.model.vocab_size},
        {"context", m.model.context},
        {"embed_dim", m.model.embed_dim},
        {"hidden", m.model.hidden},
        {"ffn", m.model.ffn},
        {"num_blocks", m.model.num_blocks},
        {"micro_batch_size", m.model.micro_batch_size}}},
      {"world", m.world},
      {"dp", m.dp},
      {"pp", m.pp},
      {"micro_batches", m.micro_batches},
      {"micro_batch_plan", m.micro_batch_plan},
      {"layer_split", m.layer_split},
      {"excluded_ranks", m.excluded_ranks},
      {"last_loss", m.last_loss},
  };
  return WriteFileAtomic(dir + "/manifest.json", j.dump(2) + "\n");
}

absl::StatusOr<CheckpointManifest> ReadManifest(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no checkpoint manifest at '", path, "'"));
  std::ostringstream buf;
  buf << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", "") != "falcon-trainer-checkpoint-1") {
    return absl::DataLossError(absl::StrCat("'", path, "' is not a trainer checkpoint manifest"));
  }
  CheckpointManifest m;
  try {
    m.iteration = j.at("iteration").get<int64_t>();
    m.plan_version = j.at("plan_version").get<int64_t>();
    m.seed = j.at("seed").get<uint64_t>();
    const nlohmann::json& model = j.at("model");
    m.model.vocab_size = model.at("vocab_size").get<int>();
    m.model.context = model.at("context").get<int>();
    m.model.embed_dim = model.at("embed_dim").get<int>();
    m.model.hidden = model.at("hidden").get<int>();
    m.model.ffn = model.at("ffn").get<int>();
    m.model.num_blocks = model.at("num_blocks").get<int>();
    m.model.micro_batch_size = model.at("micro_batch_size").get<int>();
    m.world = j.at("world").get<int>();
    m.dp = j.at("dp").get<int>();
    m.pp = j.at("pp").get<int>();
    m.micro_batches = j.at("micro_batches").get<int>();
    m.micro_batch_plan = j.at("micro_batch_plan").get<std::vector<int>>();
    if (j.contains("layer_split")) {
      m.layer_split = j.at("layer_split").get<std::vector<std::vector<int>>>();
    }
    m.excluded_ranks = j.at("excluded_ranks").get<std::vector<int>>();
    m.last_loss = j.at("last_loss").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint manifest '", path, "': ", e.what()));
  }
  if (absl::Status s = CheckSplit(m); !s.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint manifest '", path, "': ", s.message()));
  }
  return m;
}

absl::Status WriteLayer(const std::string& dir, int layer, int64_t n, const float* params,
                        const float* adam_m, const float* adam_v) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  std::string data(kMagic, sizeof(kMagic));
  const int32_t l = layer;
  data.append(reinterpret_cast<const char*>(&l), sizeof(l));
  data.append(reinterpret_cast<const char*>(&n), sizeof(n));
  for (const float* a : {params, adam_m, adam_v}) {
    data.append(reinterpret_cast<const char*>(a), static_cast<size_t>(n) * sizeof(float));
  }
  return WriteFileAtomic(LayerPath(dir, layer), data);
}

absl::Status ReadLayer(const std::string& dir, int layer, int64_t n, float* params, float* adam_m,
                       float* adam_v) {
  const std::string path = LayerPath(dir, layer);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint layer file '", path, "' missing"));
  char magic[sizeof(kMagic)];
  int32_t l = -1;
  int64_t count = -1;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&l), sizeof(l));
  in.read(reinterpret_cast<char*>(&count), sizeof(count));
  if (!in || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 || l != layer || count != n) {
    return absl::DataLossError(absl::StrCat("checkpoint layer file '", path, "' holds layer ", l,
                                            " with ", count, " values; expected layer ", layer,
                                            " with ", n));
  }
  for (float* a : {params, adam_m, adam_v}) {
    in.read(reinterpret_cast<char*>(a), static_cast<std::streamsize>(n * sizeof(float)));
  }
  if (!in) return absl::DataLossError(absl::StrCat("checkpoint layer file '", path, "' truncated"));
  return absl::OkStatus();
}

}  // namespace falcon::trainer::checkpoint
