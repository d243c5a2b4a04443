// Whom a failed Gloo collective or connect blames, and with which error: a
// rank the store recorded lost, else a rank that stalled (the desync report),
// else this rank's own failure inside Gloo.
#ifndef DDP_DETAIL_GLOO_BLAME_HPP
#define DDP_DETAIL_GLOO_BLAME_HPP

#include <ddp/detail/backend/collective_queue.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/fault/desync.hpp>
#include <ddp/detail/gloo/mesh.hpp>
#include <ddp/error.hpp>
#include <ddp/store.hpp>

#include <gloo/common/error.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_blame {
public:
  /// `job_ranks`: a subgroup's members as the job numbers them, which the
  /// store's keys use (rendezvous::job_ranks); empty for the job's own group.
  /// `group_key`: a subgroup's key prefix, under which its desync report and
  /// its members' goodbyes (store_left_prefix) live; empty for the job's group.
  gloo_blame(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<tcp_store> store,
             collective_queue& queue, std::vector<int> job_ranks = {}, std::string group_key = {})
      : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)), queue_(queue),
        job_ranks_(std::move(job_ranks)), group_key_(std::move(group_key)) {}

  /// Turns a collective's failure into the group's error; every path closes
  /// the connections first (`close_all(with_segment)`), so peers blocked on
  /// this rank fail now too. `reported()`: the peer failure the store
  /// reported to fail_for_peer, if that was the group's error.
  template <class CloseAll, class Reported>
  [[noreturn]] void collective(const std::string& what, std::exception_ptr failure, CloseAll&& close_all,
                               Reported&& reported) {
    // abort_for_failure or fail_for_peer interrupted this collective: their
    // reason is the error, not the closed connections they caused (nor a
    // search for whom to blame).
    if (auto why = queue_.poisoned()) {
      auto lost = reported();
      close_all(!lost); // a peer's failure: aborting the segment would name this rank
      if (lost)
        detail::throw_error(
            lost->silent ? error_kind::timeout : error_kind::peer_lost,
            {what, " failed: ", lost_news(*lost),
             " (this rank heard it from the rendezvous store while it waited, and closed its connections)"},
            lost->rank);
      std::rethrow_exception(why);
    }
    try {
      std::rethrow_exception(failure);
    } catch (const ::gloo::IoException& e) {
      close_all(true);
      io(what, e.what());
    } catch (const ::gloo::EnforceNotMet& e) {
      close_all(true);
      detail::throw_error(error_kind::backend, {what, " failed inside Gloo: ", e.what()}, job_rank(rank_));
    } catch (const ddp::error&) {
      close_all(true);
      throw;
    } catch (const std::exception& e) {
      close_all(true);
      detail::throw_error(error_kind::backend, {what, " failed: ", e.what()}, job_rank(rank_));
    }
  }

  /// A collective failed on the wire, after the connections closed. Whom to
  /// blame: first a rank the store
  /// recorded lost (it dropped, or announced its own failure); else, since
  /// nobody died, a rank that stalled: the desync report finds the rank that
  /// cannot say how far it got. The report is printed, and kept in the flight
  /// recorder's JSON (DDP_FLIGHT_RECORDER).
  [[noreturn]] void io(const std::string& what, const std::string& gloo_text) {
    const bool timed_out = gloo_text.find("imed out") != std::string::npos;
    // First, without the lost-rank search's wait: a member that left this
    // subgroup on its own error said so before it closed its connections.
    if (auto left = left_peer())
      detail::throw_error(error_kind::peer_lost, {what, " failed: ", left->second, ". Gloo: ", gloo_text},
                          left->first);
    if (auto lost = find_lost_rank(timed_out)) {
      queue_.recorder().note(detail::message({"rank ", lost.rank, " ", lost.reason}));
      detail::throw_error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                          {what, " failed: rank ", lost.rank, " ", lost.reason, ". Gloo: ", gloo_text},
                          lost.rank);
    }
    if (auto peer = finished_peer())
      detail::throw_error(
          error_kind::peer_lost,
          {what, " failed: ", finished_peer_note(*peer, job_rank(rank_)), ". Gloo: ", gloo_text}, *peer);
    desync_result d;
    if (store_) {
      d = exchange_progress(*store_, rank_, size_, queue_.recorder().progress(), job_ranks_, group_key_);
      log_line(detail::message({"rank ", job_rank(rank_)}),
               detail::message({"desync report: ", d.verdict, d.table}));
      queue_.recorder().note(d.verdict + d.table);
    }
    std::string blame = d.verdict.empty() ? std::string() : detail::message({" ", d.verdict, "."});
    if (timed_out)
      detail::throw_error(
          error_kind::timeout,
          {what, " timed out after ", timeout_.count(), " ms waiting for a peer.", blame,
           " (A rank stalled, is far behind, or skipped this collective; raise DDP_TIMEOUT if "
           "that is expected.) Gloo: ",
           gloo_text},
          d.culprit);
    detail::throw_error(error_kind::peer_lost,
                        {what, " failed: a peer closed its connection (it failed or timed out).", blame,
                         " Gloo: ", gloo_text},
                        d.culprit);
  }

  /// A mesh that did not form. A peer that died meanwhile refused or dropped
  /// a connection, or the connect stopped for it (detail/fault/connect_interrupt.hpp):
  /// named when the store saw it go.
  /// Otherwise a wait for a peer's connection that ran its whole timeout
  /// (gloo_mesh_timeout) is a timeout: that peer is to blame, and
  /// process_group does not report it as this rank's failure. `note` goes
  /// before Gloo's text.
  [[noreturn]] void mesh(const std::string& what, const std::string& note, const std::exception& gloo) {
    const std::string gloo_said = note + gloo.what();
    if (auto lost = find_lost_rank(false))
      detail::throw_error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                          {what, ": rank ", lost.rank, " ", lost.reason, ". Gloo: ", gloo_said}, lost.rank);
    const bool timed_out = dynamic_cast<const gloo_mesh_timeout*>(&gloo) != nullptr;
    detail::throw_error(timed_out ? error_kind::timeout : error_kind::backend, {what, ": ", gloo_said},
                        job_rank(rank_));
  }

