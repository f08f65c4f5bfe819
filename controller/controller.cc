#include "controller/controller.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/telemetry_batch.h"
#include "controller/metrics/metric_table.h"
#include "controller/util/field_error.h"

namespace falcon::controller {

using falcon::controller::v1::EventRecord;

absl::Status ControllerOptions::Validate() const {
  if (controller_id.empty()) return absl::InvalidArgumentError("controller_id: must not be empty");
  if (job_end_grace <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("job_end_grace: must be > 0");
  }
  if (stream_idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("stream_idle_timeout: must be > 0");
  }
  if (absl::Status s = limits.Validate(); !s.ok()) return s;
  if (absl::Status s = resource_limits.Validate(); !s.ok()) return s;
  if (absl::Status s = retention.Validate(); !s.ok()) return s;
  if (absl::Status s = directives.Validate(); !s.ok()) return s;
  if (absl::Status s = detection.Validate(); !s.ok()) return s;
  if (absl::Status s = imbalance.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("imbalance.", s.message()));
  }
  return localization.Validate();
}

// EventActions for a mitigation hook, bound to the unit of work of the call.
class Controller::Actions : public detection::EventActions {
 public:
  Actions(Controller* c, core::UnitOfWork* uow) : c_(c), uow_(uow) {}

  absl::Time Now() const override { return c_->clock_->Now(); }
  const falcon::v1::Event* FindEvent(uint64_t id) const override {
    const EventRecord* e = c_->events_.Find(id);
    return e == nullptr ? nullptr : &e->event();
  }
  const registry::JobEntry* FindJob(const std::string& job) const override {
    return c_->registry_.Find(job);
  }
  settings::EffectiveSettings Settings(const std::string& job) const override {
    return c_->settings_.Effective(job);
  }
  int64_t LastIteration(const std::string& job) const override {
    return c_->detection_.LastIteration(job);
  }
  bool IsBlameless(const std::string& job, uint32_t rank, int64_t since_iteration,
                   std::string* why) const override {
    return c_->imbalance_.IsBlameless(job, rank, since_iteration, why);
  }
  absl::Status RecordAction(uint64_t id, const falcon::v1::Action& action) override {
    EventRecord* e = Active(id);
    // The reverts that follow a recovery belong to the event's log too.
    if (e == nullptr) {
      EventRecord* r = c_->events_.Find(id);
      if (r != nullptr && r->event().state() == falcon::v1::EVENT_STATE_RECOVERED) e = r;
    }
    if (e == nullptr) return Missing(id);
    *e->mutable_event()->add_actions() = action;
    c_->events_.Persist(*e, uow_);
    return absl::OkStatus();
  }
  absl::Status MarkMitigating(uint64_t id, const std::string& reason) override {
    EventRecord* e = Active(id);
    if (e == nullptr) return Missing(id);
    const falcon::v1::EventState s = e->event().state();
    if (s != falcon::v1::EVENT_STATE_LOCALIZED && s != falcon::v1::EVENT_STATE_MITIGATING) {
      return absl::FailedPreconditionError(
          absl::StrCat("event ", id, " is ", metrics::EventStateLabel(s), ", not localized"));
    }
    c_->events_.Transition(e, falcon::v1::EVENT_STATE_MITIGATING,
                           c_->detection_.LastIteration(e->event().job()), reason, uow_);
    if (registry::JobEntry* job = c_->registry_.Find(e->event().job())) {
      job->set_state(falcon::v1::JOB_STATE_MITIGATING);
      c_->registry_.Persist(*job, &uow_->txn());
    }
    return absl::OkStatus();
  }
  absl::Status SetMitigatedIterationTime(uint64_t id, absl::Duration time) override {
    EventRecord* e = Active(id);
    if (e == nullptr) return Missing(id);
    e->mutable_event()->set_mitigated_iteration_time_ns(absl::ToInt64Nanoseconds(time));
    c_->events_.Persist(*e, uow_);
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> IssueDirective(uint64_t id, falcon::v1::Directive d,
                                          const falcon::v1::Directive* rollback) override {
    EventRecord* e = c_->events_.Find(id);
    if (e == nullptr) return absl::NotFoundError(absl::StrCat("event ", id, " not found"));
    const registry::JobEntry* job = c_->registry_.Find(e->event().job());
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", e->event().job()));
    return c_->directives_.Issue(std::move(d), id, *job, uow_, rollback);
  }
  const falcon::v1::DirectiveRecord* FindDirective(uint64_t directive_id) const override {
    return c_->directives_.Find(directive_id);
  }
  int64_t NextEffectiveIteration(const std::string& job) const override {
    return c_->directives_.EffectiveIteration(job);
  }
  absl::Status SetJobPlan(
      const std::string& job_name, int64_t plan_version, const std::vector<uint32_t>& micro_batches,
      const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split) override {
    registry::JobEntry* job = c_->registry_.Find(job_name);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("job '", job_name, "'"));
    job->set_plan(plan_version, micro_batches);
    job->set_layer_split(layer_split);
    c_->registry_.Persist(*job, &uow_->txn());
    return absl::OkStatus();
  }
  absl::Status SetPlanCeiling(uint64_t id, const falcon::v1::PlanCeiling& ceiling) override {
    EventRecord* e = Active(id);
    // The reverts that follow a recovery update it too.
    if (e == nullptr) {
      EventRecord* r = c_->events_.Find(id);
      if (r != nullptr && r->event().state() == falcon::v1::EVENT_STATE_RECOVERED) e = r;
    }
    if (e == nullptr) return Missing(id);
    if (ceiling.strategy() == falcon::v1::STRATEGY_UNSPECIFIED) {
      e->mutable_event()->clear_ceiling();
    } else {
      *e->mutable_event()->mutable_ceiling() = ceiling;
    }
    c_->events_.Persist(*e, uow_);
    return absl::OkStatus();
  }
  absl::Status CloseEvent(uint64_t id, const std::string& reason) override {
    EventRecord* e = Active(id);
    if (e == nullptr) return Missing(id);
    c_->localizer_.Cancel(e, uow_);
    c_->events_.Close(e, c_->detection_.LastIteration(e->event().job()), reason, uow_);
    TrackingUnlessActive(e->event().job());
    return absl::OkStatus();
  }
  absl::Status RecoverEvent(uint64_t id, int64_t iteration, const std::string& reason) override {
    EventRecord* e = Active(id);
    if (e == nullptr) return Missing(id);
    c_->localizer_.Cancel(e, uow_);
    c_->events_.Recover(e, iteration, c_->detection_.LastIteration(e->event().job()), reason, uow_);
    TrackingUnlessActive(e->event().job());
    return absl::OkStatus();
  }

 private:
  // A job MITIGATING whose last active event ended (recovered, or closed by S4) is TRACKING again.
  void TrackingUnlessActive(const std::string& job) {
    if (!c_->events_.ActiveEvents(job).empty()) return;
    registry::JobEntry* entry = c_->registry_.Find(job);
    if (entry == nullptr || entry->job().state() != falcon::v1::JOB_STATE_MITIGATING) return;
    entry->set_state(falcon::v1::JOB_STATE_TRACKING);
    c_->registry_.Persist(*entry, &uow_->txn());
  }
  EventRecord* Active(uint64_t id) {
    EventRecord* e = c_->events_.Find(id);
    return e != nullptr && detection::EventManager::IsActiveState(e->event().state()) ? e : nullptr;
  }
  absl::Status Missing(uint64_t id) const {
    return c_->events_.Find(id) == nullptr
               ? absl::NotFoundError(absl::StrCat("event ", id, " not found"))
               : absl::FailedPreconditionError(absl::StrCat("event ", id, " is not active"));
  }
  Controller* c_;
  core::UnitOfWork* uow_;
};

