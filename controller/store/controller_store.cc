#include "controller/store/controller_store.h"

#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/util/field_mask_util.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "controller/store/keys.h"

namespace falcon::controller::store {
namespace {

constexpr char kMetaKey[] = "meta";

template <typename Proto>
absl::StatusOr<std::vector<Proto>> LoadAll(const KvStore& kv, const char* table,
                                           absl::string_view prefix = "") {
  std::vector<Proto> out;
  absl::Status parse_error;
  absl::Status s = kv.Scan(table, prefix, [&](absl::string_view key, absl::string_view value) {
    Proto p;
    if (!p.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      parse_error = absl::DataLossError(absl::StrCat("table ", table, ": record under key of ",
                                                     key.size(), " bytes does not parse"));
      return false;
    }
    out.push_back(std::move(p));
    return true;
  });
  if (!s.ok()) return s;
  if (!parse_error.ok()) return parse_error;
  return out;
}

// Every field of DirectiveRecord but acks (computed from the descriptor: a new field is kept).
const google::protobuf::FieldMask& DirectiveRowFields() {
  static const google::protobuf::FieldMask* const mask = [] {
    auto* m = new google::protobuf::FieldMask();
    const google::protobuf::Descriptor* d = falcon::v1::DirectiveRecord::descriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      if (d->field(i)->number() != falcon::v1::DirectiveRecord::kAcksFieldNumber) {
        m->add_paths(d->field(i)->name());
      }
    }
    return m;
  }();
  return *mask;
}

// "job=j directive=12": a directives key as error messages name it.
std::string DirectiveKeyName(absl::string_view key) {
  const size_t zero = key.find('\0');
  size_t pos = zero == absl::string_view::npos ? key.size() : zero + 1;
  std::optional<uint64_t> id = keys::ReadU64(key, &pos);
  if (!id || pos != key.size()) return absl::StrCat("\"", absl::CHexEscape(key), "\"");
  return absl::StrCat("job=", key.substr(0, zero), " directive=", *id);
}

}  // namespace

void StoreTxn::PutJob(const v1::JobRecord& record) {
  batch_.Put(tables::kJobs, record.job().job(), record.SerializeAsString());
}

void StoreTxn::PutJobPart(const std::string& job, const v1::AgentJob& part) {
  batch_.Put(tables::kJobParts, keys::JobPartKey(job, part.agent_id()), part.SerializeAsString());
}

void StoreTxn::DeleteJobPart(const std::string& job, const std::string& agent_id) {
  batch_.Delete(tables::kJobParts, keys::JobPartKey(job, agent_id));
}

void StoreTxn::PutEvent(const v1::EventRecord& record) {
  batch_.Put(tables::kEvents, keys::EventKey(record.event().event_id()),
             record.SerializeAsString());
}

void StoreTxn::PutDirective(const falcon::v1::DirectiveRecord& record) {
  const std::string key =
      keys::DirectiveKey(record.directive().job(), record.directive().directive_id());
  if (record.acks_size() == 0) {
    batch_.Put(tables::kDirectives, key, record.SerializeAsString());
    return;
  }
  falcon::v1::DirectiveRecord row;
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(
      record, DirectiveRowFields(), google::protobuf::util::FieldMaskUtil::MergeOptions(), &row);
  batch_.Put(tables::kDirectives, key, row.SerializeAsString());
}

void StoreTxn::PutDirectiveAck(const std::string& job, uint64_t directive_id, uint32_t position,
                               const falcon::v1::DirectiveAck& ack) {
  batch_.Put(tables::kDirectiveAcks, keys::DirectiveAckKey(job, directive_id, position),
             ack.SerializeAsString());
}

void StoreTxn::PutDirectiveWithAcks(const falcon::v1::DirectiveRecord& record) {
  PutDirective(record);
  for (int i = 0; i < record.acks_size(); ++i) {
    PutDirectiveAck(record.directive().job(), record.directive().directive_id(),
                    static_cast<uint32_t>(i), record.acks(i));
  }
}

