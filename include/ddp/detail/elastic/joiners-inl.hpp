// Definitions of joiners.hpp.
#ifndef DDP_DETAIL_ELASTIC_JOINERS_INL_HPP
#define DDP_DETAIL_ELASTIC_JOINERS_INL_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/elastic/joiners.hpp>
#include <ddp/detail/elastic/meeting.hpp>
#include <ddp/error.hpp>

#include <algorithm>
#include <sstream>
#include <thread>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE bool joiners_possible() { return getenv_str("DDP_ELASTIC_JOINERS").value_or("") == "1"; }

DDP_INLINE std::optional<std::string> joiner_identity() {
  auto id = getenv_str("DDP_ELASTIC_JOINER");
  if (!id || id->empty()) return std::nullopt;
  return id;
}

DDP_INLINE std::string joiners_scope(const ddp::topology& job) { return elastic_scope(job, 0) + "join/"; }

DDP_INLINE tcp_store_options joiners_store_options(const ddp::topology& job,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& token) {
  tcp_store_options so; // as the survivors' meeting's clients, in a scope of its own
  so.host = job.master_addr.empty() ? "127.0.0.1" : job.master_addr;
  so.port = job.store_port;
  so.serve = false;
  so.timeout = timeout;
  so.token = token;
  so.scope = joiners_scope(job);
  so.served_by_launcher = true;
  return so;
}

DDP_INLINE void register_joiner(tcp_store& s, const joiner_entry& e, const std::string& prefix) {
  const auto n = s.add(prefix + "count", 1);
  s.set(prefix + "entry/" + std::to_string(n),
        e.id + " " + std::to_string(e.job_rank) + " " + std::to_string(e.node));
}

DDP_INLINE std::vector<joiner_entry> registered_joiners(tcp_store& s, const std::string& prefix) {
  std::vector<joiner_entry> all;
  const auto count = s.add(prefix + "count", 0);
  for (std::int64_t n = 1; n <= count; ++n) {
    auto v = s.try_get(prefix + "entry/" + std::to_string(n));
    if (!v) continue; // counted, not written yet: the next look finds it
    std::istringstream in(*v);
    joiner_entry e;
    if (in >> e.id >> e.job_rank >> e.node) all.push_back(e);
  }
  return all;
}

/// A decision as written: a generation, or joiner_withdrawn (anything else reads as withdrawn:
/// no generation may be made of it).
inline joiner_claim claim_of(const std::string& decision) {
  joiner_claim c;
  c.state = joiner_claim::what::withdrawn;
  const auto v = parse_int(decision);
  if (v && *v > 0 && *v < joiner_withdrawn) {
    c.state = joiner_claim::what::admitted;
    c.generation = static_cast<std::uint64_t>(*v);
  }
  return c;
}

DDP_INLINE joiner_claim read_claim(tcp_store& s, const std::string& id, const std::string& prefix) {
  if (auto v = s.try_get(prefix + "decision/" + id)) return claim_of(*v);
  return {}; // nobody decided it: waiting
}

DDP_INLINE joiner_claim settle_claim(tcp_store& s, const std::string& id, std::int64_t delta,
                                     const std::string& prefix) {
  // Set-if-absent in one request: the first decision stands, and every later decider reads it.
  const auto standing = s.compare_set(prefix + "decision/" + id, "", std::to_string(delta));
  return claim_of(standing.value_or(""));
}

DDP_INLINE void mark_joiner_lost(tcp_store& s, const std::string& id, const std::string& prefix) {
  s.set(prefix + "lost/" + id, "1");
}

DDP_INLINE bool joiner_lost(tcp_store& s, const std::string& id, const std::string& prefix) {
  return s.check({prefix + "lost/" + id});
}

inline std::optional<joiner_entry> read_entry(tcp_store& s, std::int64_t n, const std::string& prefix) {
  auto v = s.try_get(prefix + "entry/" + std::to_string(n));
  if (!v) return std::nullopt;
  std::istringstream in(*v);
  joiner_entry e;
  if (!(in >> e.id >> e.job_rank >> e.node)) return std::nullopt;
  return e;
}

DDP_INLINE void refresh_registry(tcp_store& s, joiner_registry& r, const std::string& prefix) {
  std::vector<std::int64_t> look = std::move(r.unwritten);
  r.unwritten.clear();
  const auto count = s.add(prefix + "count", 0);
  for (auto n = r.counted + 1; n <= count; ++n)
    look.push_back(n);
  r.counted = std::max(r.counted, count);
  for (auto n : look)
    if (auto e = read_entry(s, n, prefix)) {
      r.entries.push_back(*e);
      r.claims.emplace_back();
    } else {
      r.unwritten.push_back(n); // counted, not written yet: the next look finds it
    }
}

DDP_INLINE std::vector<joiner_entry>
admit_waiting_joiners(tcp_store& s, std::uint64_t next_generation, joiner_registry& seen,
                      const std::vector<std::int64_t>& member_job_ranks) {
  refresh_registry(s, seen);
  std::vector<joiner_entry> admitted;
  for (std::size_t k = 0; k < seen.entries.size(); ++k) {
    auto& c = seen.claims[k];
    if (c.state != joiner_claim::what::waiting) continue; // decided for good
    const auto& e = seen.entries[k];
    if (std::find(member_job_ranks.begin(), member_job_ranks.end(), e.job_rank) != member_job_ranks.end())
      continue; // its slot's rank still runs: admitted later, once the job has lost it, or never
    if ((c = read_claim(s, e.id)).state != joiner_claim::what::waiting) continue;
    c = settle_claim(s, e.id, static_cast<std::int64_t>(next_generation));
    if (c.state == joiner_claim::what::admitted && c.generation == next_generation) admitted.push_back(e);
  }
  return admitted;
}