absl::StatusOr<std::unique_ptr<Controller>> Controller::Create(const ControllerOptions& options,
                                                               store::KvStore* kv,
                                                               const common::Clock* clock,
                                                               metrics::ControllerMetrics* metrics,
                                                               detection::MitigationHook* hook) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  store::ControllerStore probe(kv, clock);
  absl::StatusOr<falcon::controller::v1::MetaRecord> meta = probe.LoadMeta();
  if (!meta.ok()) return meta.status();
  std::unique_ptr<Controller> c(new Controller(options, kv, clock, metrics, hook, *meta));
  if (absl::Status s = c->Load(); !s.ok()) return s;
  return c;
}

Controller::Controller(const ControllerOptions& options, store::KvStore* kv,
                       const common::Clock* clock, metrics::ControllerMetrics* metrics,
                       detection::MitigationHook* hook, falcon::controller::v1::MetaRecord meta)
    : options_(options),
      clock_(clock),
      metrics_(metrics),
      errors_(metrics != nullptr ? static_cast<common::ErrorCounter&>(*metrics) : no_errors_),
      hook_(hook),
      store_(kv, clock,
             [metrics](absl::Duration latency, const absl::Status& s) {
               if (metrics != nullptr) metrics->StoreWrite(latency, s.ok());
             }),
      ids_(std::move(meta)),
      events_(clock, &ids_, metrics),
      directives_(options.directives, clock, &ids_, &hub_, metrics),
      localizer_(
          options.localization, clock, &ids_, &hub_, &directives_, &events_, &registry_, &settings_,
          &errors_, [this](const std::string& job) { return detection_.LastIteration(job); },
          [this](const std::string& job) { return detection_.NewestReported(job); }),
      detection_(options.detection, clock, &registry_, &settings_, &events_, &localizer_, &store_,
                 metrics),
      imbalance_(options.imbalance),
      presence_(options.job_end_grace) {
  if (hook_ != nullptr && metrics_ != nullptr) hook_->SetErrorCounter(metrics_);
  store_.set_figures([this] { return Figures(); });
  store_.set_sync_observer([metrics](absl::Duration latency, const absl::Status& s) {
    if (metrics != nullptr) metrics->StoreSync(latency, s.ok());
  });
  localizer_.set_verdict_callback([this](EventRecord* event, core::UnitOfWork* uow) {
    if (hook_ == nullptr || !settings_.Effective(event->event().job()).mitigation_enabled) return;
    Actions actions(this, uow);
    hook_->OnVerdict(event->event(), actions);
  });
  detection_.set_recovered_callback([this](EventRecord* event, core::UnitOfWork* uow) {
    if (hook_ == nullptr) return;
    Actions actions(this, uow);
    hook_->OnRecovered(event->event(), actions);
  });
  detection_.set_still_slow_callback(
      [this](EventRecord* event, core::UnitOfWork* uow) -> std::optional<std::string> {
        if (hook_ == nullptr) return std::nullopt;
        Actions actions(this, uow);
        return hook_->StillSlow(event->event(), actions);
      });
  detection_.set_rank_summary_callback(
      [this](EventRecord* event, const falcon::v1::IterationSummary& s, core::UnitOfWork* uow) {
        if (hook_ == nullptr) return;
        Actions actions(this, uow);
        hook_->OnRankIteration(event->event(), s, actions);
      });
  detection_.set_job_iteration_callback(
      [this](EventRecord* event, int64_t iteration, absl::Duration t, core::UnitOfWork* uow) {
        if (hook_ == nullptr) return;
        Actions actions(this, uow);
        hook_->OnJobIteration(event->event(), iteration, t, actions);
      });
  settings_.set_listener([this](const std::string& job) { detection_.OnSettingsChanged(job); });
  directives_.set_progress_fn([this](const std::string& job) {
    core::JobProgress p;
    p.max_rank_iteration = detection_.MaxRankIteration(job);
    p.iteration_time = absl::Nanoseconds(detection_.LastIterationTimeNs(job));
    return p;
  });
}

Controller::~Controller() = default;

absl::Status Controller::Load() {
  auto settings = store_.LoadSettings();
  if (!settings.ok()) return settings.status();
  settings_.Load(*settings);
  auto jobs = store_.LoadJobs();
  if (!jobs.ok()) return jobs.status();
  auto parts = store_.LoadJobParts();
  if (!parts.ok()) return parts.status();
  // Jobs stored by an earlier version (parts inside the job's record) are stored again in
  // today's form with the restore below, in one commit.
  core::UnitOfWork uow;
  registry_.Load(*jobs, *parts, &uow.txn());
  auto agents = store_.LoadAgents();
  if (!agents.ok()) return agents.status();
  for (const auto& a : *agents) agents_[a.agent_id()] = AgentState{ingest::SequenceTracker(a), a};
  auto events = store_.LoadEvents();
  if (!events.ok()) return events.status();
  events_.Load(*events);
  // Directives stored by an earlier version (acks inside the record's row) likewise: stored
  // again with one row per ack.
  auto directives = store_.LoadDirectives(&uow.txn());
  if (!directives.ok()) return directives.status();
  directives_.Load(*directives);
  auto audit = store_.LoadAudit();
  if (!audit.ok()) return audit.status();
  audit_.Load(std::move(*audit));
  // Until they reconnect, every agent is away from its jobs from now on.
  for (const std::string& name : registry_.JobNames()) {
    const registry::JobEntry* job = registry_.Find(name);
    if (job->job().state() == falcon::v1::JOB_STATE_ENDED) continue;
    for (const std::string& a : job->AgentIds()) presence_.Away(name, a, clock_->Now());
  }
  // Samples stored by an earlier version (a row per rank and iteration) likewise: stored again
  // as sample rows, read by the restore below from the earlier table until then.
  // With --store_repair, sample rows that do not parse are dropped first, in a commit of their
  // own, so that what follows reads a sound table.
  if (options_.drop_damaged_samples) {
    if (absl::Status s = DropDamagedSamples(); !s.ok()) return s;
  }
  absl::StatusOr<int64_t> moved = store_.MoveLegacySamples(&uow.txn());
  if (!moved.ok()) return moved.status();
  if (*moved > 0) {
    LOG(INFO) << "store upgraded table=" << store::tables::kLegacySamples << " samples=" << *moved
              << " to=" << store::tables::kSampleRows;
  }
  if (absl::Status s = detection_.Restore(&uow); !s.ok()) return s;
  if (absl::Status s = Commit(&uow); !s.ok()) return s;
  return SyncStore();
}

absl::Status Controller::DropDamagedSamples() {
  std::vector<store::DamagedRow> damaged;
  for (const std::string& name : registry_.JobNames()) {
    if (absl::Status s = store_.ScanSamples(
            name, [](uint32_t, int64_t, int64_t) {}, &damaged);
        !s.ok()) {
      return s;
    }
  }
  store::StoreTxn scratch;  // Only to find damage: the move itself comes later.
  if (absl::StatusOr<int64_t> m = store_.MoveLegacySamples(&scratch, &damaged); !m.ok()) {
    return m.status();
  }
  if (damaged.empty()) return absl::OkStatus();
  core::UnitOfWork uow;
  std::set<std::pair<std::string, std::string>> dropped;  // (table, key): each once.
  for (const store::DamagedRow& row : damaged) {
    if (!dropped.emplace(row.table, row.key).second) continue;
    LOG(WARNING) << "store row dropped table=" << row.table << " error=\"" << row.why << "\"";
    errors_.CountError(metrics::where::kStoreDamagedRow);
    uow.txn().batch().Delete(row.table, row.key);
  }
  return Commit(&uow);
}