void StoreTxn::PutSettings(const falcon::v1::Settings& settings) {
  batch_.Put(tables::kSettings, settings.job(), settings.SerializeAsString());
}

void StoreTxn::PutHistory(const std::string& job, const falcon::v1::HistoryPoint& point) {
  batch_.Put(tables::kHistory, keys::HistoryKey(job, point.iteration()), point.SerializeAsString());
}

void StoreTxn::PutSampleRow(const std::string& job, int64_t iteration,
                            absl::Span<const RankSample> row) {
  if (row.empty()) return;
  std::string value;
  value.reserve(row.size() * 12);
  uint32_t first = row[0].rank;
  for (const RankSample& r : row) {
    keys::AppendU32(&value, r.rank);
    keys::AppendU64(&value, static_cast<uint64_t>(r.time_ns));
    first = std::min(first, r.rank);
  }
  batch_.Put(tables::kSampleRows, keys::SampleRowKey(job, iteration, first), value);
}

void StoreTxn::TrimSamples(const std::string& job, int64_t before_iteration) {
  if (before_iteration <= 0) return;
  batch_.DeleteRange(tables::kSampleRows, keys::JobPrefix(job),
                     keys::SampleRowKey(job, before_iteration, 0));
}

void StoreTxn::DeleteJobSamples(const std::string& job) {
  std::string begin = keys::JobPrefix(job);
  std::string end = job;
  end.push_back('\1');
  batch_.DeleteRange(tables::kSampleRows, begin, end);
  batch_.DeleteRange(tables::kLegacySamples, begin, end);
}

void StoreTxn::DeleteJob(const std::string& job) {
  batch_.Delete(tables::kJobs, job);
  DeleteJobRows(tables::kJobParts, job);
}

void StoreTxn::DeleteSettings(const std::string& job) { batch_.Delete(tables::kSettings, job); }

void StoreTxn::DeleteJobRows(const char* table, const std::string& job) {
  const std::string begin = keys::JobPrefix(job);
  batch_.DeleteRange(table, begin, PrefixSuccessor(begin));
}

void StoreTxn::DeleteEvent(uint64_t event_id) {
  batch_.Delete(tables::kEvents, keys::EventKey(event_id));
}

void StoreTxn::DeleteDirective(const std::string& job, uint64_t directive_id) {
  const std::string key = keys::DirectiveKey(job, directive_id);
  batch_.Delete(tables::kDirectives, key);
  batch_.DeleteRange(tables::kDirectiveAcks, key, PrefixSuccessor(key));
}

void StoreTxn::PutAgent(const v1::AgentRecord& record) {
  batch_.Put(tables::kAgents, record.agent_id(), record.SerializeAsString());
}

void StoreTxn::PutMeta(const v1::MetaRecord& record) {
  batch_.Put(tables::kMeta, kMetaKey, record.SerializeAsString());
}

void StoreTxn::PutAudit(const falcon::v1::AuditRecord& record) {
  batch_.Put(tables::kAudit, keys::AuditKey(record.audit_id()), record.SerializeAsString());
}

void StoreTxn::DeleteAudit(uint64_t audit_id) {
  batch_.Delete(tables::kAudit, keys::AuditKey(audit_id));
}

ControllerStore::ControllerStore(KvStore* kv, const common::Clock* clock, CommitObserver observer)
    : kv_(kv), clock_(clock), observer_(std::move(observer)) {}

std::vector<std::string> ControllerStore::TableNames() {
  return {tables::kJobs,          tables::kJobParts, tables::kEvents,  tables::kDirectives,
          tables::kDirectiveAcks, tables::kSettings, tables::kHistory, tables::kSampleRows,
          tables::kLegacySamples, tables::kAgents,   tables::kMeta,    tables::kAudit};
}

