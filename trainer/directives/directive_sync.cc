#include "trainer/directives/directive_sync.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"

namespace falcon::trainer::directives {
namespace {

constexpr char kDirectiveTag = 'D';
constexpr char kTaskTag = 'T';

void AppendItem(char tag, const google::protobuf::Message& msg, std::string* out) {
  const std::string bytes = msg.SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  out->push_back(tag);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out->append(bytes);
}

}  // namespace

std::string EncodePayload(const BoundaryMessage& message) {
  std::string out;
  for (const auto& d : message.directives) AppendItem(kDirectiveTag, d, &out);
  for (const auto& t : message.tasks) AppendItem(kTaskTag, t, &out);
  return out;
}

absl::Status DecodePayload(absl::string_view payload, BoundaryMessage* message) {
  size_t pos = 0;
  while (pos < payload.size()) {
    if (payload.size() - pos < 5) {
      return absl::DataLossError(absl::StrCat("boundary payload truncated at byte ", pos));
    }
    const char tag = payload[pos];
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) {
      n |= static_cast<uint32_t>(static_cast<unsigned char>(payload[pos + 1 + i])) << (8 * i);
    }
    pos += 5;
    if (payload.size() - pos < n) {
      return absl::DataLossError(absl::StrCat("boundary payload item of ", n,
                                              " bytes overruns the payload at byte ", pos));
    }
    const absl::string_view bytes = payload.substr(pos, n);
    pos += n;
    bool ok = false;
    if (tag == kDirectiveTag) {
      ok = message->directives.emplace_back().ParseFromArray(bytes.data(), static_cast<int>(n));
    } else if (tag == kTaskTag) {
      ok = message->tasks.emplace_back().ParseFromArray(bytes.data(), static_cast<int>(n));
    }
    if (!ok) {
      return absl::DataLossError(absl::StrCat("boundary payload item ", static_cast<int>(tag),
                                              " of ", n, " bytes does not parse"));
    }
  }
  return absl::OkStatus();
}

AgreedBoundary MergeBoundary(const std::vector<BoundaryMessage>& messages) {
  AgreedBoundary out;
  std::map<uint64_t, const falcon::v1::Directive*> directives;
  std::map<uint64_t, const falcon::v1::ValidationTask*> tasks;
  for (const BoundaryMessage& m : messages) {
    out.loss_sum += m.loss_sum;
    out.pause_expired = out.pause_expired || m.pause_expired;
    for (const auto& d : m.directives) directives.emplace(d.directive_id(), &d);
    for (const auto& t : m.tasks) tasks.emplace(t.task_id(), &t);
  }
  for (const auto& [id, d] : directives) out.directives.push_back(*d);
  for (const auto& [id, t] : tasks) out.tasks.push_back(*t);
  return out;
}

absl::StatusOr<AgreedBoundary> AgreeAtBoundary(collective::Communicator& world,
                                               const BoundaryMessage& mine) {
  const int n = world.size();
  const std::string payload = EncodePayload(mine);
  int64_t header[3] = {static_cast<int64_t>(payload.size()), 0,
                       mine.pause_expired ? int64_t{1} : int64_t{0}};
  static_assert(sizeof(double) == sizeof(int64_t));
  std::memcpy(&header[1], &mine.loss_sum, sizeof(double));
  std::vector<int64_t> headers(3 * n);
  if (absl::Status s = world.AllGather(collective::HostBuffer(header, 3),
                                       collective::HostBuffer(headers.data(), headers.size()));
      !s.ok()) {
    return s;
  }
  std::vector<BoundaryMessage> messages(n);
  int64_t max_len = 0;
  for (int r = 0; r < n; ++r) {
    std::memcpy(&messages[r].loss_sum, &headers[3 * r + 1], sizeof(double));
    messages[r].pause_expired = headers[3 * r + 2] != 0;
    max_len = std::max(max_len, headers[3 * r]);
  }
  if (max_len > 0) {
    std::vector<uint8_t> mine_padded(max_len, 0);
    std::memcpy(mine_padded.data(), payload.data(), payload.size());
    std::vector<uint8_t> all(static_cast<size_t>(max_len) * n);
    if (absl::Status s = world.AllGather(collective::HostBuffer(mine_padded.data(), max_len),
                                         collective::HostBuffer(all.data(), all.size()));
        !s.ok()) {
      return s;
    }
    for (int r = 0; r < n; ++r) {
      const absl::string_view view(reinterpret_cast<const char*>(all.data()) + r * max_len,
                                   static_cast<size_t>(headers[3 * r]));
      if (absl::Status s = DecodePayload(view, &messages[r]); !s.ok()) {
        return absl::DataLossError(absl::StrCat("rank ", r, ": ", s.message()));
      }
    }
  }
  return MergeBoundary(messages);
}

}  // namespace falcon::trainer::directives