absl::Status Controller::Commit(core::UnitOfWork* uow) {
  hub_.Hold();  // Its messages wait until the state they announce is durable (SyncStore).
  const bool was_healthy = store_.healthy();
  absl::Status s = uow->Commit(&store_);
  if (!s.ok()) {
    if (was_healthy) {
      LOG(ERROR) << "store write failed error=\"" << s.message()
                 << "\"; the unit's state changes stay in memory and its writes are kept for "
                    "when the store recovers; its messages are dropped";
      errors_.CountError(metrics::where::kStoreWrite);
    }
    return absl::UnavailableError(absl::StrCat("controller store write failed: ", s.message()));
  }
  if (!options_.group_commit) return SyncStore();
  return absl::OkStatus();
}

absl::Status Controller::SyncStore() {
  if (store_.healthy() && !store_.has_unsynced()) {
    hub_.Release();
    return absl::OkStatus();
  }
  const bool was_healthy = store_.healthy();
  absl::Status s = store_.Sync();
  if (s.ok()) {
    if (!was_healthy) {
      LOG(WARNING) << "store recovered: the writes kept since its failure are stored, "
                   << hub_.held_messages() << " held messages go out";
    }
    hub_.Release();
    return s;
  }
  if (was_healthy) {
    LOG(ERROR) << "store sync failed error=\"" << s.message()
               << "\"; nothing is acknowledged until the store recovers";
    errors_.CountError(metrics::where::kStoreSync);
  }
  return s;
}

absl::Status Controller::EnsureStore() {
  if (store_.healthy()) return absl::OkStatus();
  return SyncStore();
}

absl::StatusOr<store::StoreFigures> Controller::StoredFigures(const store::ControllerStore& store) {
  auto jobs = store.LoadJobs();
  if (!jobs.ok()) return jobs.status();
  auto events = store.LoadEvents();
  if (!events.ok()) return events.status();
  auto directives = store.LoadDirectives();
  if (!directives.ok()) return directives.status();
  auto agents = store.LoadAgents();
  if (!agents.ok()) return agents.status();
  uint64_t batches = 0;
  for (const auto& a : *agents) batches += ingest::SequenceTracker(a).acked_sequence();
  return store::StoreFigures{{"jobs", jobs->size()},
                             {"events", events->size()},
                             {"directives", directives->size()},
                             {"batches", batches}};
}

store::StoreFigures Controller::Figures() const {
  uint64_t batches = 0;
  for (const auto& [id, agent] : agents_) batches += agent.tracker.acked_sequence();
  return {{"jobs", registry_.size()},
          {"events", events_.size()},
          {"directives", directives_.size()},
          {"batches", batches}};
}

void Controller::CommitOrCount(core::UnitOfWork* uow, absl::string_view where,
                               absl::string_view what) {
  if (absl::Status s = Commit(uow); !s.ok()) {
    LOG(WARNING) << what << " not stored where=" << where << " error=\"" << s.message() << "\"";
    errors_.CountError(where);
  }
}

void Controller::Reply(AgentSession* session, const falcon::v1::ControllerMessage& message) {
  hub_.SendTo(session->channel, message);
}

falcon::v1::AuditRecord Controller::RecordAudit(falcon::v1::AuditRecord record) {
  record.set_time_ns(absl::ToUnixNanos(clock_->Now()));
  core::UnitOfWork uow;
  const falcon::v1::AuditRecord stored = audit_.Append(std::move(record), &uow.txn());
  LOG(INFO) << "control call audited method=" << stored.method()
            << " identity=" << stored.identity()
            << " role=" << (stored.role().empty() ? "-" : stored.role())
            << " peer=" << stored.peer() << " audit=" << stored.audit_id() << " result=\""
            << absl::CEscape(stored.result()) << "\" request=\"" << absl::CEscape(stored.request())
            << "\"";
  CommitOrCount(&uow, metrics::where::kAuditCommit, "audit record");
  return stored;
}

void Controller::StartOverIfRelaunched(const registry::JobEntry& job, const falcon::v1::Job& before,
                                       core::UnitOfWork* uow) {
  if (before.world_size() == 0 || job.job().epoch() <= before.epoch() ||
      job.job().world_size() == before.world_size()) {
    return;
  }
  detection_.RemoveJob(job.name());
  // Its stored window too: replayed after a restart, the old layout's samples would mix with
  // the new one's (this batch's own samples are staged after the deletion, and kept).
  uow->txn().DeleteJobSamples(job.name());
  const std::string line =
      absl::StrCat("job relaunched on a new layout, detection starts over job=", job.name(),
                   " epoch=", before.epoch(), "->", job.job().epoch(),
                   " world_size=", before.world_size(), "->", job.job().world_size());
  uow->AfterCommit([line]() { LOG(INFO) << line; });
}

void Controller::PersistAgent(const std::string& agent_id, core::UnitOfWork* uow) {
  AgentState& a = agents_[agent_id];
  a.record.set_agent_id(agent_id);
  a.tracker.ToRecord(&a.record);
  uow->txn().PutAgent(a.record);
}

void Controller::OnAgentConnected(AgentSession* session) {
  session->last_message = clock_->Now();
  if (!session->ended) sessions_.insert(session);
}

absl::Status Controller::OnAgentMessage(AgentSession* session,
                                        const falcon::v1::AgentMessage& message) {
  if (session->ended) {
    return absl::UnavailableError("the stream was closed (idle timeout); reconnect");
  }
  session->last_message = clock_->Now();
  if (message.has_hello()) return OnHello(session, message.hello());
  if (!session->hello_done) {
    return absl::FailedPreconditionError("hello: the first message of a stream must be AgentHello");
  }
  switch (message.msg_case()) {
    case falcon::v1::AgentMessage::kBatch:
      return OnBatch(session, message.batch());
    case falcon::v1::AgentMessage::kValidationResult:
      OnValidationResult(*session, message.validation_result());
      return absl::OkStatus();
    case falcon::v1::AgentMessage::kDirectiveAck:
      OnDirectiveAck(*session, message.directive_ack());
      return absl::OkStatus();
    case falcon::v1::AgentMessage::kHeartbeat:
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError("msg: empty AgentMessage");
  }
}

