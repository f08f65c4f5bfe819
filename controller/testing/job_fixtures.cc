#include "controller/testing/job_fixtures.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace falcon::controller::testing {

std::vector<falcon::v1::Communicator> LayoutComms(const LayoutSpec& spec) {
  std::vector<falcon::v1::Communicator> comms;
  const uint32_t world = spec.dp * spec.pp;
  auto kind = [&](falcon::v1::CommKind k) {
    return spec.hint_kinds ? k : falcon::v1::COMM_KIND_UNKNOWN;
  };
  falcon::v1::Communicator w;
  w.set_comm_id(1);
  w.set_kind(kind(falcon::v1::COMM_KIND_WORLD));
  w.set_name("world");
  for (uint32_t r = 0; r < world; ++r) w.add_member_ranks(r);
  comms.push_back(w);
  if (spec.dp > 1) {
    for (uint32_t stage = 0; stage < spec.pp; ++stage) {
      falcon::v1::Communicator c;
      c.set_comm_id(1000 + stage);
      c.set_kind(kind(falcon::v1::COMM_KIND_DP));
      c.set_name(absl::StrCat("dp.pp", stage));
      for (uint32_t d = 0; d < spec.dp; ++d) c.add_member_ranks(stage * spec.dp + d);
      comms.push_back(c);
    }
  }
  if (spec.pp > 1) {
    for (uint32_t replica = 0; replica < spec.dp; ++replica) {
      falcon::v1::Communicator c;
      c.set_comm_id(2000 + replica);
      c.set_kind(kind(falcon::v1::COMM_KIND_PP));
      c.set_name(absl::StrCat("pp.dp", replica));
      for (uint32_t s = 0; s < spec.pp; ++s) c.add_member_ranks(s * spec.dp + replica);
      comms.push_back(c);
    }
  }
  return comms;
}

uint32_t NodeCount(const LayoutSpec& spec) {
  const uint32_t world = spec.dp * spec.pp;
  return (world + spec.ranks_per_node - 1) / spec.ranks_per_node;
}

std::string NodeName(uint32_t node) { return absl::StrCat("node-", node); }

std::vector<uint32_t> RanksOfNode(const LayoutSpec& spec, uint32_t node) {
  std::vector<uint32_t> ranks;
  const uint32_t world = spec.dp * spec.pp;
  for (uint32_t r = node * spec.ranks_per_node;
       r < std::min(world, (node + 1) * spec.ranks_per_node); ++r) {
    ranks.push_back(r);
  }
  return ranks;
}

falcon::v1::JobRegistration NodeRegistration(const LayoutSpec& spec, uint32_t node) {
  falcon::v1::JobRegistration reg;
  reg.set_job(spec.job);
  reg.set_world_size(spec.dp * spec.pp);
  reg.set_epoch(spec.epoch);
  if (spec.hint_layout) {
    reg.set_dp_size(spec.dp);
    reg.set_pp_size(spec.pp);
    reg.set_tp_size(1);
  }
  std::vector<uint32_t> mine = RanksOfNode(spec, node);
  for (uint32_t r : mine) {
    falcon::v1::RankInfo* info = reg.add_ranks();
    info->set_rank(r);
    info->set_node(NodeName(node));
    info->set_local_rank(r - node * spec.ranks_per_node);
    info->set_gpu(static_cast<int32_t>(r - node * spec.ranks_per_node));
    info->set_pid(static_cast<int32_t>(1000 + r));
    info->set_dp_index(spec.hint_layout ? static_cast<int32_t>(r % spec.dp) : -1);
    info->set_pp_index(spec.hint_layout ? static_cast<int32_t>(r / spec.dp) : -1);
    info->set_tp_index(spec.hint_layout ? 0 : -1);
  }
  for (const falcon::v1::Communicator& c : LayoutComms(spec)) {
    bool member = false;
    for (uint32_t m : c.member_ranks()) {
      member = member || std::find(mine.begin(), mine.end(), m) != mine.end();
    }
    if (member) *reg.add_communicators() = c;
  }
  return reg;
}

