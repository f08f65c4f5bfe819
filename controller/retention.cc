// Retention (docs/operations.md#retention-and-limits): the tick purges, in batches, what ended a
// retention period ago: ended jobs with everything keyed by them (events, directives, history,
// samples, settings overrides), then recovered or closed events and final directives of running
// jobs. Each batch is one store write and one log line; memory is released only after it
// committed, so a failed write leaves everything as it was (logged, counted, retried). Once a
// backlog is purged, the memory it held is given back to the system: the store's write buffers
// are flushed and the allocator's free pages returned (malloc_trim, glibc), so the controller's
// resident size returns to where it was before the jobs came.
#include <glog/logging.h>
#include <malloc.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/controller.h"
#include "controller/metrics/metric_table.h"

namespace falcon::controller {

using falcon::controller::v1::EventRecord;

absl::Status RetentionOptions::Validate() const {
  if (retention <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retention: must be > 0");
  }
  if (purge_batch < 1 || purge_batch > 1'000'000) {
    return absl::InvalidArgumentError("purge_batch: must be in [1, 1000000]");
  }
  return absl::OkStatus();
}

absl::Duration RetentionOptions::SweepInterval() const {
  return std::min(retention / 10, absl::Minutes(1));
}

void Controller::SweepRetention(absl::Time now) {
  if (now < next_sweep_) return;
  const RetentionOptions& opt = options_.retention;
  const absl::Time cutoff = now - opt.retention;
  const int64_t cutoff_ns = absl::ToUnixNanos(cutoff);
  const size_t max = opt.purge_batch;
  PurgeAudit(cutoff);

  // Ended jobs first: each goes with all of its events and directives.
  absl::flat_hash_set<std::string> jobs;
  std::vector<std::string> job_list;
  for (const std::string& name : registry_.JobNames()) {
    if (job_list.size() >= max) break;
    const registry::JobEntry* job = registry_.Find(name);
    if (job->job().state() != falcon::v1::JOB_STATE_ENDED) continue;
    if (job->record().ended_time_ns() > cutoff_ns) continue;
    jobs.insert(name);
    job_list.push_back(name);
  }
  std::vector<uint64_t> events = events_.EventsOfJobs(jobs);
  std::vector<uint64_t> directives = directives_.DirectivesOfJobs(jobs);
  const size_t of_jobs = job_list.size() + events.size() + directives.size();
  // Then what ended long ago in running jobs.
  std::vector<uint64_t> old_events;
  if (of_jobs < max) old_events = events_.Expired(cutoff, max - of_jobs, jobs);
  std::vector<uint64_t> old_directives;
  if (of_jobs + old_events.size() < max) {
    old_directives = directives_.Expired(
        cutoff, max - of_jobs - old_events.size(), [&](const falcon::v1::DirectiveRecord& r) {
          if (jobs.count(r.directive().job())) return true;  // Purged with its job.
          const EventRecord* e = events_.Find(r.event_id());
          return e != nullptr && detection::EventManager::IsActiveState(e->event().state());
        });
  }
  const size_t total = of_jobs + old_events.size() + old_directives.size();
  if (total == 0) {
    next_sweep_ = now + opt.SweepInterval();
    if (purged_unreleased_) {
      ReleasePurgedMemory();
    } else if (trim_again_) {
      // What the store freed after the flush returned (memtables still referenced by a reader
      // then) goes back now.
      trim_again_ = false;
      malloc_trim(0);
    }
    return;
  }

  core::UnitOfWork uow;
  for (const std::string& job : job_list) {
    uow.txn().DeleteJob(job);
    if (settings_.HasOverrides(job)) uow.txn().DeleteSettings(job);
    // Range deletes only where there are rows: a range tombstone per job would cost every later
    // read of the table.
    for (const char* table :
         {store::tables::kDirectives, store::tables::kDirectiveAcks, store::tables::kHistory,
          store::tables::kSampleRows, store::tables::kLegacySamples}) {
      absl::StatusOr<bool> rows = store_.HasJobRows(table, job);
      if (!rows.ok() || *rows) uow.txn().DeleteJobRows(table, job);
    }
  }
  for (uint64_t id : events) uow.txn().DeleteEvent(id);
  for (uint64_t id : old_events) uow.txn().DeleteEvent(id);
  for (uint64_t id : old_directives) {
    uow.txn().DeleteDirective(directives_.Find(id)->directive().job(), id);
  }
  if (absl::Status s = Commit(&uow); !s.ok()) {
    LOG(WARNING) << "retention purge not stored where=retention_commit jobs=" << job_list.size()
                 << " error=\"" << s.message() << "\"; retried at the next sweep";
    errors_.CountError(metrics::where::kRetentionCommit);
    next_sweep_ = now + opt.SweepInterval();
    return;
  }
  for (const std::string& job : job_list) {
    VLOG(1) << "job purged job=" << job << " ended="
            << absl::FormatTime(absl::FromUnixNanos(registry_.Find(job)->record().ended_time_ns()));
    registry_.Remove(job);
    detection_.RemoveJob(job);
    imbalance_.RemoveJob(job);
    imbalance_logged_.erase(job);
    settings_.Forget(job);
    presence_.Forget(job);
    if (hook_ != nullptr) hook_->OnJobPurged(job);
  }
  events.insert(events.end(), old_events.begin(), old_events.end());
  directives.insert(directives.end(), old_directives.begin(), old_directives.end());
  events_.Forget(events, jobs);
  directives_.Forget(directives, jobs);
  if (metrics_ != nullptr) {
    metrics_->RetentionPurged("job", job_list.size());
    metrics_->RetentionPurged("event", events.size());
    metrics_->RetentionPurged("directive", directives.size());
  }
  LOG(INFO) << "retention purge jobs=" << job_list.size() << " events=" << events.size()
            << " directives=" << directives.size()
            << " retention=" << absl::FormatDuration(opt.retention)
            << " ended_before=" << absl::FormatTime(cutoff)
            << (total >= max ? " (more due: next batch at the next tick)" : "");
  // A full batch may leave more due: go on at the next tick.
  purged_unreleased_ = true;
  if (total >= max) {
    next_sweep_ = now;
  } else {
    next_sweep_ = now + opt.SweepInterval();
    ReleasePurgedMemory();
  }
}

void Controller::PurgeAudit(absl::Time cutoff) {
  const std::vector<uint64_t> ids = audit_.Expired(cutoff, options_.retention.purge_batch);
  if (ids.empty()) return;
  core::UnitOfWork uow;
  for (uint64_t id : ids) uow.txn().DeleteAudit(id);
  if (absl::Status s = Commit(&uow); !s.ok()) {
    LOG(WARNING) << "retention purge not stored where=retention_commit audit_records=" << ids.size()
                 << " error=\"" << s.message() << "\"; retried at the next sweep";
    errors_.CountError(metrics::where::kRetentionCommit);
    return;
  }
  audit_.ForgetOldest(ids.size());
  if (metrics_ != nullptr) metrics_->RetentionPurged("audit", ids.size());
  LOG(INFO) << "retention purge audit_records=" << ids.size()
            << " retention=" << absl::FormatDuration(options_.retention.retention)
            << " before=" << absl::FormatTime(cutoff);
}

void Controller::ReleasePurgedMemory() {
  purged_unreleased_ = false;
  trim_again_ = true;
  if (absl::Status s = store_.Flush(); !s.ok()) {
    LOG(WARNING) << "store flush after a retention purge failed where=retention_flush error=\""
                 << s.message() << "\"";
    errors_.CountError(metrics::where::kRetentionFlush);
  }
  malloc_trim(0);
}

}  // namespace falcon::controller