absl::Status Controller::OnHello(AgentSession* session, const falcon::v1::AgentHello& hello) {
  if (session->hello_done) {
    return absl::InvalidArgumentError("hello: AgentHello sent twice on one stream");
  }
  if (util::MaybeFieldError e = ingest::ValidateHello(hello)) return util::ToStatus(*e);
  if (std::optional<LimitRefusal> r = CheckHelloLimits(hello, options_.resource_limits)) {
    CountRefusal(*r);
    return r->status;
  }
  // Peer checks, before anything changes.
  const std::string& agent_id = hello.agent_id();
  if (session->authenticated) {
    if (session->role == "operator" || session->role == "viewer") {
      return absl::PermissionDeniedError(RefuseClaim(
          *session, metrics::check::kNodeIdentity, "hello.node", "", agent_id,
          absl::StrCat("the peer's certificate is a falconctl user's (OU=", session->role,
                       "), not a node's")));
    }
    const auto& ids = session->identities;
    if (std::find(ids.begin(), ids.end(), hello.node()) == ids.end()) {
      return absl::PermissionDeniedError(RefuseClaim(
          *session, metrics::check::kNodeIdentity, "hello.node", "", agent_id,
          absl::StrCat("node '", hello.node(), "' does not match the peer's certificate (node ",
                       absl::StrJoin(ids, ", "), ")")));
    }
    auto known = agents_.find(agent_id);
    if (known != agents_.end() && !known->second.record.node().empty() &&
        known->second.record.node() != hello.node()) {
      return absl::PermissionDeniedError(RefuseClaim(
          *session, metrics::check::kNodeIdentity, "hello.agent_id", "", agent_id,
          absl::StrCat("agent '", agent_id, "' belongs to node '", known->second.record.node(),
                       "', not to node '", hello.node(), "' the peer's certificate proves")));
    }
  }
  if (hub_.IsConnected(agent_id)) {
    auto live = live_peers_.find(agent_id);
    return absl::PermissionDeniedError(RefuseClaim(
        *session, metrics::check::kAgentIdLive, "hello.agent_id", "", agent_id,
        absl::StrCat("agent '", agent_id, "' is live on another stream (peer ",
                     live == live_peers_.end() ? "unknown" : live->second,
                     "); a stream takes an agent id only once the stream holding it is gone")));
  }
  if (auto known = agents_.find(agent_id);
      known != agents_.end() && hello.first_unacked_sequence() > 0) {
    const uint64_t claimed = hello.first_unacked_sequence() - 1;
    const uint64_t seen = known->second.tracker.highest_seen();
    if (claimed > seen && claimed - seen > kMaxSequenceGap) {
      return absl::PermissionDeniedError(RefuseClaim(
          *session, metrics::check::kFirstUnackedSequence, "hello.first_unacked_sequence", "",
          agent_id,
          absl::StrCat(hello.first_unacked_sequence(), " lies beyond the highest sequence ", seen,
                       " stored of this agent by more than ", kMaxSequenceGap,
                       "; restarting the agent starts its buffer over")));
    }
  }
  for (int i = 0; i < hello.jobs_size(); ++i) {
    if (std::optional<Claim> c =
            CheckRegistrationClaim(agent_id, hello.jobs(i), util::Indexed("hello.jobs", i))) {
      return absl::PermissionDeniedError(
          RefuseClaim(*session, c->check, c->field, hello.jobs(i).job(), agent_id, c->why));
    }
  }
  if (absl::Status s = EnsureStore(); !s.ok()) {
    LOG(WARNING) << "agent refused: store unavailable agent=" << hello.agent_id()
                 << " node=" << hello.node() << " error=\"" << s.message() << "\"";
    errors_.CountError(metrics::where::kHelloStoreUnavailable);
    return s;
  }
  // Check every registration first, so a bad one leaves everything unchanged.
  std::vector<falcon::v1::JobRegistration> regs;
  for (int i = 0; i < hello.jobs_size(); ++i) {
    regs.push_back(Rejoined(hello.agent_id(), hello.jobs(i)));
    if (util::MaybeFieldError e =
            registry_.Check(hello.agent_id(), regs.back(), util::Indexed("hello.jobs", i))) {
      return util::ToStatus(*e);
    }
  }
  core::UnitOfWork uow;
  AgentState& agent = agents_[hello.agent_id()];
  agent.tracker.ForgetBelow(hello.first_unacked_sequence());
  agent.record.set_node(hello.node());
  agent.record.set_version(hello.version());
  agent.record.set_last_hello_time_ns(absl::ToUnixNanos(clock_->Now()));
  PersistAgent(hello.agent_id(), &uow);
  std::set<std::string> listed;
  std::vector<std::string> registered;
  for (size_t i = 0; i < regs.size(); ++i) {
    const falcon::v1::JobRegistration& reg = regs[i];
    listed.insert(reg.job());
    const registry::JobEntry* known = registry_.Find(reg.job());
    if (known == nullptr) registered.push_back(reg.job());
    const falcon::v1::Job before = known != nullptr ? known->job() : falcon::v1::Job();
    registry::JobEntry* entry = nullptr;
    if (util::MaybeFieldError e = registry_.Register(
            hello.agent_id(), hello.node(), reg, util::Indexed("hello.jobs", static_cast<int>(i)),
            &uow.txn(), &entry)) {
      return util::ToStatus(*e);  // Checked above: cannot happen.
    }
    if (entry->job().state() == falcon::v1::JOB_STATE_ENDED) {
      entry->set_state(falcon::v1::JOB_STATE_TRACKING);
      entry->set_ended_time_ns(0);
      registry_.Persist(*entry, &uow.txn());
    }
    StartOverIfRelaunched(*entry, before, &uow);
    detection_.OnJobChanged(*entry);
  }
  if (absl::Status s = Commit(&uow); !s.ok()) {
    LOG(WARNING) << "agent hello not stored agent=" << hello.agent_id() << " node=" << hello.node()
                 << " error=\"" << s.message() << "\"";
    errors_.CountError(metrics::where::kHelloCommit);
    return s;
  }

  session->agent_id = hello.agent_id();
  session->node = hello.node();
  session->hello_done = true;
  session->hub_session = hub_.Attach(hello.agent_id(), session->channel);
  live_peers_[hello.agent_id()] = session->peer;
  for (const std::string& name : registered) {
    const registry::JobEntry* job = registry_.Find(name);
    LOG(INFO) << "job registered job=" << name << " agent=" << hello.agent_id()
              << " node=" << hello.node() << " ranks=" << (job ? job->ranks().size() : 0);
  }
  LOG(INFO) << "agent connected agent=" << hello.agent_id() << " node=" << hello.node()
            << " version=" << hello.version()
            << (listed.empty() ? "" : absl::StrCat(" jobs=", absl::StrJoin(listed, ",")))
            << " acked_sequence=" << agent.tracker.acked_sequence()
            << " first_unacked=" << hello.first_unacked_sequence() << " identity="
            << (!session->authenticated       ? "plaintext"
                : session->identities.empty() ? "-"
                                              : absl::StrJoin(session->identities, ","));
  falcon::v1::ControllerMessage reply;
  reply.mutable_hello()->set_controller_id(options_.controller_id);
  reply.mutable_hello()->set_acked_sequence(agent.tracker.acked_sequence());
  Reply(session, reply);
  for (const std::string& name : listed) {
    const registry::JobEntry* job = registry_.Find(name);
    if (presence_.IsAway(name, hello.agent_id())) {
      MarkBack(*job, hello.agent_id());
      continue;
    }
    directives_.Redeliver(hello.agent_id(), *job);
    localizer_.OnAgentJoined(hello.agent_id(), *job);
  }
  // Jobs this agent had and does not list (restarted, its shims not back yet): it is away from
  // them; they stay as they are until it registers them again or the grace passes.
  for (const std::string& name : registry_.JobsOfAgent(hello.agent_id())) {
    if (listed.count(name)) continue;
    const registry::JobEntry* job = registry_.Find(name);
    if (job->job().state() == falcon::v1::JOB_STATE_ENDED) continue;
    MarkAway(*job, hello.agent_id(), "its agent said hello without the job");
  }
  if (metrics_ != nullptr) metrics_->AgentsConnected(hub_.connected());
  return absl::OkStatus();
}

falcon::v1::JobRegistration Controller::Rejoined(const std::string& agent_id,
                                                 const falcon::v1::JobRegistration& reg) const {
  const registry::JobEntry* job = registry_.Find(reg.job());
  if (job == nullptr || !presence_.Rejoining(reg.job(), agent_id, clock_->Now())) return reg;
  return registry::WithEarlierPart(*job, agent_id, reg);
}