falcon::v1::IterationSummary MakeSummary(const LayoutSpec& spec, uint32_t rank, int64_t iteration,
                                         int64_t iteration_time_ns) {
  falcon::v1::IterationSummary s;
  s.set_rank(rank);
  s.set_iteration(iteration);
  s.set_start_ns(iteration * iteration_time_ns);
  s.set_iteration_time_ns(iteration_time_ns);
  int64_t comm_time = 0;
  for (const falcon::v1::Communicator& c : LayoutComms(spec)) {
    if (c.comm_id() == 1) continue;  // The world comm carries no per-iteration traffic here.
    if (std::find(c.member_ranks().begin(), c.member_ranks().end(), rank) ==
        c.member_ranks().end()) {
      continue;
    }
    falcon::v1::CommIterationSummary* cs = s.add_comms();
    cs->set_comm_id(c.comm_id());
    cs->set_op_count(2);
    cs->set_bytes(c.kind() == falcon::v1::COMM_KIND_PP ? 1 << 20 : 64 << 20);
    cs->set_wait_ns(iteration_time_ns / 10);
    cs->set_transfer_ns(iteration_time_ns / 10);
    cs->set_busy_ns(cs->wait_ns() + cs->transfer_ns());
    comm_time += cs->busy_ns();
  }
  s.set_compute_ns(std::max<int64_t>(0, iteration_time_ns - comm_time));
  s.set_from_hint(true);
  return s;
}

std::vector<falcon::v1::AgentMessage> AppliedAcks(const falcon::v1::Directive& d,
                                                  const std::vector<uint32_t>& ranks,
                                                  int64_t applied_iteration) {
  std::vector<falcon::v1::AgentMessage> out;
  for (uint32_t r : ranks) {
    if (d.target_ranks_size() > 0 &&
        std::find(d.target_ranks().begin(), d.target_ranks().end(), r) == d.target_ranks().end()) {
      continue;
    }
    falcon::v1::AgentMessage m;
    falcon::v1::DirectiveAck* a = m.mutable_directive_ack();
    a->set_directive_id(d.directive_id());
    a->set_job(d.job());
    a->set_rank(r);
    a->set_epoch(d.epoch());
    a->set_status(falcon::v1::ACK_STATUS_APPLIED);
    a->set_applied_iteration(applied_iteration);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<falcon::v1::AgentMessage> ValidationAnswers(
    const falcon::v1::ValidationTask& t, const std::vector<uint32_t>& ranks,
    const std::function<int64_t(uint32_t rank)>& gemm_ns,
    const std::function<int64_t(uint32_t src, uint32_t dst)>& link_ns) {
  std::vector<falcon::v1::AgentMessage> out;
  for (uint32_t r : ranks) {
    if (std::find(t.ranks().begin(), t.ranks().end(), r) == t.ranks().end()) continue;
    falcon::v1::AgentMessage m;
    falcon::v1::ValidationResult* v = m.mutable_validation_result();
    v->set_task_id(t.task_id());
    v->set_job(t.job());
    v->set_rank(r);
    if (t.has_gemm()) {
      const int64_t ns = gemm_ns(r);
      v->set_gemm_duration_ns(ns);
      const double flop = 2.0 * t.gemm().m() * t.gemm().n() * t.gemm().k();
      v->set_gemm_flops(flop / (static_cast<double>(ns) * 1e-9));
    } else {
      for (const falcon::v1::Link& l : t.link_pass().links()) {
        if (l.src_rank() != r) continue;
        falcon::v1::LinkTiming* lt = v->add_links();
        *lt->mutable_link() = l;
        lt->set_duration_ns(link_ns(l.src_rank(), l.dst_rank()));
        lt->set_bytes(t.link_pass().bytes());
      }
      if (v->links_size() == 0) continue;  // Receivers have nothing to report.
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace falcon::controller::testing
