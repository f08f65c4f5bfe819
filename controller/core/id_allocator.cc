#include "controller/core/id_allocator.h"

#include <utility>

namespace falcon::controller::core {

IdAllocator::IdAllocator(falcon::controller::v1::MetaRecord meta) : meta_(std::move(meta)) {
  if (meta_.next_event_id() == 0) meta_.set_next_event_id(1);
  if (meta_.next_task_id() == 0) meta_.set_next_task_id(1);
  if (meta_.next_directive_id() == 0) meta_.set_next_directive_id(1);
}

uint64_t IdAllocator::NextEventId(store::StoreTxn* txn) {
  uint64_t id = meta_.next_event_id();
  meta_.set_next_event_id(id + 1);
  txn->PutMeta(meta_);
  return id;
}

uint64_t IdAllocator::NextTaskId(store::StoreTxn* txn) {
  uint64_t id = meta_.next_task_id();
  meta_.set_next_task_id(id + 1);
  txn->PutMeta(meta_);
  return id;
}

uint64_t IdAllocator::NextDirectiveId(store::StoreTxn* txn) {
  uint64_t id = meta_.next_directive_id();
  meta_.set_next_directive_id(id + 1);
  txn->PutMeta(meta_);
  return id;
}

}  // namespace falcon::controller::core