void Controller::MarkAway(const registry::JobEntry& job, const std::string& agent_id,
                          absl::string_view why) {
  const absl::Time now = clock_->Now();
  if (!presence_.Away(job.name(), agent_id, now)) return;
  std::optional<absl::Time> since = presence_.UnreportedSince(job.name(), job.AgentIds());
  LOG(INFO) << "agent away job=" << job.name() << " agent=" << agent_id << " reason=\"" << why
            << "\""
            << (since.has_value()
                    ? absl::StrCat(" reported_by=none job_ends_in=",
                                   absl::FormatDuration(*since + options_.job_end_grace - now))
                    : "");
}

void Controller::MarkBack(const registry::JobEntry& job, const std::string& agent_id) {
  std::optional<absl::Duration> away = presence_.Back(job.name(), agent_id, clock_->Now());
  if (!away.has_value()) return;
  LOG(INFO) << "agent back job=" << job.name() << " agent=" << agent_id
            << " away_for=" << absl::FormatDuration(*away);
  // What it missed, or lost with a restart: PENDING directives and profiling.
  directives_.Redeliver(agent_id, job);
  localizer_.OnAgentJoined(agent_id, job);
}

absl::Status Controller::Reject(AgentSession* session, uint64_t sequence,
                                falcon::v1::FieldError error) {
  // A rejected batch is not resent: mark its sequence as handled so the watermark moves on.
  errors_.CountError(metrics::where::kBatchRejected);  // Each caller logged why.
  core::UnitOfWork uow;
  if (sequence > 0) {
    agents_[session->agent_id].tracker.MarkStored(sequence);
    PersistAgent(session->agent_id, &uow);
  }
  if (absl::Status s = Commit(&uow); !s.ok()) {
    LOG(WARNING) << "batch rejection not stored agent=" << session->agent_id
                 << " sequence=" << sequence << " error=\"" << s.message() << "\"";
    errors_.CountError(metrics::where::kBatchCommit);
    return s;
  }
  if (metrics_ != nullptr) metrics_->BatchRejected();
  falcon::v1::ControllerMessage reply;
  reply.mutable_batch_ack()->set_sequence(sequence);
  *reply.mutable_batch_ack()->mutable_error() = std::move(error);
  Reply(session, reply);
  return absl::OkStatus();
}

absl::Status Controller::OnBatch(AgentSession* session, const falcon::v1::TelemetryBatch& batch) {
  if (absl::Status s = EnsureStore(); !s.ok()) {
    // Nothing is applied (nor acknowledged, not even a duplicate): the stream ends and the agent
    // resends everything unacknowledged once it is accepted again.
    LOG(WARNING) << "batch refused: store unavailable agent=" << session->agent_id
                 << " job=" << batch.job() << " sequence=" << batch.sequence() << " error=\""
                 << s.message() << "\"";
    errors_.CountError(metrics::where::kBatchStoreUnavailable);
    return s;
  }
  if (util::MaybeFieldError e = ValidateBatchEnvelope(batch, options_.limits)) {
    LOG(WARNING) << "batch rejected agent=" << session->agent_id << " job=" << batch.job()
                 << " sequence=" << batch.sequence() << " field=" << e->field() << " error=\""
                 << e->message() << "\"";
    return Reject(session, batch.sequence(), std::move(*e));
  }
  AgentState& agent = agents_[session->agent_id];
  falcon::v1::ControllerMessage ack;
  ack.mutable_batch_ack()->set_sequence(batch.sequence());
  if (agent.tracker.IsDuplicate(batch.sequence())) {
    VLOG(1) << "batch resent agent=" << session->agent_id << " job=" << batch.job()
            << " sequence=" << batch.sequence() << " (already stored; acknowledged again)";
    if (metrics_ != nullptr) metrics_->BatchDuplicate();
    Reply(session, ack);
    return absl::OkStatus();
  }
  core::UnitOfWork uow;
  std::optional<registry::RegistrationUndo> undo;
  registry::JobEntry* entry = nullptr;
  bool new_job = false;
  falcon::v1::Job before;  // The job before this batch's registration merged.
  if (batch.has_registration()) {
    const registry::JobEntry* existing = registry_.Find(batch.job());
    if (existing != nullptr) before = existing->job();
    const bool new_for_agent = existing == nullptr || !existing->HasPart(session->agent_id);
    new_job = existing == nullptr;
    if (std::optional<LimitRefusal> r = CheckRegistrationLimits(
            session->agent_id, batch.registration(), new_for_agent,
            registry_.JobCountOfAgent(session->agent_id), options_.resource_limits)) {
      CountRefusal(*r);
      return Reject(
          session, batch.sequence(),
          util::MakeFieldError(r->limit == kMaxRanksPerJob ? "batch.registration.world_size"
                                                           : "batch.registration.job",
                               absl::StrCat("RESOURCE_EXHAUSTED: ", r->status.message())));
    }
    if (std::optional<Claim> c =
            CheckRegistrationClaim(session->agent_id, batch.registration(), "batch.registration")) {
      const std::string refused = RefuseClaim(
          *session, c->check, c->field, batch.registration().job(), session->agent_id, c->why);
      return Reject(session, batch.sequence(),
                    util::MakeFieldError(c->field, absl::StrCat("PERMISSION_DENIED: ", refused)));
    }
    // Merged in place (what it costs is the agent's part, not the job), and undone when the
    // batch's data is rejected below: a rejected batch changes nothing.
    undo.emplace();
    if (util::MaybeFieldError e = registry_.Register(
            session->agent_id, session->node, Rejoined(session->agent_id, batch.registration()),
            "batch.registration", &uow.txn(), &entry, &*undo)) {
      LOG(WARNING) << "registration rejected agent=" << session->agent_id
                   << " job=" << batch.registration().job() << " field=" << e->field()
                   << " error=\"" << e->message() << "\"";
      return Reject(session, batch.sequence(), std::move(*e));
    }
  } else {
    entry = registry_.Find(batch.job());
    if (entry == nullptr) {
      LOG(WARNING) << "batch rejected agent=" << session->agent_id << " job=" << batch.job()
                   << " sequence=" << batch.sequence() << " error=\"job is not registered\"";
      return Reject(session, batch.sequence(),
                    util::MakeFieldError(
                        "batch.job", absl::StrCat("job '", batch.job(), "' is not registered")));
    }
  }
  if (util::MaybeFieldError e = ingest::ValidateBatchData(batch, *entry, options_.limits)) {
    LOG(WARNING) << "batch rejected agent=" << session->agent_id << " job=" << entry->name()
                 << " sequence=" << batch.sequence() << " field=" << e->field() << " error=\""
                 << e->message() << "\"";
    if (undo.has_value()) registry_.Undo(std::move(*undo));  // Its staged writes go with uow.
    return Reject(session, batch.sequence(), std::move(*e));
  }
  // An agent reports only the ranks its own shims hold: another agent's summaries or op records
  // would be taken for theirs (a forged newer iteration makes the real ones stale).
  if (std::optional<Claim> c = CheckBatchRanks(*session, *entry, batch)) {
    const std::string refused =
        RefuseClaim(*session, c->check, c->field, entry->name(), session->agent_id, c->why);
    if (undo.has_value()) registry_.Undo(std::move(*undo));
    return Reject(session, batch.sequence(),
                  util::MakeFieldError(c->field, absl::StrCat("PERMISSION_DENIED: ", refused)));
  }

  if (undo.has_value()) {
    if (new_job) {
      const std::string line =
          absl::StrCat("job registered job=", entry->name(), " agent=", session->agent_id,
                       " node=", session->node, " ranks=", entry->ranks().size());
      uow.AfterCommit([line]() { LOG(INFO) << line; });
    }
    StartOverIfRelaunched(*entry, before, &uow);
    detection_.OnJobChanged(*entry);
  }
  if (entry->job().state() == falcon::v1::JOB_STATE_ENDED) {
    entry->set_state(falcon::v1::JOB_STATE_TRACKING);
    entry->set_ended_time_ns(0);
    registry_.Persist(*entry, &uow.txn());
  }
  detection::DetectionManager::ApplyStats stats =
      detection_.ApplySummaries(*entry, batch.iterations(), &uow);
  for (const falcon::v1::IterationSummary& s : batch.iterations()) {
    if (imbalance_.Add(*entry, s)) ImbalanceAnalysed(*entry);
  }
  bool comms_changed =
      batch.ops_size() > 0 && detection_.ApplyOps(entry, batch.op_rank(), batch.ops());
  for (const falcon::v1::RankOps& ro : batch.rank_ops()) {
    if (ro.ops_size() > 0 && detection_.ApplyOps(entry, ro.rank(), ro.ops())) comms_changed = true;
  }
  if (comms_changed) registry_.Persist(*entry, &uow.txn());
  agent.tracker.MarkStored(batch.sequence());
  PersistAgent(session->agent_id, &uow);
  if (absl::Status s = Commit(&uow); !s.ok()) {
    // Not acknowledged: the stream ends and the agent resends the batch. Its changes stay in
    // memory and its writes are kept: once the store recovers they are stored, and the resent
    // batch is then acknowledged as a duplicate (ControllerStore).
    LOG(WARNING) << "batch not stored agent=" << session->agent_id << " job=" << entry->name()
                 << " sequence=" << batch.sequence() << " error=\"" << s.message() << "\"";
    errors_.CountError(metrics::where::kBatchCommit);
    return s;
  }
  if (metrics_ != nullptr) {
    metrics_->BatchApplied();
    metrics_->Summaries(stats.applied);
    metrics_->StaleSummaries(stats.stale);
    metrics_->OpRecords(common::OpRecordCount(batch));
  }
  Reply(session, ack);
  // A restarted agent takes its job back with its first batch of it.
  if (presence_.IsAway(entry->name(), session->agent_id)) MarkBack(*entry, session->agent_id);
  return absl::OkStatus();
}