DDP_INLINE std::vector<joiner_entry> admit_waiting_joiners(tcp_store& s, std::uint64_t next_generation) {
  joiner_registry fresh;
  return admit_waiting_joiners(s, next_generation, fresh);
}

DDP_INLINE std::vector<joiner_entry> joiners_decided_for(tcp_store& s, std::uint64_t generation,
                                                         joiner_registry& seen) {
  refresh_registry(s, seen);
  std::vector<joiner_entry> out;
  for (std::size_t k = 0; k < seen.entries.size(); ++k) {
    auto& c = seen.claims[k];
    if (c.state == joiner_claim::what::waiting) c = read_claim(s, seen.entries[k].id);
    if (c.state == joiner_claim::what::admitted && c.generation == generation) out.push_back(seen.entries[k]);
  }
  return out;
}

DDP_INLINE std::vector<joiner_entry> joiners_admitted_to(tcp_store& s, std::uint64_t generation,
                                                         joiner_registry& seen) {
  auto out = joiners_decided_for(s, generation, seen);
  std::erase_if(out, [&](const joiner_entry& e) { return joiner_lost(s, e.id); });
  return out;
}

DDP_INLINE std::vector<joiner_entry> joiners_admitted_to(tcp_store& s, std::uint64_t generation) {
  joiner_registry fresh;
  return joiners_admitted_to(s, generation, fresh);
}

DDP_INLINE void mark_job_ended(tcp_store& s) { s.set("ended", "1"); }
DDP_INLINE void end_job_for_joiners(tcp_store& s, int job_rank) {
  try {
    mark_job_ended(s);
  } catch (const std::exception& e) {
    log_line("rank " + std::to_string(job_rank),
             std::string("could not write the job's end for waiting joiners (") + e.what() +
                 "): the loop finished all the same; ddprun ends joiners left waiting at the job's end");
  }
}

DDP_INLINE bool job_ended(std::unique_ptr<tcp_store>& s, const std::string& prefix,
                          std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  const auto left = [&] {
    return std::max(job_end_look_floor, std::chrono::duration_cast<std::chrono::milliseconds>(
                                            until - std::chrono::steady_clock::now()));
  };
  std::string why;
  try {
    return s->check({prefix + "ended"}, left());
  } catch (const std::exception& e) { why = e.what(); }
  // A store error is no end: ask again on a fresh connection (a broken one stays broken).
  while (std::chrono::steady_clock::now() + job_end_look_floor < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      auto fresh = s->connect_again(left());
      const bool ended = fresh->check({prefix + "ended"}, left());
      if (!s->is_server()) s = std::move(fresh); // the caller's later requests go where this one went
      return ended;
    } catch (const std::exception& e) { why = e.what(); }
  }
  throw error(error_kind::backend,
              "the store at " + endpoint(s->host(), s->port()) + " did not say whether the job has ended (" +
                  prefix + "ended) within " + std::to_string(within.count()) + " ms of asking: " + why +
                  "; a store error is no end of the job: check that the launcher serving it (ddprun on node "
                  "0) is alive and reachable");
}

DDP_INLINE std::optional<std::uint64_t>
wait_for_admission(std::unique_ptr<tcp_store>& s, const joiner_entry& me, std::chrono::milliseconds wait) {
  register_joiner(*s, me);
  log_line("joiner " + me.id, "registered (job rank " + std::to_string(me.job_rank) +
                                  "); waiting for the running ranks to admit it at a commit (up to " +
                                  std::to_string(wait.count()) + " ms)");
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto c = read_claim(*s, me.id);
    if (c.state == joiner_claim::what::waiting) {
      const bool ended = job_ended(s, "", joiner_store_patience);
      if (ended || std::chrono::steady_clock::now() >= deadline) {
        c = settle_claim(*s, me.id, joiner_withdrawn);
        if (c.state == joiner_claim::what::withdrawn && ended) return std::nullopt;
        if (c.state == joiner_claim::what::withdrawn)
          throw error(error_kind::timeout,
                      "joiner " + me.id + " (job rank " + std::to_string(me.job_rank) +
                          "): not admitted within " + std::to_string(wait.count()) +
                          " ms (ddp::elastic::options::join_wait): the running ranks admit joiners at their "
                          "commits under ddprun --in-process-recovery --max-restarts; commit more often or "
                          "raise join_wait. It withdrew: no generation waits for it",
                      me.job_rank);
      }
    }
    if (c.state == joiner_claim::what::admitted) return c.generation;
    if (c.state == joiner_claim::what::withdrawn) {
      if (job_ended(s, "", joiner_store_patience)) return std::nullopt; // the job ended without it
      // Withdrawn while the job runs, by another than this joiner (its agent took it for dead).
      // An exit 0 would read as a rank that finished well; failing, its agent may start another.
      throw error(error_kind::peer_lost,
                  "joiner " + me.id + " (job rank " + std::to_string(me.job_rank) +
                      "): withdrawn while the job runs (its agent took it for dead): this joiner ends; "
                      "ddprun --in-process-recovery --max-restarts starts another in the slot while its "
                      "budget lasts",
                  me.job_rank);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // two store round trips a look
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_ELASTIC_JOINERS_INL_HPP
