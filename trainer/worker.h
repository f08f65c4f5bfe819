// One rank process of a training job, end to end: loads the text, builds the comm runtime with
// this rank's link faults, joins the Gloo world through the rendezvous directory, sets up the
// compute and contention faults, and runs a RankTrainer. falcon_train's rank mode and the
// multi-process tests call RunWorker.
#ifndef FALCON_TRAINER_WORKER_H_
#define FALCON_TRAINER_WORKER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/observer.h"
#include "trainer/hooks.h"
#include "trainer/rank_trainer.h"

namespace falcon::trainer {

struct WorkerOptions {
  // model.vocab_size is set from the text.
  TrainerOptions trainer;
  std::string data_path = model::kDefaultCorpusPath;  // Training text.
  int rank = 0;                                       // Global rank, [0, world_size).
  int world_size = 1;
  std::string rendezvous_dir;  // Shared directory of the job (FALCON_RENDEZVOUS).
  // Fault spec (collective/fault/fault_spec.h), or "@FILE"; empty: none.
  std::string faults;
  // Compute faults burn the CPU (true: extra CPU work, as a slow or contended CPU) or sleep
  // (false: a slow accelerator the host waits for). Burning is what makes a compute fail-slow
  // visible when the ranks share few cores: a sleeping rank hands its CPU to the others.
  bool burn_compute_faults = true;
  // Directive script (directives/scripted_hooks.h) used when no hooks are given; empty: none.
  std::string directives_path;
  // Events file for the scripted hooks' acks and validation results; empty: none.
  std::string events_path;
  // Rendezvous wait and per-op timeout: a dead or hung peer fails an op after this long.
  absl::Duration comm_timeout = absl::Seconds(60);
  // Where this rank's Gloo pairs listen: its node's address (FALCON_HOST_ADDRESS).
  std::string host_address = "127.0.0.1";
  // Installed as the comm runtime's observer before the world communicator is created, so it sees
  // every communicator and op (e.g. the shim's hooks). Not owned; must outlive the run. Null: none.
  collective::OpObserver* observer = nullptr;
};

// Runs the rank. `hooks` null: ScriptedHooks over directives_path (NoopHooks when empty).
// kInvalidArgument for bad options (naming the flag), kNotFound for a missing text or script;
// communicator and checkpoint errors pass through.
absl::StatusOr<RunResult> RunWorker(const WorkerOptions& options, TrainerHooks* hooks = nullptr);

}  // namespace falcon::trainer

#endif  // FALCON_TRAINER_WORKER_H_