std::string Controller::RefuseClaim(const AgentSession& session, const char* check,
                                    absl::string_view field, absl::string_view job,
                                    absl::string_view agent, absl::string_view why) {
  LOG(WARNING) << "peer claim refused check=" << check << " job=" << (job.empty() ? "-" : job)
               << " agent=" << agent << " peer=" << session.peer << " field=" << field
               << " error=\"" << why << "\"";
  if (metrics_ != nullptr) metrics_->PeerRefused(check);
  return absl::StrCat(field, ": ", why, " (agent '", agent, "', peer ", session.peer, ")");
}

std::optional<Controller::Claim> Controller::CheckRegistrationClaim(
    const std::string& agent_id, const falcon::v1::JobRegistration& reg,
    const std::string& path) const {
  const registry::JobEntry* job = registry_.Find(reg.job());
  // At the same epoch the merge hands a rank to the last agent to register it; a rank held by
  // another agent that is connected and reports the job is not this one's to take (it would then
  // pass the batch rank check with summaries of that rank).
  if (job != nullptr && reg.epoch() == job->epoch()) {
    for (int i = 0; i < reg.ranks_size(); ++i) {
      const std::string* holder = job->AgentOfRank(reg.ranks(i).rank());
      if (holder != nullptr && *holder != agent_id && hub_.IsConnected(*holder) &&
          !presence_.IsAway(job->name(), *holder)) {
        return Claim{metrics::check::kBatchRank, util::Indexed(path + ".ranks", i) + ".rank",
                     absl::StrCat("rank ", reg.ranks(i).rank(), " of job '", job->name(),
                                  "' is held by agent '", *holder,
                                  "', which is connected and reports it: a registration at the "
                                  "same epoch cannot take it")};
      }
    }
  }
  if (job == nullptr || job->parts().empty() || reg.epoch() <= job->epoch()) {
    return std::nullopt;  // A new job, or no rise: the registry's merge checks the rest.
  }
  if (reg.epoch() - job->epoch() > kMaxEpochStep) {
    return Claim{metrics::check::kEpoch, path + ".epoch",
                 absl::StrCat(reg.epoch(), " raises the job's epoch ", job->epoch(),
                              " by more than ", kMaxEpochStep)};
  }
  if (job->HasPart(agent_id)) return std::nullopt;
  if (job->job().state() == falcon::v1::JOB_STATE_ENDED) return std::nullopt;
  for (const std::string& other : job->AgentIds()) {
    if (hub_.IsConnected(other) && !presence_.IsAway(job->name(), other)) {
      return Claim{metrics::check::kEpoch, path + ".epoch",
                   absl::StrCat(reg.epoch(), " would raise the epoch ", job->epoch(), " of job '",
                                job->name(), "', in which this agent has no part, while agent '",
                                other, "' reports it")};
    }
  }
  return std::nullopt;
}

std::optional<Controller::Claim> Controller::CheckBatchRanks(
    const AgentSession& session, const registry::JobEntry& job,
    const falcon::v1::TelemetryBatch& batch) const {
  auto refused = [&](std::string field, uint32_t rank, absl::string_view what) {
    const std::string* holder = job.AgentOfRank(rank);
    return Claim{metrics::check::kBatchRank, std::move(field),
                 absl::StrCat("rank ", rank, " of job '", job.name(), "' is ",
                              holder != nullptr
                                  ? absl::StrCat("held by agent '", *holder, "', not this one")
                                  : std::string("held by no agent and this agent has no part in "
                                                "the job (a part dropped by a relaunch?)"),
                              "; its ", what, " refused")};
  };
  for (int i = 0; i < batch.iterations_size(); ++i) {
    const uint32_t rank = batch.iterations(i).rank();
    if (!HoldsRank(session, &job, rank)) {
      return refused(util::Indexed("batch.iterations", i) + ".rank", rank, "iteration summary");
    }
  }
  if (batch.ops_size() > 0 && !HoldsRank(session, &job, batch.op_rank())) {
    return refused("batch.op_rank", batch.op_rank(), "op records");
  }
  for (int k = 0; k < batch.rank_ops_size(); ++k) {
    const uint32_t rank = batch.rank_ops(k).rank();
    if (!HoldsRank(session, &job, rank)) {
      return refused(util::Indexed("batch.rank_ops", k) + ".rank", rank, "op records");
    }
  }
  return std::nullopt;
}

bool Controller::HoldsRank(const AgentSession& session, const registry::JobEntry* job,
                           uint32_t rank) const {
  if (job == nullptr) return true;  // The validators refuse it.
  if (const std::string* holder = job->AgentOfRank(rank)) return *holder == session.agent_id;
  return job->HasPart(session.agent_id);
}

