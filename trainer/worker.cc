#include "trainer/worker.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collective/comm_runtime.h"
#include "collective/fault/rank_faults.h"
#include "collective/gloo/gloo_communicator.h"
#include "common/clock.h"
#include "trainer/directives/scripted_hooks.h"
#include "trainer/model/corpus.h"

namespace falcon::trainer {

absl::StatusOr<RunResult> RunWorker(const WorkerOptions& options, TrainerHooks* hooks) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " is outside the world of ", options.world_size));
  }
  absl::StatusOr<model::Corpus> corpus = model::Corpus::Load(options.data_path);
  if (!corpus.ok()) return corpus.status();
  absl::StatusOr<std::unique_ptr<collective::fault::RankFaults>> faults =
      collective::fault::RankFaults::Create(options.faults, options.rank,
                                            options.burn_compute_faults);
  if (!faults.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--faults: ", faults.status().message()));
  }
  std::unique_ptr<TrainerHooks> owned_hooks;
  if (hooks == nullptr) {
    if (options.directives_path.empty()) {
      owned_hooks = std::make_unique<NoopHooks>();
    } else {
      absl::StatusOr<directives::DirectiveScript> script =
          directives::LoadDirectiveScript(options.directives_path);
      if (!script.ok()) return script.status();
      owned_hooks = std::make_unique<directives::ScriptedHooks>(*std::move(script), options.rank,
                                                                options.events_path);
    }
    hooks = owned_hooks.get();
  }
  common::RealClock clock;
  collective::CommRuntimeOptions runtime_options;
  runtime_options.rank = options.rank;
  runtime_options.clock = &clock;
  runtime_options.link_faults = (*faults)->plan().links;
  auto runtime = std::make_shared<collective::CommRuntime>(std::move(runtime_options));
  if (options.observer != nullptr) runtime->SetObserver(options.observer);
  collective::gloo::GlooWorldOptions world_options;
  world_options.rank = options.rank;
  world_options.world_size = options.world_size;
  world_options.rendezvous_dir = options.rendezvous_dir;
  world_options.timeout = options.comm_timeout;
  world_options.hostname = options.host_address;
  absl::StatusOr<std::unique_ptr<collective::Communicator>> world =
      collective::gloo::CreateGlooWorld(world_options, runtime);
  if (!world.ok()) return world.status();

  TrainerOptions trainer_options = options.trainer;
  trainer_options.model.vocab_size = corpus->vocab_size();
  absl::StatusOr<std::unique_ptr<RankTrainer>> trainer =
      RankTrainer::Create(std::move(trainer_options), &*corpus, runtime, *std::move(world), hooks,
                          faults->get(), &clock);
  if (!trainer.ok()) return trainer.status();
  absl::StatusOr<RunResult> result = (*trainer)->Run();
  (*faults)->contention().StopAll();
  runtime->SetObserver(nullptr);
  return result;
}

}  // namespace falcon::trainer
