// Ids that must never repeat across controller restarts (events, validation tasks, directives),
// kept in the meta record. Each allocation stages the new meta record in the unit of work, so an
// id is durable before anything carrying it leaves the controller. Not thread-safe.
#ifndef FALCON_CONTROLLER_CORE_ID_ALLOCATOR_H_
#define FALCON_CONTROLLER_CORE_ID_ALLOCATOR_H_

#include <cstdint>
#include <string>

#include "controller/store/controller_store.h"
#include "controller/store/records.pb.h"

namespace falcon::controller::core {

class IdAllocator {
 public:
  // `meta` from ControllerStore::LoadMeta(); counters start at 1.
  explicit IdAllocator(falcon::controller::v1::MetaRecord meta);

  uint64_t NextEventId(store::StoreTxn* txn);
  uint64_t NextTaskId(store::StoreTxn* txn);
  uint64_t NextDirectiveId(store::StoreTxn* txn);

  const falcon::controller::v1::MetaRecord& meta() const { return meta_; }

 private:
  falcon::controller::v1::MetaRecord meta_;
};

}  // namespace falcon::controller::core

#endif  // FALCON_CONTROLLER_CORE_ID_ALLOCATOR_H_
