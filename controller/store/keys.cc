#include "controller/store/keys.h"

namespace falcon::controller::store::keys {

void AppendU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void AppendU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

std::optional<uint32_t> ReadU32(absl::string_view in, size_t* pos) {
  if (*pos + 4 > in.size()) return std::nullopt;
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[(*pos)++]);
  return v;
}

std::optional<uint64_t> ReadU64(absl::string_view in, size_t* pos) {
  if (*pos + 8 > in.size()) return std::nullopt;
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[(*pos)++]);
  return v;
}

namespace {

// Where the rest of a "<job>\0..." key starts; nullopt without the separator.
std::optional<size_t> AfterJob(absl::string_view key) {
  const size_t zero = key.find('\0');
  if (zero == absl::string_view::npos) return std::nullopt;
  return zero + 1;
}

}  // namespace

std::string EventKey(uint64_t event_id) {
  std::string key;
  AppendU64(&key, event_id);
  return key;
}

std::string AuditKey(uint64_t audit_id) { return EventKey(audit_id); }

std::string JobPrefix(absl::string_view job) {
  std::string key(job);
  key.push_back('\0');
  return key;
}

std::string DirectiveKey(absl::string_view job, uint64_t directive_id) {
  std::string key = JobPrefix(job);
  AppendU64(&key, directive_id);
  return key;
}

std::string DirectiveAckKey(absl::string_view job, uint64_t directive_id, uint32_t position) {
  std::string key = DirectiveKey(job, directive_id);
  AppendU32(&key, position);
  return key;
}

bool ParseDirectiveAckKey(absl::string_view key, std::string* job, uint64_t* directive_id,
                          uint32_t* position) {
  std::optional<size_t> rest = AfterJob(key);
  if (!rest) return false;
  size_t pos = *rest;
  std::optional<uint64_t> id = ReadU64(key, &pos);
  std::optional<uint32_t> p = ReadU32(key, &pos);
  if (!id || !p || pos != key.size()) return false;
  *job = std::string(key.substr(0, *rest - 1));
  *directive_id = *id;
  *position = *p;
  return true;
}

std::string JobPartKey(absl::string_view job, absl::string_view agent_id) {
  std::string key = JobPrefix(job);
  key.append(agent_id.data(), agent_id.size());
  return key;
}

std::string HistoryKey(absl::string_view job, int64_t iteration) {
  std::string key = JobPrefix(job);
  AppendU64(&key, static_cast<uint64_t>(iteration));
  return key;
}

std::string SampleRowKey(absl::string_view job, int64_t iteration, uint32_t first_rank) {
  std::string key = JobPrefix(job);
  AppendU64(&key, static_cast<uint64_t>(iteration));
  AppendU32(&key, first_rank);
  return key;
}

bool ParseSampleRowKey(absl::string_view key, std::string* job, int64_t* iteration,
                       uint32_t* first_rank) {
  std::optional<size_t> rest = AfterJob(key);
  if (!rest) return false;
  size_t pos = *rest;
  std::optional<uint64_t> it = ReadU64(key, &pos);
  std::optional<uint32_t> r = ReadU32(key, &pos);
  if (!it || !r || pos != key.size()) return false;
  *job = std::string(key.substr(0, *rest - 1));
  *iteration = static_cast<int64_t>(*it);
  *first_rank = *r;
  return true;
}

std::string LegacySampleKey(absl::string_view job, uint32_t rank, int64_t iteration) {
  std::string key = JobPrefix(job);
  AppendU32(&key, rank);
  AppendU64(&key, static_cast<uint64_t>(iteration));
  return key;
}

bool ParseLegacySampleKey(absl::string_view key, std::string* job, uint32_t* rank,
                          int64_t* iteration) {
  std::optional<size_t> rest = AfterJob(key);
  if (!rest) return false;
  size_t pos = *rest;
  std::optional<uint32_t> r = ReadU32(key, &pos);
  std::optional<uint64_t> it = ReadU64(key, &pos);
  if (!r || !it || pos != key.size()) return false;
  *job = std::string(key.substr(0, *rest - 1));
  *rank = *r;
  *iteration = static_cast<int64_t>(*it);
  return true;
}

}  // namespace falcon::controller::store::keys
