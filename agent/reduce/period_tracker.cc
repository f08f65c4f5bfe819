#include "agent/reduce/period_tracker.h"

#include <algorithm>

namespace falcon::agent::reduce {

PeriodTracker::PeriodTracker(Options options, PeriodFinder finder)
    : options_(options), finder_(std::move(finder)) {}

std::vector<int32_t> PeriodTracker::ChooseAnchor(const std::vector<int32_t>& pattern) const {
  const size_t p = pattern.size();
  const size_t longest = std::min(options_.max_anchor, p);
  for (size_t m = 1; m <= longest; ++m) {
    for (size_t j = 0; j < p; ++j) {
      int occurrences = 0;
      for (size_t s = 0; s < p && occurrences < 2; ++s) {
        bool same = true;
        for (size_t i = 0; i < m && same; ++i) same = pattern[(s + i) % p] == pattern[(j + i) % p];
        if (same) occurrences++;
      }
      if (occurrences == 1) {
        std::vector<int32_t> anchor(m);
        for (size_t i = 0; i < m; ++i) anchor[i] = pattern[(j + i) % p];
        return anchor;
      }
    }
  }
  return {};
}

void PeriodTracker::Detect() {
  since_detect_ = 0;
  searched_once_ = true;
  std::vector<int32_t> tokens(window_.begin(), window_.end());
  std::optional<PeriodFit> fit = finder_(tokens);
  if (!fit.has_value() || fit->period < 1 || fit->offset < 0 ||
      static_cast<size_t>(fit->offset) + static_cast<size_t>(fit->period) > tokens.size()) {
    return;  // Keep the current lock, if any, until the anchor is lost.
  }
  if (locked() && fit->period == period_) return;
  std::vector<int32_t> pattern(tokens.begin() + fit->offset,
                               tokens.begin() + fit->offset + fit->period);
  std::vector<int32_t> anchor = ChooseAnchor(pattern);
  if (anchor.empty()) return;
  if (locked()) relocks_++;
  period_ = fit->period;
  anchor_ = std::move(anchor);
  since_anchor_ = 0;
}

std::optional<int64_t> PeriodTracker::Add(int32_t token, int64_t start_ns) {
  window_.push_back(token);
  if (window_.size() > options_.window) window_.pop_front();
  recent_.emplace_back(token, start_ns);
  if (recent_.size() > options_.max_anchor) recent_.pop_front();
  since_detect_++;

  const bool due = searched_once_ ? since_detect_ >= options_.redetect_every
                                  : window_.size() >= options_.min_window;
  if (due) Detect();
  if (!locked()) return std::nullopt;

  const size_t m = anchor_.size();
  if (recent_.size() >= m) {
    bool match = true;
    const size_t base = recent_.size() - m;
    for (size_t i = 0; i < m && match; ++i) match = recent_[base + i].first == anchor_[i];
    if (match) {
      since_anchor_ = 0;
      return recent_[base].second;
    }
  }
  if (++since_anchor_ > static_cast<size_t>(options_.lost_periods) * period_) {
    anchor_.clear();
    period_ = 0;
    since_detect_ = options_.redetect_every;  // Search again at the next op.
  }
  return std::nullopt;
}

}  // namespace falcon::agent::reduce