void Controller::OnValidationResult(const AgentSession& session,
                                    const falcon::v1::ValidationResult& result) {
  if (metrics_ != nullptr) metrics_->ValidationResult();
  if (!HoldsRank(session, registry_.Find(result.job()), result.rank())) {
    RefuseClaim(session, metrics::check::kValidationResultRank, "validation_result.rank",
                result.job(), session.agent_id,
                absl::StrCat("rank ", result.rank(), " of job '", result.job(),
                             "' is not held by this agent's shims; result of task ",
                             result.task_id(), " dropped"));
    return;
  }
  if (util::MaybeFieldError e =
          ingest::ValidateValidationResult(result, registry_.Find(result.job()), options_.limits)) {
    LOG(WARNING) << "validation result refused job=" << result.job() << " task=" << result.task_id()
                 << " rank=" << result.rank() << " field=" << e->field() << " error=\""
                 << e->message() << "\"";
    errors_.CountError(metrics::where::kValidationResultRefused);
    return;
  }
  if (absl::Status s = EnsureStore(); !s.ok()) {
    // Dropped: the task then times out and the verdict goes on without it.
    LOG(WARNING) << "validation result dropped: store unavailable job=" << result.job()
                 << " task=" << result.task_id() << " rank=" << result.rank();
    errors_.CountError(metrics::where::kValidationResultStoreUnavailable);
    return;
  }
  core::UnitOfWork uow;
  localizer_.OnValidationResult(result, &uow);
  // Lost on a store failure: the task then times out and the verdict goes on without it.
  CommitOrCount(&uow, metrics::where::kValidationResultCommit,
                absl::StrCat("validation result job=", result.job(), " task=", result.task_id(),
                             " rank=", result.rank()));
}

void Controller::OnDirectiveAck(const AgentSession& session, const falcon::v1::DirectiveAck& ack) {
  if (metrics_ != nullptr) metrics_->DirectiveAck();
  const registry::JobEntry* job = registry_.Find(ack.job());
  if (!HoldsRank(session, job, ack.rank())) {
    RefuseClaim(session, metrics::check::kDirectiveAckRank, "directive_ack.rank", ack.job(),
                session.agent_id,
                absl::StrCat("rank ", ack.rank(), " of job '", ack.job(),
                             "' is not held by this agent's shims; ack of directive ",
                             ack.directive_id(), " dropped"));
    return;
  }
  if (util::MaybeFieldError e = ingest::ValidateDirectiveAck(ack, job)) {
    LOG(WARNING) << "directive ack refused job=" << ack.job() << " directive=" << ack.directive_id()
                 << " rank=" << ack.rank() << " field=" << e->field() << " error=\"" << e->message()
                 << "\"";
    errors_.CountError(metrics::where::kDirectiveAckRefused);
    return;
  }
  if (absl::Status s = EnsureStore(); !s.ok()) {
    // Dropped: the directive stays pending and is re-delivered, and the shim acks it again.
    LOG(WARNING) << "directive ack dropped: store unavailable job=" << ack.job()
                 << " directive=" << ack.directive_id() << " rank=" << ack.rank();
    errors_.CountError(metrics::where::kDirectiveAckStoreUnavailable);
    return;
  }
  core::UnitOfWork uow;
  core::DirectiveIssuer::AckOutcome out = directives_.OnAck(ack, *job, &uow);
  // A refused ack (out.error: unknown id, stale epoch) changes nothing but its record.
  if (out.record != nullptr && out.state_changed) DirectiveStateChanged(*out.record, &uow);
  // Lost on a store failure: the directive stays pending and is re-delivered, and the shim acks
  // it again.
  CommitOrCount(&uow, metrics::where::kDirectiveAckCommit,
                absl::StrCat("directive ack job=", ack.job(), " directive=", ack.directive_id(),
                             " rank=", ack.rank()));
}

void Controller::DirectiveStateChanged(const falcon::v1::DirectiveRecord& record,
                                       core::UnitOfWork* uow) {
  localizer_.OnDirectiveState(record, uow);
  if (hook_ != nullptr && record.event_id() != 0) {
    Actions actions(this, uow);
    hook_->OnDirectiveState(record, actions);
  }
}

void Controller::OnAgentDisconnected(AgentSession* session) {
  sessions_.erase(session);
  if (session->ended) return;
  session->ended = true;
  if (!session->hello_done) return;
  const bool current = hub_.Detach(session->agent_id, session->hub_session);
  LOG(INFO) << "agent disconnected agent=" << session->agent_id << " node=" << session->node
            << (current ? "" : " (an older stream; a newer one is connected)");
  if (current) {
    live_peers_.erase(session->agent_id);
    for (const std::string& name : registry_.JobsOfAgent(session->agent_id)) {
      const registry::JobEntry* job = registry_.Find(name);
      if (job->job().state() == falcon::v1::JOB_STATE_ENDED) continue;
      if (!job->HasPart(session->agent_id)) continue;
      MarkAway(*job, session->agent_id, "its agent's stream ended");
    }
  }
  if (metrics_ != nullptr) metrics_->AgentsConnected(hub_.connected());
}

void Controller::EndJob(registry::JobEntry* job, const std::string& reason, core::UnitOfWork* uow) {
  if (job->job().state() == falcon::v1::JOB_STATE_ENDED) return;
  for (EventRecord* e : events_.ActiveEvents(job->name())) {
    localizer_.Cancel(e, uow);
    events_.Close(e, detection_.LastIteration(job->name()), absl::StrCat("job ended: ", reason),
                  uow);
  }
  presence_.Forget(job->name());
  job->set_state(falcon::v1::JOB_STATE_ENDED);
  job->set_ended_time_ns(absl::ToUnixNanos(clock_->Now()));
  registry_.Persist(*job, &uow->txn());
  {
    const std::string line =
        absl::StrCat("job ended job=", job->name(), " reason=\"", reason, "\"");
    uow->AfterCommit([line]() { LOG(INFO) << line; });
  }
  if (metrics_ != nullptr) {
    const std::string name = job->name();
    uow->AfterCommit([this, name]() { metrics_->RemoveJob(name); });
  }
}

void Controller::CountRefusal(const LimitRefusal& refusal) {
  LOG(WARNING) << "registration refused limit=" << refusal.limit << " error=\""
               << refusal.status.message() << "\"";
  if (metrics_ != nullptr) metrics_->LimitRefused(refusal.limit);
}

void Controller::CloseIdleStreams(absl::Time now) {
  std::vector<AgentSession*> idle;
  for (AgentSession* s : sessions_) {
    if (now - s->last_message >= options_.stream_idle_timeout) idle.push_back(s);
  }
  for (AgentSession* s : idle) {
    const std::string who =
        s->hello_done ? absl::StrCat("agent=", s->agent_id, " node=", s->node) : "agent=(no hello)";
    LOG(WARNING) << "agent stream timed out " << who << " peer=" << s->peer
                 << " idle=" << absl::FormatDuration(now - s->last_message)
                 << " limit=" << absl::FormatDuration(options_.stream_idle_timeout)
                 << " (no message or heartbeat)";
    if (metrics_ != nullptr) metrics_->StreamIdleTimeout();
    if (s->channel != nullptr) {
      s->channel->Close(absl::UnavailableError(
          absl::StrCat("stream idle for ", absl::FormatDuration(now - s->last_message),
                       " (stream_idle_timeout ", absl::FormatDuration(options_.stream_idle_timeout),
                       "): no message or heartbeat; reconnect")));
    }
    OnAgentDisconnected(s);
  }
}

