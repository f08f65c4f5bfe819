// The Control API (control.proto) in domain terms: request validation (kInvalidArgument naming
// the field; kNotFound where control.proto says so) and responses built from the controller's
// managers. The gRPC adapter (service/control_service.h) only runs these on the controller loop
// and converts the Status. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_CONTROL_API_H_
#define FALCON_CONTROLLER_CONTROL_API_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/controller.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller {

class ControlApi {
 public:
  // Largest `limit` of ListEvents / ListDirectives and `max_points` of GetHistory.
  static constexpr uint32_t kMaxListLimit = 10000;
  static constexpr uint32_t kMaxHistoryPoints = 100000;
  // Paging of ListJobs, ListEvents and ListDirectives (control.proto, AIP-158): a page holds at
  // most page_size items (0 or more than kMaxPageSize: kMaxPageSize) and ends before its items
  // pass kMaxPageBytes serialized (it always holds one), so a reply stays well under gRPC's 4 MiB
  // default; next_page_token continues it (util/page_token.h). kInvalidArgument "page_token: ..."
  // for a token that is malformed or from a request with other fields.
  static constexpr uint32_t kMaxPageSize = 1000;
  static constexpr size_t kMaxPageBytes = size_t{2} << 20;

  explicit ControlApi(Controller* controller) : c_(controller) {}

  // In job-name order, paged.
  absl::StatusOr<falcon::v1::ListJobsResponse> ListJobs(const falcon::v1::ListJobsRequest& r);
  // kInvalidArgument: empty job. kNotFound: unknown job.
  absl::StatusOr<falcon::v1::Job> GetJob(const falcon::v1::GetJobRequest& r);
  // Newest first, paged. kNotFound: unknown job. kInvalidArgument: limit > kMaxListLimit.
  absl::StatusOr<falcon::v1::ListEventsResponse> ListEvents(const falcon::v1::ListEventsRequest& r);
  // kInvalidArgument: event_id 0. kNotFound: unknown event.
  absl::StatusOr<falcon::v1::Event> GetEvent(const falcon::v1::GetEventRequest& r);
  // Checks the request and returns the open events to replay first. kNotFound: unknown job.
  absl::StatusOr<std::vector<falcon::v1::Event>> StartWatch(
      const falcon::v1::WatchEventsRequest& r);
  // Newest first, paged. kNotFound: unknown job. kInvalidArgument: limit > kMaxListLimit.
  absl::StatusOr<falcon::v1::ListDirectivesResponse> ListDirectives(
      const falcon::v1::ListDirectivesRequest& r);
  // kNotFound: unknown job. kInvalidArgument: empty job, negative from_iteration, max_points too
  // large. Points are averaged into at most max_points buckets of equal iteration span.
  absl::StatusOr<falcon::v1::GetHistoryResponse> GetHistory(const falcon::v1::GetHistoryRequest& r);
  // kNotFound: unknown job ("" = the defaults for new jobs).
  absl::StatusOr<falcon::v1::Settings> GetSettings(const falcon::v1::GetSettingsRequest& r);
  absl::StatusOr<falcon::v1::Settings> SetSettings(const falcon::v1::SetSettingsRequest& r);
  absl::StatusOr<falcon::v1::ForceValidationResponse> ForceValidation(
      const falcon::v1::ForceValidationRequest& r);
  // The escalation ladder and the S2/S3 plans for the job's active event, or for the hypothetical
  // verdict in the request (cause, slow_ranks, slow_links, slowdown_ratio; default ratio 2).
  // Never acts. kInvalidArgument naming the field; kFailedPrecondition when there is nothing to
  // plan for (no verdict, no healthy iteration time, layout unknown).
  absl::StatusOr<falcon::v1::DryRunPlanResponse> DryRunPlan(const falcon::v1::DryRunPlanRequest& r);
  // The audit trail, newest first, paged. kInvalidArgument: limit > kMaxListLimit.
  absl::StatusOr<falcon::v1::ListAuditResponse> ListAudit(const falcon::v1::ListAuditRequest& r);

 private:
  absl::Status CheckJob(const std::string& job, const char* field, bool allow_empty) const;
  Controller* const c_;
};

}  // namespace falcon::controller

#endif  // FALCON_CONTROLLER_CONTROL_API_H_
