#include "controller/control_api.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/mitigation/planner.h"
#include "controller/util/page_token.h"

namespace falcon::controller {
namespace {

using falcon::controller::v1::EventRecord;

// Items the page may hold: page_size (0 or too large: the maximum), and no more than what is
// left of `limit` (0 = no limit) after `served`.
size_t PageCapacity(uint32_t page_size, uint32_t limit, uint64_t served) {
  size_t n =
      page_size == 0 || page_size > ControlApi::kMaxPageSize ? ControlApi::kMaxPageSize : page_size;
  if (limit > 0) n = served >= limit ? 0 : std::min<uint64_t>(n, limit - served);
  return n;
}

// Fills one page from `items` (fetched one more than its capacity, to know whether more follow):
// adds each with `add` until the capacity or the byte budget is reached. Returns how many it added
// and sets `*more` when items remain for a next page (none when the page is empty).
template <typename T, typename SizeFn, typename AddFn>
size_t FillPage(const std::vector<T>& items, size_t capacity, SizeFn size_of, AddFn add,
                bool* more) {
  size_t added = 0, bytes = 0;
  for (const T& item : items) {
    if (added >= capacity) break;
    const size_t n = size_of(item);
    if (added > 0 && bytes + n > ControlApi::kMaxPageBytes) break;
    bytes += n;
    add(item);
    ++added;
  }
  *more = added > 0 && added < items.size();
  return added;
}

// The id cursor of an events or directives token (0 = from the newest).
absl::StatusOr<uint64_t> IdCursor(const util::PageToken& t) {
  uint64_t id = 0;
  if (t.cursor.empty()) return id;
  if (!absl::SimpleAtoi(t.cursor, &id) || id == 0) {
    return absl::InvalidArgumentError("page_token: malformed (not a token this server made)");
  }
  return id;
}

}  // namespace

absl::Status ControlApi::CheckJob(const std::string& job, const char* field,
                                  bool allow_empty) const {
  if (job.empty()) {
    return allow_empty ? absl::OkStatus()
                       : absl::InvalidArgumentError(absl::StrCat(field, ": must not be empty"));
  }
  if (c_->registry().Find(job) == nullptr) {
    return absl::NotFoundError(absl::StrCat(field, ": unknown job '", job, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<falcon::v1::ListJobsResponse> ControlApi::ListJobs(
    const falcon::v1::ListJobsRequest& r) {
  absl::StatusOr<util::PageToken> token = util::DecodePageToken(r.page_token(), "jobs", "");
  if (!token.ok()) return token.status();
  const size_t capacity = PageCapacity(r.page_size(), 0, token->served);
  const std::vector<const registry::JobEntry*> jobs =
      c_->registry().JobsAfter(token->cursor, capacity + 1);
  falcon::v1::ListJobsResponse out;
  size_t bytes = 0;
  for (const registry::JobEntry* job : jobs) {
    if (static_cast<size_t>(out.jobs_size()) >= capacity) break;
    falcon::v1::Job view = c_->JobView(*job);
    const size_t n = view.ByteSizeLong();
    if (out.jobs_size() > 0 && bytes + n > kMaxPageBytes) break;
    bytes += n;
    *out.add_jobs() = std::move(view);
  }
  if (out.jobs_size() > 0 && static_cast<size_t>(out.jobs_size()) < jobs.size()) {
    out.set_next_page_token(util::EncodePageToken(
        {"jobs", "", token->served + out.jobs_size(), out.jobs(out.jobs_size() - 1).job()}));
  }
  return out;
}

absl::StatusOr<falcon::v1::Job> ControlApi::GetJob(const falcon::v1::GetJobRequest& r) {
  if (r.job().empty()) return absl::InvalidArgumentError("job: must not be empty");
  const registry::JobEntry* job = c_->registry().Find(r.job());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job: unknown job '", r.job(), "'"));
  return c_->JobView(*job);
}

absl::StatusOr<falcon::v1::ListEventsResponse> ControlApi::ListEvents(
    const falcon::v1::ListEventsRequest& r) {
  if (absl::Status s = CheckJob(r.job(), "job", true); !s.ok()) return s;
  if (r.limit() > kMaxListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: ", r.limit(), " exceeds ", kMaxListLimit));
  }
  const std::string filter = absl::StrCat(r.job(), "|", r.active_only(), "|", r.limit());
  absl::StatusOr<util::PageToken> token = util::DecodePageToken(r.page_token(), "events", filter);
  if (!token.ok()) return token.status();
  absl::StatusOr<uint64_t> before = IdCursor(*token);
  if (!before.ok()) return before.status();
  const size_t capacity = PageCapacity(r.page_size(), r.limit(), token->served);
  const std::vector<const EventRecord*> events =
      static_cast<const detection::EventManager&>(c_->events())
          .ListBefore(r.job(), r.active_only(), *before, capacity + 1);
  falcon::v1::ListEventsResponse out;
  bool more = false;
  const size_t n = FillPage(
      events, capacity, [](const EventRecord* e) { return e->event().ByteSizeLong(); },
      [&](const EventRecord* e) { *out.add_events() = e->event(); }, &more);
  if (more && (r.limit() == 0 || token->served + n < r.limit())) {
    out.set_next_page_token(
        util::EncodePageToken({"events", filter, token->served + n,
                               absl::StrCat(out.events(out.events_size() - 1).event_id())}));
  }
  return out;
}

absl::StatusOr<falcon::v1::Event> ControlApi::GetEvent(const falcon::v1::GetEventRequest& r) {
  if (r.event_id() == 0) return absl::InvalidArgumentError("event_id: must be > 0");
  const auto* e = static_cast<const detection::EventManager&>(c_->events()).Find(r.event_id());
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("event_id: event ", r.event_id(), " not found"));
  }
  return e->event();
}

absl::StatusOr<std::vector<falcon::v1::Event>> ControlApi::StartWatch(
    const falcon::v1::WatchEventsRequest& r) {
  if (absl::Status s = CheckJob(r.job(), "job", true); !s.ok()) return s;
  std::vector<falcon::v1::Event> replay;
  auto open = c_->events().List(r.job(), /*active_only=*/true, 0);
  for (auto it = open.rbegin(); it != open.rend(); ++it) replay.push_back((*it)->event());
  return replay;
}

absl::StatusOr<falcon::v1::ListDirectivesResponse> ControlApi::ListDirectives(
    const falcon::v1::ListDirectivesRequest& r) {
  if (absl::Status s = CheckJob(r.job(), "job", true); !s.ok()) return s;
  if (r.limit() > kMaxListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: ", r.limit(), " exceeds ", kMaxListLimit));
  }
  const std::string filter = absl::StrCat(r.job(), "|", r.limit());
  absl::StatusOr<util::PageToken> token =
      util::DecodePageToken(r.page_token(), "directives", filter);
  if (!token.ok()) return token.status();
  absl::StatusOr<uint64_t> before = IdCursor(*token);
  if (!before.ok()) return before.status();
  const size_t capacity = PageCapacity(r.page_size(), r.limit(), token->served);
  const std::vector<const falcon::v1::DirectiveRecord*> records =
      c_->directives().ListBefore(r.job(), *before, capacity + 1);
  falcon::v1::ListDirectivesResponse out;
  bool more = false;
  const size_t n = FillPage(
      records, capacity, [](const falcon::v1::DirectiveRecord* d) { return d->ByteSizeLong(); },
      [&](const falcon::v1::DirectiveRecord* d) { *out.add_directives() = *d; }, &more);
  if (more && (r.limit() == 0 || token->served + n < r.limit())) {
    out.set_next_page_token(util::EncodePageToken(
        {"directives", filter, token->served + n,
         absl::StrCat(out.directives(out.directives_size() - 1).directive().directive_id())}));
  }
  return out;
}

absl::StatusOr<falcon::v1::ListAuditResponse> ControlApi::ListAudit(
    const falcon::v1::ListAuditRequest& r) {
  if (r.limit() > kMaxListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: ", r.limit(), " exceeds ", kMaxListLimit));
  }
  const std::string filter = absl::StrCat(r.limit());
  absl::StatusOr<util::PageToken> token = util::DecodePageToken(r.page_token(), "audit", filter);
  if (!token.ok()) return token.status();
  absl::StatusOr<uint64_t> before = IdCursor(*token);
  if (!before.ok()) return before.status();
  const size_t capacity = PageCapacity(r.page_size(), r.limit(), token->served);
  const std::vector<const falcon::v1::AuditRecord*> records =
      c_->audit().ListBefore(*before, capacity + 1);
  falcon::v1::ListAuditResponse out;
  bool more = false;
  const size_t n = FillPage(
      records, capacity, [](const falcon::v1::AuditRecord* a) { return a->ByteSizeLong(); },
      [&](const falcon::v1::AuditRecord* a) { *out.add_records() = *a; }, &more);
  if (more && (r.limit() == 0 || token->served + n < r.limit())) {
    out.set_next_page_token(
        util::EncodePageToken({"audit", filter, token->served + n,
                               absl::StrCat(out.records(out.records_size() - 1).audit_id())}));
  }
  return out;
}

absl::StatusOr<falcon::v1::GetHistoryResponse> ControlApi::GetHistory(
    const falcon::v1::GetHistoryRequest& r) {
  if (absl::Status s = CheckJob(r.job(), "job", false); !s.ok()) return s;
  if (r.from_iteration() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("from_iteration: ", r.from_iteration(), " is negative"));
  }
  if (r.max_points() > kMaxHistoryPoints) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_points: ", r.max_points(), " exceeds ", kMaxHistoryPoints));
  }
  const uint32_t max_points = r.max_points() == 0 ? 10000 : r.max_points();
  auto points = c_->store().LoadHistory(r.job(), r.from_iteration());
  if (!points.ok()) return points.status();
  falcon::v1::GetHistoryResponse out;
  if (points->size() <= max_points) {
    for (auto& p : *points) *out.add_points() = std::move(p);
  } else {
    // Buckets of equal size in points (the stored points are already one per stride).
    const size_t n = points->size();
    for (uint32_t b = 0; b < max_points; ++b) {
      size_t lo = n * b / max_points, hi = n * (b + 1) / max_points;
      if (lo >= hi) continue;
      falcon::v1::HistoryPoint agg;
      agg.set_iteration((*points)[lo].iteration());
      agg.set_time_ns((*points)[hi - 1].time_ns());
      double sum = 0;
      int64_t plan = 0;
      for (size_t i = lo; i < hi; ++i) {
        sum += static_cast<double>((*points)[i].iteration_time_ns());
        plan = std::max(plan, (*points)[i].plan_version());
      }
      agg.set_iteration_time_ns(static_cast<int64_t>(std::llround(sum / (hi - lo))));
      agg.set_plan_version(plan);
      *out.add_points() = agg;
    }
  }
  for (const auto* e : c_->events().List(r.job(), false, 0)) {
    const falcon::v1::Event& ev = e->event();
    bool ends_before = ev.recovery_iteration() >= 0 && ev.recovery_iteration() < r.from_iteration();
    if (!ends_before) *out.add_events() = ev;
  }
  return out;
}

absl::StatusOr<falcon::v1::Settings> ControlApi::GetSettings(
    const falcon::v1::GetSettingsRequest& r) {
  if (absl::Status s = CheckJob(r.job(), "job", true); !s.ok()) return s;
  return c_->settings().Get(r.job());
}

absl::StatusOr<falcon::v1::Settings> ControlApi::SetSettings(
    const falcon::v1::SetSettingsRequest& r) {
  if (!r.has_settings()) return absl::InvalidArgumentError("settings: required");
  return c_->SetSettings(r.settings());
}

absl::StatusOr<falcon::v1::ForceValidationResponse> ControlApi::ForceValidation(
    const falcon::v1::ForceValidationRequest& r) {
  absl::StatusOr<uint64_t> id = c_->ForceValidation(r.job());
  if (!id.ok()) return id.status();
  falcon::v1::ForceValidationResponse out;
  out.set_event_id(*id);
  return out;
}

absl::StatusOr<falcon::v1::DryRunPlanResponse> ControlApi::DryRunPlan(
    const falcon::v1::DryRunPlanRequest& r) {
  if (absl::Status s = CheckJob(r.job(), "job", false); !s.ok()) return s;
  if (!falcon::v1::Cause_IsValid(r.cause())) {
    return absl::InvalidArgumentError(absl::StrCat("cause: unknown cause ", r.cause()));
  }
  if (r.slowdown_ratio() < 0 || !std::isfinite(r.slowdown_ratio())) {
    return absl::InvalidArgumentError("slowdown_ratio: must be finite and >= 0");
  }
  const registry::JobEntry* job = c_->registry().Find(r.job());
  for (int i = 0; i < r.slow_ranks_size(); ++i) {
    if (job->FindRank(r.slow_ranks(i)) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("slow_ranks[", i, "]: rank ", r.slow_ranks(i), " is not registered"));
    }
  }
  for (int i = 0; i < r.slow_links_size(); ++i) {
    const falcon::v1::Link& l = r.slow_links(i);
    if (job->FindRank(l.src_rank()) == nullptr || job->FindRank(l.dst_rank()) == nullptr ||
        l.src_rank() == l.dst_rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slow_links[", i, "]: not a link between two registered ranks"));
    }
  }
  for (int i = 0; i < r.slow_nodes_size(); ++i) {
    if (job->RanksOnNode(r.slow_nodes(i)).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("slow_nodes[", i, "]: node '", r.slow_nodes(i),
                                                     "' has no rank of job '", r.job(), "'"));
    }
  }
  // The culprit: the request's hypothetical verdict, else the job's active event.
  mitigation::Culprit culprit;
  const falcon::v1::Job view = c_->JobView(*job);
  mitigation::LadderState state;
  state.iteration = std::max<int64_t>(0, view.last_iteration());
  absl::Duration healthy = absl::Nanoseconds(view.healthy_iteration_time_ns());
  const bool hypothetical = r.cause() != falcon::v1::CAUSE_UNSPECIFIED || r.slow_ranks_size() > 0 ||
                            r.slow_links_size() > 0 || r.slow_nodes_size() > 0;
  if (hypothetical) {
    culprit.cause = r.cause() != falcon::v1::CAUSE_UNSPECIFIED ? r.cause()
                    : r.slow_links_size() > 0 || r.slow_nodes_size() > 0
                        ? falcon::v1::CAUSE_COMMUNICATION
                        : falcon::v1::CAUSE_COMPUTE;
    culprit.ranks.assign(r.slow_ranks().begin(), r.slow_ranks().end());
    culprit.links.assign(r.slow_links().begin(), r.slow_links().end());
    culprit.nodes.assign(r.slow_nodes().begin(), r.slow_nodes().end());
    culprit.node_ranks = mitigation::RanksOfNodes(culprit.nodes, *job);
    mitigation::FillLinkEnds(*job, &culprit);
    culprit.slowdown_ratio = r.slowdown_ratio() > 1 ? r.slowdown_ratio() : 2.0;
  } else {
    const falcon::controller::v1::EventRecord* e = c_->events().Active(r.job());
    if (e == nullptr || e->event().cause() == falcon::v1::CAUSE_UNSPECIFIED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", r.job(),
          "' has no active event with a verdict; give cause, slow_ranks, slow_links or "
          "slow_nodes"));
    }
    // Planned as mitigation plans it (the culprit's measured slowdown, the plan an S2 in force
    // replaced, the ladder where it stands), unless the request overrides the slowdown.
    if (r.slowdown_ratio() == 0) {
      absl::StatusOr<falcon::v1::DryRunPlanResponse> live = c_->DryRunActive(r.job());
      if (live.ok() ||
          (!absl::IsNotFound(live.status()) && !absl::IsUnimplemented(live.status()))) {
        return live;
      }
    }
    // Without mitigation state (mitigation off): from the event's record and its actions.
    state.lost = absl::Seconds(e->event().lost_seconds());
    for (const falcon::v1::Action& a : e->event().actions()) {
      const char* what = a.revert()                               ? "reverted"
                         : absl::StartsWith(a.reason(), "skip: ") ? "skipped"
                                                                  : "applied";
      state.taken[a.strategy()] = {a.iteration(),
                                   absl::StrCat(what, " at iteration ", a.iteration(),
                                                a.dry_run() ? " (dry run)" : "", ": ", a.reason())};
    }
    culprit = mitigation::CulpritOf(e->event(), *job);
    if (r.slowdown_ratio() > 1) culprit.slowdown_ratio = r.slowdown_ratio();
    if (e->event().healthy_iteration_time_ns() > 0) {
      healthy = absl::Nanoseconds(e->event().healthy_iteration_time_ns());
    }
  }
  if (healthy <= absl::ZeroDuration()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", r.job(), "' has no healthy iteration time yet"));
  }
  absl::StatusOr<mitigation::JobShape> shape = mitigation::ShapeOf(
      *job, nullptr,
      std::vector<uint32_t>(view.micro_batches().begin(), view.micro_batches().end()));
  if (!shape.ok()) return shape.status();
  return mitigation::DryRun(*shape, c_->settings().Effective(r.job()), culprit, healthy,
                            c_->clock().Now(), state);
}

}  // namespace falcon::controller