absl::Status ControllerStore::Commit(StoreTxn* txn) {
  if (txn->empty()) return absl::OkStatus();
  KvWriteBatch batch = std::move(txn->batch());
  txn->batch().Clear();
  if (!failure_.ok()) {
    unsynced_.push_back(std::move(batch));
    return absl::UnavailableError(
        absl::StrCat("store unavailable since a failure: ", failure_.message()));
  }
  const int64_t start = clock_->MonotonicNanos();
  absl::Status s = kv_->Write(batch);
  if (observer_) observer_(absl::Nanoseconds(clock_->MonotonicNanos() - start), s);
  if (absl::IsInvalidArgument(s)) return s;  // A bug (unknown table): writing again cannot help.
  if (!s.ok()) failure_ = s;
  unsynced_.push_back(std::move(batch));
  return s;
}

absl::Status ControllerStore::Sync() {
  if (failure_.ok() && unsynced_.empty()) return absl::OkStatus();
  if (!failure_.ok()) {
    const int64_t now = clock_->MonotonicNanos();
    if (last_recovery_ns_.has_value() &&
        absl::Nanoseconds(now - *last_recovery_ns_) < retry_interval_) {
      return absl::UnavailableError(
          absl::StrCat("store unavailable since a failure: ", failure_.message()));
    }
    last_recovery_ns_ = now;
    if (absl::Status s = kv_->Recover(); !s.ok()) {
      failure_ = s;
      return absl::UnavailableError(absl::StrCat("store recovery failed: ", s.message()));
    }
    KvWriteBatch kept;
    for (const KvWriteBatch& b : unsynced_) kept.Append(KvWriteBatch(b));
    const int64_t start = clock_->MonotonicNanos();
    absl::Status s = kv_->Write(kept);
    if (observer_) observer_(absl::Nanoseconds(clock_->MonotonicNanos() - start), s);
    if (!s.ok()) {
      failure_ = s;
      return absl::UnavailableError(
          absl::StrCat("store write after recovery failed: ", s.message()));
    }
    unsynced_.clear();
    unsynced_.push_back(std::move(kept));
    failure_ = absl::OkStatus();
  }
  const int64_t start = clock_->MonotonicNanos();
  absl::Status s = kv_->Sync(figures_ ? figures_() : store::StoreFigures());
  if (sync_observer_) sync_observer_(absl::Nanoseconds(clock_->MonotonicNanos() - start), s);
  if (!s.ok()) {
    failure_ = s;
    return absl::UnavailableError(absl::StrCat("store sync failed: ", s.message()));
  }
  unsynced_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::JobRecord>> ControllerStore::LoadJobs() const {
  return LoadAll<v1::JobRecord>(*kv_, tables::kJobs);
}

absl::StatusOr<std::vector<std::pair<std::string, v1::AgentJob>>> ControllerStore::LoadJobParts()
    const {
  std::vector<std::pair<std::string, v1::AgentJob>> out;
  absl::Status bad;
  absl::Status s =
      kv_->Scan(tables::kJobParts, "", [&](absl::string_view key, absl::string_view value) {
        const size_t zero = key.find('\0');
        v1::AgentJob part;
        if (zero == absl::string_view::npos ||
            !part.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          bad = absl::DataLossError(absl::StrCat("table ", tables::kJobParts,
                                                 ": record under key of ", key.size(),
                                                 " bytes does not parse"));
          return false;
        }
        out.emplace_back(std::string(key.substr(0, zero)), std::move(part));
        return true;
      });
  if (!s.ok()) return s;
  if (!bad.ok()) return bad;
  return out;
}

absl::StatusOr<std::vector<v1::EventRecord>> ControllerStore::LoadEvents() const {
  return LoadAll<v1::EventRecord>(*kv_, tables::kEvents);
}

absl::StatusOr<std::vector<falcon::v1::DirectiveRecord>> ControllerStore::LoadDirectives(
    StoreTxn* rewrite) const {
  std::vector<falcon::v1::DirectiveRecord> out;
  absl::flat_hash_map<std::string, size_t> by_key;  // directives key -> index in out.
  std::vector<size_t> earlier;                      // Rows with their acks inside.
  absl::Status bad;
  absl::Status s =
      kv_->Scan(tables::kDirectives, "", [&](absl::string_view key, absl::string_view value) {
        falcon::v1::DirectiveRecord r;
        if (!r.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          bad = absl::DataLossError(absl::StrCat("table ", tables::kDirectives, ": row ",
                                                 DirectiveKeyName(key), " does not parse"));
          return false;
        }
        if (r.acks_size() > 0) earlier.push_back(out.size());
        by_key.emplace(std::string(key), out.size());
        out.push_back(std::move(r));
        return true;
      });
  if (!s.ok()) return s;
  if (!bad.ok()) return bad;
  s = kv_->Scan(tables::kDirectiveAcks, "", [&](absl::string_view key, absl::string_view value) {
    std::string job;
    uint64_t id = 0;
    uint32_t position = 0;
    if (!keys::ParseDirectiveAckKey(key, &job, &id, &position)) {
      bad = absl::DataLossError(absl::StrCat("table ", tables::kDirectiveAcks, ": key \"",
                                             absl::CHexEscape(key), "\" is malformed"));
      return false;
    }
    const std::string name = absl::StrCat("job=", job, " directive=", id, " position=", position);
    auto it = by_key.find(key.substr(0, key.size() - sizeof(uint32_t)));
    if (it == by_key.end()) {
      bad = absl::DataLossError(absl::StrCat("table ", tables::kDirectiveAcks, ": row ", name,
                                             " is an ack of a directive not stored"));
      return false;
    }
    falcon::v1::DirectiveRecord& r = out[it->second];
    if (position != static_cast<uint32_t>(r.acks_size())) {
      bad = absl::DataLossError(absl::StrCat("table ", tables::kDirectiveAcks, ": row ", name,
                                             " follows ", r.acks_size(),
                                             " acks of its directive (an ack row is lost)"));
      return false;
    }
    if (!r.add_acks()->ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      bad = absl::DataLossError(
          absl::StrCat("table ", tables::kDirectiveAcks, ": row ", name, " does not parse"));
      return false;
    }
    return true;
  });
  if (!s.ok()) return s;
  if (!bad.ok()) return bad;
  if (rewrite != nullptr) {
    for (size_t i : earlier) rewrite->PutDirectiveWithAcks(out[i]);
  }
  return out;
}

absl::StatusOr<std::vector<falcon::v1::Settings>> ControllerStore::LoadSettings() const {
  return LoadAll<falcon::v1::Settings>(*kv_, tables::kSettings);
}

absl::StatusOr<std::vector<v1::AgentRecord>> ControllerStore::LoadAgents() const {
  return LoadAll<v1::AgentRecord>(*kv_, tables::kAgents);
}

absl::StatusOr<std::vector<falcon::v1::AuditRecord>> ControllerStore::LoadAudit() const {
  return LoadAll<falcon::v1::AuditRecord>(*kv_, tables::kAudit);
}

absl::StatusOr<v1::MetaRecord> ControllerStore::LoadMeta() const {
  absl::StatusOr<std::string> value = kv_->Get(tables::kMeta, kMetaKey);
  if (absl::IsNotFound(value.status())) return v1::MetaRecord();
  if (!value.ok()) return value.status();
  v1::MetaRecord meta;
  if (!meta.ParseFromString(*value))
    return absl::DataLossError("table meta: record does not parse");
  return meta;
}

absl::StatusOr<std::vector<falcon::v1::HistoryPoint>> ControllerStore::LoadHistory(
    const std::string& job, int64_t from_iteration) const {
  std::vector<falcon::v1::HistoryPoint> out;
  absl::Status parse_error;
  std::string first = keys::HistoryKey(job, from_iteration < 0 ? 0 : from_iteration);
  std::string end = PrefixSuccessor(keys::JobPrefix(job));
  absl::Status s =
      kv_->ScanRange(tables::kHistory, first, end, [&](absl::string_view, absl::string_view value) {
        falcon::v1::HistoryPoint p;
        if (!p.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          parse_error = absl::DataLossError("table history: record does not parse");
          return false;
        }
        out.push_back(std::move(p));
        return true;
      });
  if (!s.ok()) return s;
  if (!parse_error.ok()) return parse_error;
  return out;
}

absl::StatusOr<bool> ControllerStore::HasJobRows(const char* table, const std::string& job) const {
  bool found = false;
  absl::Status s =
      kv_->Scan(table, keys::JobPrefix(job), [&](absl::string_view, absl::string_view) {
        found = true;
        return false;
      });
  if (!s.ok()) return s;
  return found;
}

namespace {

// The key as an operator can find it: printable bytes as they are, the others escaped, at most
// 96 bytes of it.
std::string ShowKey(absl::string_view key) {
  std::string out = absl::CHexEscape(key.substr(0, 96));
  if (key.size() > 96) out += "...";
  return out;
}

// Why a sample_rows row is malformed ("" when it is sound); `samples` gets its pairs.
std::string CheckSampleRow(absl::string_view key, absl::string_view value,
                           const std::string& want_job, std::string* job, int64_t* iteration,
                           std::vector<RankSample>* samples) {
  uint32_t first = 0;
  if (!keys::ParseSampleRowKey(key, job, iteration, &first)) {
    return "the key is not job, iteration and first rank";
  }
  if (!want_job.empty() && *job != want_job) return absl::StrCat("the key names job '", *job, "'");
  if (*iteration < 0) return absl::StrCat("iteration ", *iteration, " is negative");
  if (value.empty() || value.size() % 12 != 0) {
    return absl::StrCat("the value's ", value.size(),
                        " bytes are not whole (rank, time) pairs of 12 bytes");
  }
  samples->clear();
  absl::flat_hash_set<uint32_t> seen;
  uint32_t lowest = std::numeric_limits<uint32_t>::max();
  for (size_t pos = 0; pos < value.size();) {
    const uint32_t rank = *keys::ReadU32(value, &pos);
    const uint64_t ns = *keys::ReadU64(value, &pos);
    if (ns > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::StrCat("the time of rank ", rank, " overflows int64 nanoseconds");
    }
    if (!seen.insert(rank).second) return absl::StrCat("rank ", rank, " is in it twice");
    lowest = std::min(lowest, rank);
    samples->push_back({rank, static_cast<int64_t>(ns)});
  }
  if (lowest != first) {
    return absl::StrCat("the key's first rank ", first, " is not its lowest rank ", lowest);
  }
  return "";
}

// A malformed sample row of `job` under `key`, as the errors and the repair log name it.
DamagedRow DamagedSampleRow(absl::string_view job, absl::string_view key, absl::string_view why) {
  return {tables::kSampleRows, std::string(key),
          absl::StrCat("table ", tables::kSampleRows, ": row of job '", job, "' under key \"",
                       ShowKey(key), "\": ", why)};
}

// A scan's handling of a malformed row: with `damaged` null it becomes the scan's DATA_LOSS and
// the scan stops (false); otherwise it is appended and the scan goes on (true).
bool Report(DamagedRow row, std::vector<DamagedRow>* damaged, absl::Status* bad) {
  if (damaged == nullptr) {
    *bad = absl::DataLossError(row.why);
    return false;
  }
  damaged->push_back(std::move(row));
  return true;
}

}  // namespace

absl::Status ControllerStore::ScanSamples(const std::string& job,
                                          const std::function<void(uint32_t, int64_t, int64_t)>& fn,
                                          std::vector<DamagedRow>* damaged) const {
  absl::Status bad;
  std::string parsed_job;
  std::vector<RankSample> samples;
  absl::Status s = kv_->Scan(tables::kSampleRows, keys::JobPrefix(job),
                             [&](absl::string_view key, absl::string_view value) {
                               int64_t iteration = 0;
                               const std::string why = CheckSampleRow(key, value, job, &parsed_job,
                                                                      &iteration, &samples);
                               if (!why.empty())
                                 return Report(DamagedSampleRow(job, key, why), damaged, &bad);
                               for (const RankSample& r : samples) fn(r.rank, iteration, r.time_ns);
                               return true;
                             });
  if (!s.ok()) return s;
  if (!bad.ok()) return bad;
  return ScanLegacySamples(
      job,
      [&](const std::string&, uint32_t rank, int64_t iteration, int64_t ns) {
        fn(rank, iteration, ns);
      },
      damaged);
}

absl::Status ControllerStore::ScanLegacySamples(
    const std::string& job,
    const std::function<void(const std::string&, uint32_t, int64_t, int64_t)>& fn,
    std::vector<DamagedRow>* damaged) const {
  absl::Status bad;
  absl::Status s = kv_->Scan(
      tables::kLegacySamples, job.empty() ? "" : keys::JobPrefix(job),
      [&](absl::string_view key, absl::string_view value) {
        std::string parsed_job;
        uint32_t rank = 0;
        int64_t iteration = 0;
        size_t pos = 0;
        std::optional<uint64_t> v = keys::ReadU64(value, &pos);
        std::string why;
        if (!keys::ParseLegacySampleKey(key, &parsed_job, &rank, &iteration)) {
          why = "the key is not job, rank and iteration";
        } else if (!job.empty() && parsed_job != job) {
          why = absl::StrCat("the key names job '", parsed_job, "'");
        } else if (iteration < 0) {
          why = absl::StrCat("iteration ", iteration, " is negative");
        } else if (!v || pos != value.size()) {
          why = absl::StrCat("the value's ", value.size(), " bytes are not one 8-byte time");
        } else if (*v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          why = "the time overflows int64 nanoseconds";
        }
        if (!why.empty()) {
          return Report({tables::kLegacySamples, std::string(key),
                         absl::StrCat("table ", tables::kLegacySamples, ": row under key \"",
                                      ShowKey(key), "\": ", why)},
                        damaged, &bad);
        }
        fn(parsed_job, rank, iteration, static_cast<int64_t>(*v));
        return true;
      });
  if (!s.ok()) return s;
  return bad;
}

absl::StatusOr<int64_t> ControllerStore::MoveLegacySamples(StoreTxn* txn,
                                                           std::vector<DamagedRow>* damaged) const {
  std::map<std::pair<std::string, int64_t>, std::vector<RankSample>> rows;
  int64_t moved = 0;
  const size_t damaged_before = damaged == nullptr ? 0 : damaged->size();
  absl::Status s = ScanLegacySamples(
      "",
      [&](const std::string& job, uint32_t rank, int64_t iteration, int64_t ns) {
        rows[{job, iteration}].push_back({rank, ns});
        ++moved;
      },
      damaged);
  if (!s.ok()) return s;
  if (moved == 0 && (damaged == nullptr || damaged->size() == damaged_before)) return 0;
  std::string existing_job;
  std::vector<RankSample> existing;
  for (auto& entry : rows) {
    const std::string& job_name = entry.first.first;
    const int64_t at_iteration = entry.first.second;
    std::vector<RankSample>& row = entry.second;
    // Rows of the new table may already hold samples of this iteration (a store written by this
    // version, then an earlier one, then this one again): a rank they hold keeps their sample,
    // and the legacy samples left go in a row of their own (its lowest rank is in no other row
    // of the iteration, so its key is free).
    std::string prefix = keys::JobPrefix(job_name);
    keys::AppendU64(&prefix, static_cast<uint64_t>(at_iteration));
    absl::flat_hash_set<uint32_t> have;
    absl::Status scan =
        kv_->Scan(tables::kSampleRows, prefix, [&](absl::string_view key, absl::string_view value) {
          int64_t iteration = 0;
          const std::string why =
              CheckSampleRow(key, value, job_name, &existing_job, &iteration, &existing);
          if (!why.empty()) {
            if (damaged != nullptr) damaged->push_back(DamagedSampleRow(job_name, key, why));
            return true;  // Without `damaged` the scan of the job reports it.
          }
          for (const RankSample& r : existing) have.insert(r.rank);
          return true;
        });
    if (!scan.ok()) return scan;
    row.erase(std::remove_if(row.begin(), row.end(),
                             [&](const RankSample& r) { return have.contains(r.rank); }),
              row.end());
    txn->PutSampleRow(job_name, at_iteration, row);
  }
  // Every key of the table starts with a job name, which is never empty or above '\xff'.
  txn->batch().DeleteRange(tables::kLegacySamples, std::string(1, '\0'), std::string(1, '\xff'));
  return moved;
}

}  // namespace falcon::controller::store