void Controller::Tick() {
  const absl::Time now = clock_->Now();
  CloseIdleStreams(now);  // In memory only: also while the store is failed.
  // Timeouts and job ends wait while the store cannot record them (the store recovers here too).
  if (!EnsureStore().ok()) return;
  core::UnitOfWork uow;
  auto live = [this](const std::string& job) -> const registry::JobEntry* {
    const registry::JobEntry* j = registry_.Find(job);
    return j != nullptr && j->job().state() != falcon::v1::JOB_STATE_ENDED ? j : nullptr;
  };
  // Directives of a job whose agent is away (restarting) wait for it.
  auto held = [this, now](const std::string& job) { return presence_.Held(job, now); };
  for (uint64_t id : directives_.Tick(now, &uow, live, held)) {
    if (const falcon::v1::DirectiveRecord* r = directives_.Find(id)) {
      DirectiveStateChanged(*r, &uow);
    }
  }
  localizer_.Tick(now, &uow);
  if (hook_ != nullptr) {
    Actions actions(this, &uow);
    hook_->Tick(now, actions);
  }
  ExpireAbsences(now, &uow);
  // Lost on a store failure: timeouts and job ends are decided again on the next tick (their
  // in-memory state already changed; the store catches up with the next successful commit).
  CommitOrCount(&uow, metrics::where::kTickCommit,
                "tick (directive timeouts, validation deadlines, job ends)");
  SweepRetention(now);
}

void Controller::ExpireAbsences(absl::Time now, core::UnitOfWork* uow) {
  presence_.Prune(now);
  const std::string grace = absl::FormatDuration(options_.job_end_grace);
  for (const std::string& name : presence_.Jobs()) {
    registry::JobEntry* job = registry_.Find(name);
    if (job == nullptr || job->job().state() == falcon::v1::JOB_STATE_ENDED) {
      presence_.Forget(name);
      continue;
    }
    // A connected agent that did not take the job back within the grace has no ranks there any
    // more. (A disconnected one keeps its part: the job ends below if no other agent reports it.)
    for (const auto& [agent, since] : presence_.Expired(name, now)) {
      if (!hub_.IsConnected(agent)) continue;
      job = registry_.RemoveAgent(name, agent, &uow->txn());
      detection_.OnJobChanged(*job);
      presence_.Forget(name, agent);
      const std::string line = absl::StrCat("agent part removed job=", name, " agent=", agent,
                                            " reason=\"not registered again within ", grace, "\"");
      uow->AfterCommit([line]() { LOG(INFO) << line; });
    }
    if (job->AgentIds().empty()) {
      EndJob(job, "no agent reports the job any more", uow);
      continue;
    }
    std::optional<absl::Time> since = presence_.UnreportedSince(name, job->AgentIds());
    if (since.has_value() && now - *since >= options_.job_end_grace) {
      EndJob(job, absl::StrCat("no agent reported the job for ", grace), uow);
    }
  }
}

void Controller::ImbalanceAnalysed(const registry::JobEntry& job) {
  const analysis::detect::ImbalanceReport* r = imbalance_.Report(job.name());
  if (r == nullptr) return;
  const double stage = r->stage_imbalance.has_value() ? r->stage_imbalance->ratio : 0;
  const double jitter = r->jitter.has_value() ? r->jitter->median_spread : 0;
  if (metrics_ != nullptr) metrics_->WorkloadImbalance(job.name(), stage, jitter);
  // One line when a finding appears or goes (not at every analysis).
  std::string& last = imbalance_logged_[job.name()];
  const std::string key = absl::StrCat(r->stage_imbalance.has_value() ? "stage" : "",
                                       r->jitter.has_value() ? "jitter" : "");
  if (key == last) return;
  last = key;
  const std::string now =
      absl::StrJoin(analysis::detect::DescribeImbalance(*r, options_.imbalance.analysis), "; ");
  LOG(INFO) << (key.empty() ? "workload imbalance gone" : "workload imbalance found")
            << " job=" << job.name() << " iterations=" << r->steps << " findings=\"" << now << "\"";
}

falcon::v1::Job Controller::JobView(const registry::JobEntry& entry) const {
  falcon::v1::Job job = entry.View();
  if (const analysis::detect::ImbalanceReport* r = imbalance_.Report(entry.name())) {
    *job.mutable_imbalance() =
        detection::ImbalanceTracker::ToProto(*r, options_.imbalance.analysis);
  }
  job.set_last_iteration(detection_.LastIteration(entry.name()));
  job.set_iteration_time_ns(detection_.LastIterationTimeNs(entry.name()));
  job.set_detection_armed_iteration(detection_.ArmedIteration(entry.name()));
  job.set_detection_armed_ranks(detection_.ArmedRanks(entry.name()));
  job.clear_active_event_ids();
  // Every active event, oldest first; the healthy time is the one before the oldest.
  const EventRecord* active = nullptr;
  for (const EventRecord* e : events_.ActiveEvents(entry.name())) {
    if (active == nullptr) active = e;
    job.add_active_event_ids(e->event().event_id());
  }
  int64_t healthy = active != nullptr && active->job_baseline_ns() > 0
                        ? active->job_baseline_ns()
                        : absl::ToInt64Nanoseconds(detection_.Baseline(entry.name()));
  job.set_healthy_iteration_time_ns(healthy);
  return job;
}

absl::StatusOr<falcon::v1::Settings> Controller::SetSettings(const falcon::v1::Settings& update) {
  if (!update.job().empty() && registry_.Find(update.job()) == nullptr) {
    return absl::NotFoundError(absl::StrCat("settings.job: unknown job '", update.job(), "'"));
  }
  if (absl::Status s = EnsureStore(); !s.ok()) return s;
  core::UnitOfWork uow;
  absl::StatusOr<falcon::v1::Settings> overrides = settings_.Prepare(update, &uow.txn());
  if (!overrides.ok()) return overrides.status();
  // Applied first, like every unit: should the store fail now, the change stays in memory and
  // its write is kept and stored once the store recovers (ControllerStore).
  settings_.Apply(*overrides);
  const std::string fields = settings::SettingsFields(update);
  LOG(INFO) << "settings changed job=" << (update.job().empty() ? "*" : update.job())
            << (fields.empty() ? "" : " ") << fields;
  // The Control API answers once the change is durable.
  absl::Status s = Commit(&uow);
  if (s.ok()) s = SyncStore();
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("settings applied but not yet durable: ", s.message()));
  }
  return settings_.Get(update.job());
}

absl::StatusOr<uint64_t> Controller::ForceValidation(const std::string& job_name) {
  if (job_name.empty()) return absl::InvalidArgumentError("job: must not be empty");
  const registry::JobEntry* job = registry_.Find(job_name);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job: unknown job '", job_name, "'"));
  }
  if (const EventRecord* active = events_.Active(job_name)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job_name, "' has active event ", active->event().event_id(), " (",
                     metrics::EventStateLabel(active->event().state()), ")"));
  }
  bool connected = false;
  for (const std::string& a : job->AgentIds()) connected = connected || hub_.IsConnected(a);
  if (!connected) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job_name, "' has no connected agent"));
  }
  if (absl::Status s = EnsureStore(); !s.ok()) return s;
  core::UnitOfWork uow;
  EventRecord* event = events_.OpenForced(job_name, detection_.LastIteration(job_name), &uow);
  localizer_.StartForced(event, &uow);
  const uint64_t id = event->event().event_id();
  if (absl::Status s = Commit(&uow); !s.ok()) return s;
  if (absl::Status s = SyncStore(); !s.ok()) return s;
  LOG(INFO) << "validation forced job=" << job_name << " event=" << id;
  return id;
}

absl::StatusOr<falcon::v1::DryRunPlanResponse> Controller::DryRunActive(const std::string& job) {
  if (hook_ == nullptr) return absl::UnimplementedError("mitigation is not installed");
  const EventRecord* event = events_.Active(job);
  if (event == nullptr)
    return absl::NotFoundError(absl::StrCat("job '", job, "': no active event"));
  core::UnitOfWork scratch;  // Never committed: a dry run stages nothing.
  Actions actions(this, &scratch);
  return hook_->DryRun(event->event(), actions);
}

}  // namespace falcon::controller
