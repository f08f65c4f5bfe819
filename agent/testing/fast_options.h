// Agent options for integration tests against a controller on loopback: plaintext (loopback;
// docs/operations.md#tls), node "n1" (agent id "agent-n1"), no metrics listener, summaries every 20
// ms, reconnects after 20 ms (at most 200 ms) so a restarted controller is found again within a
// test's patience.
#ifndef FALCON_AGENT_TESTING_FAST_OPTIONS_H_
#define FALCON_AGENT_TESTING_FAST_OPTIONS_H_

#include <string>

#include "absl/time/time.h"
#include "agent/options.h"

namespace falcon::agent::testing {

inline AgentOptions FastAgentOptions(const std::string& controller,
                                     const std::string& socket_path) {
  AgentOptions o;
  o.controller = controller;
  o.plaintext = true;
  o.socket_path = socket_path;
  o.node = "n1";
  o.agent_id = "agent-n1";
  o.metrics_listen = "";
  o.summary_interval = absl::Milliseconds(20);
  o.backoff.initial = absl::Milliseconds(20);
  o.backoff.max = absl::Milliseconds(200);
  return o;
}

}  // namespace falcon::agent::testing

#endif  // FALCON_AGENT_TESTING_FAST_OPTIONS_H_
