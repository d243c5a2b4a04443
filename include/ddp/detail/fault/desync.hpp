// The desync report: after a collective timed out, or a peer closed its
// connections without any rank being recorded lost, each survivor publishes
// how far it got (its flight recorder's progress) to the store and reads the
// others'. A rank that publishes nothing within the window is stopped or hung
// (a dead rank would have been recorded lost): that is the rank to name. When
// every rank reports, the one furthest behind is named.
#ifndef DDP_DETAIL_FAULT_DESYNC_HPP
#define DDP_DETAIL_FAULT_DESYNC_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/fault/flight_recorder.hpp>
#include <ddp/detail/store/protocol.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct desync_result {
  int culprit = -1;    ///< the stalled or lagging rank; -1: cannot tell
  std::string verdict; ///< "rank 2 sent no progress report: it is stopped or hung"
  std::string table;   ///< one line per rank: "rank 1: all_reduce #57 (failed)"
};

/// `group_key`: a subgroup's key prefix (empty for the job's own group), so
/// that each group's reports stay its own: the store outlives a failed
/// subgroup, and a later report that read its keys named the wrong rank.
inline std::string progress_key(const std::string& group_key, int rank) {
  return std::string(store_progress_prefix) + group_key + std::to_string(rank);
}

/// `Store` is tcp_store (a template so that this internal header stays below
/// the public API). Survivors reach this at different moments: the ranks next
/// to a stalled one when their wait times out, the others when those close
/// their connections and a 1 s search for a lost rank finds none. So the first
/// window is 3 s (the spread is that 1 s plus scheduling delay); only when two or
/// more ranks are still silent does it wait one more window, to tell a slow
/// survivor from a second stalled rank. Ranks still silent then are marked
/// stalled in the store (store_stalled_prefix); a survivor that came late stops
/// waiting once every rank it has not heard from is so marked, or it would
/// outlast the others by its delay (rank 0 then held the job's last process).
/// Every store call is bounded. `store_ranks`: rank r of the group is the
/// job's rank store_ranks[r] (a subgroup's), which its keys and the report
/// name, as the store's record of lost ranks does; empty: r itself. A
/// subgroup's keys, its stalled marks included, live under `group_key`: only
/// the job's own group marks a rank stalled for the whole job (the store then
/// stops lingering for it at teardown, which a live rank still needs).
template <class Store>
desync_result exchange_progress(Store& store, int rank, int size, const flight_progress& mine,
                                const std::vector<int>& store_ranks = {}, const std::string& group_key = {}) {
  auto job = [&](int r) { return store_ranks.empty() ? r : store_ranks[static_cast<std::size_t>(r)]; };
  using namespace std::chrono_literals;
  constexpr auto window = 3000ms;
  constexpr auto slice = 250ms; // how often a late survivor looks for the others' marks
  desync_result out;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r)
    keys.push_back(progress_key(group_key, job(r)));
  std::vector<std::optional<flight_progress>> seen(static_cast<std::size_t>(size));
  std::vector<int> silent;
  auto stalled_key = [&](int r) {
    return std::string(store_stalled_prefix) + group_key + std::to_string(job(r));
  };
  // Reads the reports not seen yet; the ranks still silent go to `silent`.
  auto sweep = [&] {
    silent.clear();
    for (int r = 0; r < size; ++r) {
      auto& s = seen[static_cast<std::size_t>(r)];
      if (!s)
        if (auto v = store.try_get(keys[static_cast<std::size_t>(r)], Store::fault_slack))
          s = flight_progress::decode(*v);
      if (!s) silent.push_back(r);
    }
  };
  // Until every rank reported, the window ends, or another survivor marked each silent one stalled.
  auto await_reports = [&] {
    const auto end = std::chrono::steady_clock::now() + window;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left <= 0ms ||
          store.try_wait(keys, std::min<std::chrono::milliseconds>(left, slice), Store::fault_slack))
        return;
      sweep();
      std::vector<std::string> marks;
      for (int r : silent)
        marks.push_back(stalled_key(r));
      if (marks.empty() || store.try_wait(marks, 0ms, Store::fault_slack)) return;
    }
  };
  try {
    store.set(progress_key(group_key, job(rank)), mine.encode(), Store::fault_slack);
    for (int round = 0; round < 2; ++round) {
      await_reports();
      sweep();
      if (silent.size() <= 1) break;
    }
  } catch (const std::exception& e) {
    out.verdict = detail::message({"no desync report: the store did not answer (", e.what(), ")"});
    return out;
  }
  try { // so that rank 0's store, on teardown, does not linger for a process that never reads
    for (int r : silent)
      store.set(stalled_key(r), detail::message({"named silent by rank ", job(rank), "'s desync report"}),
                Store::fault_slack);
  } catch (const std::exception&) {} // the report stands without the mark
  for (int r = 0; r < size; ++r) {
    auto& s = seen[static_cast<std::size_t>(r)];
    out.table +=
        detail::message({"\n  rank ", job(r), ": ",
                         (s ? s->describe() : std::string("no report (stopped, hung, or outside ddp)"))});
  }
  if (silent.size() == 1) {
    out.culprit = job(silent.front());
    out.verdict = detail::message(
        {"rank ", out.culprit,
         " sent no progress report: it is stopped or hung (its connections are still open, so it "
         "did not exit)"});
  } else if (silent.empty()) {
    // Everyone is alive: the rank furthest behind skipped or never reached a collective.
    auto lowest = std::min_element(seen.begin(), seen.end(),
                                   [](const auto& a, const auto& b) { return a->seq < b->seq; });
    auto behind =
        std::count_if(seen.begin(), seen.end(), [&](const auto& s) { return s->seq == (*lowest)->seq; });
    if (behind == 1) {
      out.culprit = job(static_cast<int>(lowest - seen.begin()));
      out.verdict =
          detail::message({"rank ", out.culprit, " is behind the others (at ", (*lowest)->describe(),
                           "): it skipped a collective or took another path"});
    } else {
      out.verdict = "every rank reported and none is behind: the collectives themselves differ";
    }
  } else {
    std::string list;
    for (int r : silent)
      list += (list.empty() ? "" : ", ") + std::to_string(job(r));
    out.verdict = detail::message({"ranks ", list, " sent no progress report: they are stopped or hung"});
  }
  return out;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FAULT_DESYNC_HPP
