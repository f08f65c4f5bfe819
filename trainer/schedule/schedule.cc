#include "trainer/schedule/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::trainer::schedule {

std::vector<PipeOp> OneFOneBSchedule(int pp, int stage, int m) {
  const bool first = stage == 0;
  const bool last = stage == pp - 1;
  std::vector<PipeOp> ops;
  auto add = [&ops](PipeOpKind kind, int micro) { ops.push_back(PipeOp{kind, micro}); };
  auto forward = [&](int j, bool recv) {
    if (recv && !first) add(PipeOpKind::kRecvForward, j);
    add(PipeOpKind::kForward, j);
    if (!last) add(PipeOpKind::kSendForward, j);
  };
  const int warmup = std::min(pp - stage - 1, m);
  for (int i = 0; i < warmup; ++i) forward(i, /*recv=*/true);
  for (int k = 0; k < m - warmup; ++k) {
    const int j = warmup + k;
    forward(j, /*recv=*/k == 0);
    if (!last) add(PipeOpKind::kRecvBackward, k);
    add(PipeOpKind::kBackward, k);
    if (j + 1 < m && !first) add(PipeOpKind::kRecvForward, j + 1);
    if (!first) add(PipeOpKind::kSendBackward, k);
  }
  for (int k = m - warmup; k < m; ++k) {
    if (!last) add(PipeOpKind::kRecvBackward, k);
    add(PipeOpKind::kBackward, k);
    if (!first) add(PipeOpKind::kSendBackward, k);
  }
  return ops;
}

std::string ScheduleToString(const std::vector<PipeOp>& ops) {
  return absl::StrJoin(ops, " ", [](std::string* out, const PipeOp& op) {
    const char* name = "?";
    switch (op.kind) {
      case PipeOpKind::kRecvForward:
        name = "rf";
        break;
      case PipeOpKind::kForward:
        name = "F";
        break;
      case PipeOpKind::kSendForward:
        name = "sf";
        break;
      case PipeOpKind::kRecvBackward:
        name = "rb";
        break;
      case PipeOpKind::kBackward:
        name = "B";
        break;
      case PipeOpKind::kSendBackward:
        name = "sb";
        break;
    }
    absl::StrAppend(out, name, op.micro);
  });
}

}  // namespace falcon::trainer::schedule
