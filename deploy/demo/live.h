// The demo's live line (one per second): iteration, iteration time, job state, active event.
#ifndef FALCON_DEPLOY_DEMO_LIVE_H_
#define FALCON_DEPLOY_DEMO_LIVE_H_

#include <string>
#include <vector>

#include "proto/falcon/v1/control.pb.h"

namespace falcon::deploy::demo {

// E.g. "t=  42s  it   318  0.231 s/it  MITIGATING  event 2 COMPUTE rank 2 x1.48 [MITIGATING, S2]"
// or "... TRACKING  -" when no event is active. `events` are the job's active events (any order;
// the newest is shown, with "+N" for more). `elapsed_s` is the time since the run started.
std::string LiveLine(double elapsed_s, const falcon::v1::Job& job,
                     const std::vector<falcon::v1::Event>& events);

// "TRACKING" for JOB_STATE_TRACKING and so on; "STARTING" for UNSPECIFIED.
std::string JobStateName(falcon::v1::JobState state);

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_LIVE_H_