private:
  /// Asks the store which rank dropped without a goodbye or announced its own
  /// failure. After a closed connection the store notices a crash at about the
  /// moment we do, so it gets a second to record it; after a timeout whoever
  /// died did so long ago, so a look suffices.
  lost_rank find_lost_rank(bool timed_out) {
    if (!store_) return {};
    return store_->wait_for_lost_rank(std::chrono::milliseconds(timed_out ? 0 : 1000));
  }

  int job_rank(int r) const { return job_ranks_.empty() ? r : job_ranks_[static_cast<std::size_t>(r)]; }

  /// A subgroup's member that left it on an error of its own (store_left_prefix):
  /// its job rank and its reason.
  std::optional<std::pair<int, std::string>> left_peer() {
    if (!store_ || group_key_.empty()) return std::nullopt;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      try {
        const auto key = std::string(store_left_prefix) + group_key_ + std::to_string(job_rank(p));
        if (auto why = store_->try_get(key, tcp_store::fault_slack)) return std::pair{job_rank(p), *why};
      } catch (const ddp::error&) {
        return std::nullopt; // the store gone: the other searches say what they can
      }
    }
    return std::nullopt;
  }

  /// A peer whose process group ended normally (store_finished_prefix), if
  /// any, by its job rank (as the store's record of lost ranks names them).
  std::optional<int> finished_peer() {
    if (!store_) return std::nullopt;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      try {
        if (store_->check({std::string(store_finished_prefix) + std::to_string(job_rank(p))}))
          return job_rank(p);
      } catch (const ddp::error&) {
        return std::nullopt; // the store gone says nothing about who finished
      }
    }
    return std::nullopt;
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  collective_queue& queue_; ///< the group's: whether it is poisoned, and its flight recorder
  std::vector<int> job_ranks_;
  std::string group_key_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_BLAME_HPP
