// directive_ack_bench: the controller's cost of directive acknowledgements. A Pause of every rank
// of a job of N ranks (N = 1,024, 4,096, 16,384; explicit target_ranks, as mitigations send it)
// is acknowledged RECEIVED then APPLIED by every rank, one DirectiveAck and one unit of work per
// ack as the controller handles them, committed to the in-memory store. Prints, per N, the CPU
// time of this thread per ack: DirectiveIssuer::OnAck (the index, the state, staging the ack's
// row, and the record's row on a state change, in the unit of work) and the commit, in µs, and
// checks that the Pause ended APPLIED.
#include <glog/logging.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "controller/core/agent_hub.h"
#include "controller/core/directive_issuer.h"
#include "controller/core/id_allocator.h"
#include "controller/core/unit_of_work.h"
#include "controller/registry/job_registry.h"
#include "controller/store/controller_store.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/testing/job_fixtures.h"

namespace falcon::controller::core {
namespace {

// CPU time of this thread, so that other processes on a shared machine do not distort it.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

bool Run(uint32_t ranks) {
  common::FakeClock clock;
  store::InMemoryKvStore kv(store::ControllerStore::TableNames());
  store::ControllerStore store(&kv, &clock);
  AgentHub hub;  // No agent attached: sends go nowhere.
  IdAllocator ids(falcon::controller::v1::MetaRecord{});
  registry::JobRegistry registry;
  testing::LayoutSpec spec;
  spec.pp = 8;
  spec.dp = ranks / spec.pp;
  spec.ranks_per_node = 8;
  store::StoreTxn txn;
  for (uint32_t n = 0; n < testing::NodeCount(spec); ++n) {
    if (registry.Register(testing::NodeName(n), testing::NodeName(n),
                          testing::NodeRegistration(spec, n), "bench", &txn)) {
      std::fprintf(stderr, "directive_ack_bench: registering node %u failed\n", n);
      return false;
    }
  }
  const registry::JobEntry& job = *registry.Find(spec.job);
  DirectiveIssuer issuer(DirectiveOptions{}, &clock, &ids, &hub);
  falcon::v1::Directive pause;
  pause.mutable_pause()->set_max_duration_ns(30'000'000'000);
  for (uint32_t r : job.ranks()) pause.add_target_ranks(r);
  UnitOfWork issue;
  const uint64_t id = issuer.Issue(pause, 1, job, &issue);
  if (!issue.Commit(&store).ok()) return false;

  double on_ack_s = 0, commit_s = 0;
  uint64_t acks = 0;
  for (falcon::v1::AckStatus status :
       {falcon::v1::ACK_STATUS_RECEIVED, falcon::v1::ACK_STATUS_APPLIED}) {
    for (uint32_t r : job.ranks()) {
      falcon::v1::DirectiveAck ack;
      ack.set_directive_id(id);
      ack.set_job(spec.job);
      ack.set_rank(r);
      ack.set_epoch(issuer.Find(id)->directive().epoch());
      ack.set_status(status);
      ack.set_applied_iteration(status == falcon::v1::ACK_STATUS_APPLIED ? 100 : -1);
      UnitOfWork uow;
      const double t0 = ThreadSeconds();
      issuer.OnAck(ack, job, &uow);
      const double t1 = ThreadSeconds();
      if (!uow.Commit(&store).ok()) return false;
      commit_s += ThreadSeconds() - t1;
      on_ack_s += t1 - t0;
      ++acks;
    }
  }
  const bool applied = issuer.Find(id)->state() == falcon::v1::DirectiveRecord::STATE_APPLIED;
  std::printf("%-8u %-8lu %14.2f %14.2f %12.3f %s\n", ranks, static_cast<unsigned long>(acks),
              1e6 * on_ack_s / static_cast<double>(acks),
              1e6 * commit_s / static_cast<double>(acks), on_ack_s + commit_s,
              applied ? "APPLIED" : "NOT APPLIED");
  return applied;
}

}  // namespace
}  // namespace falcon::controller::core

int main(int argc, char** argv) {
  FLAGS_minloglevel = google::GLOG_ERROR;  // The issuer logs every directive with its ranks.
  std::vector<uint32_t> sizes = {1024, 4096, 16384};
  if (argc > 1) {
    sizes.clear();
    for (int i = 1; i < argc; ++i) sizes.push_back(static_cast<uint32_t>(std::atoi(argv[i])));
  }
  std::printf(
      "directive acks: a Pause of every rank, RECEIVED then APPLIED from each (CPU time)\n");
  std::printf("%-8s %-8s %14s %14s %12s %s\n", "ranks", "acks", "on_ack_us/ack", "commit_us/ack",
              "total_s", "state");
  bool ok = true;
  for (uint32_t n : sizes) ok = falcon::controller::core::Run(n) && ok;
  return ok ? 0 : 1;
}
