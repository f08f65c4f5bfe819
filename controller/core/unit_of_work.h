// One unit of work on the controller loop: the store writes it staged and the actions (messages
// to agents, listener calls, watcher updates) to run only once those writes are stored. This is
// how "write before acting" is kept: nothing leaves the controller before its state is stored
// (messages to agents also wait until it is durable: the controller holds them in its AgentHub
// until ControllerStore::Sync). Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_CORE_UNIT_OF_WORK_H_
#define FALCON_CONTROLLER_CORE_UNIT_OF_WORK_H_

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "controller/store/controller_store.h"

namespace falcon::controller::core {

class UnitOfWork {
 public:
  store::StoreTxn& txn() { return txn_; }
  // Runs `action` after a successful commit, in the order added.
  void AfterCommit(std::function<void()> action) { after_.push_back(std::move(action)); }
  size_t pending_actions() const { return after_.size(); }
  // Runs `stage` once, just before the commit, however often it is asked for under the same
  // `key`: for a record changed many times in one unit (thousands of rank series joining one
  // event) staged once, in its final state, rather than serialized at every change.
  void StageOnceBeforeCommit(const std::string& key, std::function<void()> stage) {
    if (staged_keys_.insert(key).second) before_.push_back(std::move(stage));
  }

  // Commits the staged writes; on success runs the actions (which may stage and commit nothing
  // more in this unit). On failure the actions are dropped and the error returned.
  absl::Status Commit(store::ControllerStore* store) {
    std::vector<std::function<void()>> before;
    before.swap(before_);
    staged_keys_.clear();
    for (auto& stage : before) stage();
    absl::Status s = store->Commit(&txn_);
    std::vector<std::function<void()>> actions;
    actions.swap(after_);
    if (!s.ok()) return s;
    for (auto& a : actions) a();
    return absl::OkStatus();
  }

 private:
  store::StoreTxn txn_;
  std::vector<std::function<void()>> after_;
  std::vector<std::function<void()>> before_;
  std::set<std::string> staged_keys_;
};

}  // namespace falcon::controller::core

#endif  // FALCON_CONTROLLER_CORE_UNIT_OF_WORK_H_
