#include "deploy/demo/fault_schedule.h"

#include <fstream>
#include <utility>

#include "common/json_parse.h"

namespace falcon::deploy::demo {

FaultSchedule::FaultSchedule(std::vector<InjectedFault> faults) {
  for (InjectedFault& f : faults) faults_.push_back({std::move(f), false, false});
}

std::vector<FaultSchedule::Step> FaultSchedule::Advance(int64_t finished_iteration) {
  std::vector<Step> out;
  const int64_t next = finished_iteration + 1;  // The iteration the job is about to run.
  for (int i = 0; i < static_cast<int>(faults_.size()); ++i) {
    State& s = faults_[i];
    if (!s.applied && !s.removed && next >= s.fault.from_iteration) {
      if (hold_) {
        // Held until detection is armed (and kArmedMargin after): the window moves on.
        const int64_t earliest = armed_ < 0 ? -1 : armed_ + kArmedMargin;
        if (earliest < 0 || next < earliest) continue;
        const int64_t delay = next - s.fault.from_iteration;
        s.fault.from_iteration += delay;
        s.fault.to_iteration += delay;
      }
      if (next >= s.fault.to_iteration) {
        s.removed = true;  // Missed entirely (the tail jumped past it): never applied.
        continue;
      }
      s.applied = true;
      out.push_back({i, true});
    }
  }
  for (int i = 0; i < static_cast<int>(faults_.size()); ++i) {
    State& s = faults_[i];
    if (s.applied && !s.removed && next >= s.fault.to_iteration) {
      s.removed = true;
      out.push_back({i, false});
    }
  }
  return out;
}

std::vector<int> FaultSchedule::Active() const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(faults_.size()); ++i) {
    if (faults_[i].applied && !faults_[i].removed) out.push_back(i);
  }
  return out;
}

int64_t IterationTail::Latest() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return latest_;
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (size < offset_) {  // Truncated (a new run): start over.
    offset_ = 0;
    partial_.clear();
  }
  if (size == offset_) return latest_;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk(size - offset_, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  offset_ += chunk.size();
  partial_ += chunk;
  size_t start = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
    const std::string line = partial_.substr(start, nl - start);
    start = nl + 1;
    if (line.empty()) continue;
    auto doc = common::ParseJson(line, "trainer JSON log line");
    if (!doc.ok() || !doc->is_object() || !doc->contains("iteration") ||
        !(*doc)["iteration"].is_number_integer()) {
      ++malformed_;
      continue;
    }
    latest_ = std::max(latest_, (*doc)["iteration"].get<int64_t>());
  }
  partial_.erase(0, start);
  return latest_;
}

}  // namespace falcon::deploy::demo
