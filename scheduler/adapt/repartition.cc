#include "scheduler/adapt/repartition.h"

namespace tessera {

CutSearch::CutSearch(int n, int num_layers, double period_ms, std::map<int, double>* history,
                     double alpha, std::optional<int> jump)
    : start_(n),
      num_layers_(num_layers),
      history_(history),
      alpha_(alpha),
      best_(n),
      best_ms_(period_ms) {
  auto [it, inserted] = history_->emplace(n, period_ms);
  if (!inserted) it->second = (1 - alpha_) * it->second + alpha_ * period_ms;
  if (jump && *jump != n && *jump >= 1 && *jump <= num_layers_ - 1) {
    jumping_ = true;
    candidate_ = *jump;
  } else {
    start_at(n);
  }
}

void CutSearch::start_at(int n) {
  start_ = n;
  up_ = true;
  if (n + 1 <= num_layers_ - 1) {
    candidate_ = n + 1;
  } else {
    go_down();
  }
}

void CutSearch::go_down() {
  up_ = false;
  if (start_ - 1 >= 1) {
    candidate_ = start_ - 1;
  } else {
    candidate_.reset();
  }
}

void CutSearch::report(double period_ms) {
  if (!candidate_) return;
  const int i = *candidate_;
  double m = period_ms;
  if (jumping_) {
    jumping_ = false;
    (*history_)[i] = period_ms;
    if (period_ms <= best_ms_) {
      best_ = i;
      best_ms_ = period_ms;
      start_at(i);
    } else {
      start_at(start_);
    }
    if (!candidate_) best_ms_ = (*history_)[best_];
    return;
  }
  if (up_) {
    auto [it, inserted] = history_->emplace(i, period_ms);
    if (!inserted) it->second = (1 - alpha_) * it->second + alpha_ * period_ms;
    m = it->second;
  } else {
    (*history_)[i] = period_ms;
  }
  const bool better = m <= best_ms_;
  if (better) {
    best_ = i;
    best_ms_ = m;
  }
  if (up_) {
    if (better && i + 1 <= num_layers_ - 1) {
      candidate_ = i + 1;
    } else if (best_ == start_) {
      go_down();  // nothing better upward: go down
    } else {
      candidate_.reset();
    }
  } else {
    if (better && i - 1 >= 1) {
      candidate_ = i - 1;
    } else {
      candidate_.reset();
    }
  }
  if (!candidate_) best_ms_ = (*history_)[best_];
}

}  // namespace tessera
