// Dynamic two-stage re-partitioning: seed 001 Algorithm 2, as fixed in wave2-spec Sect. 1.4.
//
// The search moves the cut n of a two-stage pipeline (stage 0 runs layers [0, n), stage 1 runs
// [n, N)) by measuring candidate cuts on the running pipeline, one window of frames each:
//
//   n^ <- n, t^ <- t (the period measured at n)
//   up:   for i = n+1, n+2, ...:   m[i] <- filtered measurement at i
//                                  if m[i] <= t^: n^ <- i, t^ <- m[i]   else stop
//   down: only when the upward climb found nothing (n^ = n):
//         for i = n-1, n-2, ...:   m[i] <- measurement at i (unfiltered, as printed)
//                                  if m[i] <= t^: n^ <- i, t^ <- m[i]   else stop
//   result: n^, t^ = m[n^]
//
// The printed algorithm's faults and how they are fixed here:
//   - n^ was never initialised: it starts at n;
//   - t^ was not updated inside the loops, so every step was compared with the starting period:
//     it is updated whenever a cut wins;
//   - the filter m <- m + alpha x is no average: m <- (1 - alpha) m + alpha x, alpha given
//     (AdaptOptions::alpha, default 0.5), for cuts measured before (a cut measured for the first
//     time takes its measurement);
//   - "measure" is a window of frames on the running pipeline (the caller's job: CutSearch only
//     asks for cuts and takes their periods).
// Cuts stay in 1..N-1 (both stages keep a layer).
//
// An extension, off unless a `jump` cut is given: the search first measures the jump cut (the
// caller's estimate of the balanced cut, e.g. from the stages' measured time per FLOP). If it
// beats t, Algorithm 2 runs from there (up, then down if up finds nothing); if not, Algorithm 2
// runs from n as above. A load that moves the balance by many layers then costs one window to
// reach instead of one per layer, and a plateau of equal periods (a core shared with another
// process in scheduler time slices makes the period flat over a range of cuts) does not stop
// the climb short.
//
// Thread rule: a CutSearch is used by one thread at a time.
#pragma once

#include <map>
#include <optional>

namespace tessera {

class CutSearch {
 public:
  // `n`: the current cut, measured at `period_ms`; `history`: the table m of past filtered
  // measurements by cut (kept across searches by the caller; may be empty, not null).
  CutSearch(int n, int num_layers, double period_ms, std::map<int, double>* history, double alpha,
            std::optional<int> jump = std::nullopt);

  // The cut to measure next, or nullopt when the search is over.
  std::optional<int> candidate() const { return candidate_; }
  // The period measured over a window at candidate().
  void report(double period_ms);

  bool done() const { return !candidate_.has_value(); }
  int best_cut() const { return best_; }
  double best_period_ms() const { return best_ms_; }

 private:
  void go_down();
  void start_at(int n);  // Algorithm 2 from n: its first candidate

  int start_;
  int num_layers_;
  std::map<int, double>* history_;
  double alpha_;
  bool up_ = true;
  bool jumping_ = false;  // the candidate is the jump cut
  std::optional<int> candidate_;
  int best_;
  double best_ms_;
};

}  // namespace tessera
