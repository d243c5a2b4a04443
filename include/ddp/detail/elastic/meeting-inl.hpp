// Definitions of meeting.hpp.
#ifndef DDP_DETAIL_ELASTIC_MEETING_INL_HPP
#define DDP_DETAIL_ELASTIC_MEETING_INL_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/elastic/joiners.hpp>
#include <ddp/detail/elastic/meeting.hpp>
#include <ddp/error.hpp>

#include <algorithm>
#include <memory>
#include <sstream>
#include <thread>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE bool in_process_recovery_enabled() {
  return getenv_str("DDP_IN_PROCESS_RECOVERY").value_or("") == "1" &&
         getenv_str("DDP_STORE_IN_LAUNCHER").value_or("") == "1";
}

DDP_INLINE std::string elastic_scope(const ddp::topology& job, std::uint64_t generation) {
  std::string scope;
  if (job.restart_round) {
    scope.assign(1, 'r');
    scope += std::to_string(*job.restart_round);
    scope += '/';
  }
  if (generation > 0) {
    scope += 'e';
    scope += std::to_string(generation);
    scope += '/';
  }
  return scope;
}

/// Where a generation's members mark member `rank` that never arrived (wait_for_members).
inline std::string absent_key(int rank) { return "ddp/absent/" + std::to_string(rank); }

/// Where generation g's members record their one verdict on the arrival wait (wait_for_members):
/// "all", or "absent" and the ranks taken for absent.
inline constexpr const char* members_verdict_key = "ddp/members_verdict";

/// How often the arrival wait looks at lost marks and the job's end (a few store round trips).
inline constexpr std::chrono::milliseconds arrival_look_every{50};

/// "<rank> <identity>" lines: the joiners among a generation's members, by their new ranks.
inline std::string joiner_ids_text(const std::vector<std::string>& ids) {
  std::string s;
  for (std::size_t r = 0; r < ids.size(); ++r)
    if (!ids[r].empty()) s += std::to_string(r) + " " + ids[r] + "\n";
  return s;
}

inline std::vector<std::string> parse_joiner_ids(const std::string& text, std::size_t members) {
  std::vector<std::string> ids(members);
  std::istringstream in(text);
  std::size_t r = 0;
  std::string id;
  while (in >> r >> id)
    if (r < members) ids[r] = id;
  return ids;
}

/// A client of the launcher's store in `scope`, registered as `rank` (-1: no rank).
inline tcp_store_options elastic_store_options(const ddp::topology& job, std::string scope, int rank,
                                               std::chrono::milliseconds timeout, const std::string& token) {
  tcp_store_options so;
  so.host = job.master_addr.empty() ? "127.0.0.1" : job.master_addr;
  so.port = job.store_port;
  so.serve = false;
  so.timeout = timeout;
  so.token = token;
  so.rank = rank;
  so.scope = std::move(scope);
  so.served_by_launcher = true;
  return so;
}

inline std::string members_text(const std::vector<elastic_survivor>& m) {
  std::string s;
  for (const auto& x : m)
    s += std::to_string(x.old_rank) + " " + std::to_string(x.node) + "\n";
  return s;
}

inline std::vector<elastic_survivor> parse_members(const std::string& text) {
  std::vector<elastic_survivor> m;
  std::istringstream in(text);
  elastic_survivor x;
  while (in >> x.old_rank >> x.node)
    m.push_back(x);
  return m;
}

/// The first survivor to arrive decides who the generation is: the arrivals, once they are
/// every rank of the old generation but those the store saw lost and that did not arrive (a
/// survivor whose own store connection broke is recorded lost, yet arrives). A rank neither
/// arrived nor seen lost is alive but busy (a checkpoint, rank-0-only work): it is waited for
/// until `timeout`; when the store saw no loss at all, the lost peer vanished without closing
/// its connections and `last_call` bounds the wait.
///
/// With joiners (`joins`), the joiners admitted to `generation` are expected too (whatever rank
/// admitted them: Note [Admission by claim]), each by its identity; an admitted joiner that has
/// not arrived once the survivors are all there is waited for up to `last_call` from then (it
/// polls every few tens of milliseconds), and one its agent saw die not at all, nor kept if it
/// had arrived. The survivors keep their own wait: a meeting that any decision names (its joiner
/// lost or not) was called by an admission, not a loss, so a survivor not yet there is busy, not
/// vanished, and `last_call` does not drop it. Old members marked absent (wait_for_members) count
/// as lost.
inline std::vector<elastic_survivor> close_meeting(tcp_store& meet, tcp_store& old, tcp_store* joins,
                                                   const std::string& base, std::uint64_t generation,
                                                   int old_size, std::chrono::milliseconds last_call,
                                                   std::chrono::milliseconds timeout,
                                                   std::vector<std::string>& ids) {
  const auto start = std::chrono::steady_clock::now();
  auto survivors_since = std::chrono::steady_clock::time_point::max(); // when the last one came
  std::vector<elastic_survivor> members;
  std::vector<std::pair<std::string, elastic_survivor>> joined; // by joiner identity
  joiner_registry seen; // each entry and decision read once per meeting, not at every look
  // A joiner that arrived and then died is no member: its agent's lost mark is looked at again
  // on every look and once more before the members are published.
  const auto drop_lost_joiners = [&] {
    std::erase_if(joined, [&](const auto& j) { return joiner_lost(*joins, j.first); });
  };
  // Members of the old generation that never connected to it: whoever saw it marked them before
  // coming here, so one look before the first suffices.
  std::vector<int> never_connected;
  for (int r = 0; r < old_size; ++r)
    if (old.check({absent_key(r)})) never_connected.push_back(r);
  // The old generation's joiner members: one its agent saw die (before it connected there, when
  // no verdict marked it absent: a member lost at the same time ends that wait first) is lost.
  std::vector<std::string> old_joiners;
  if (joins && generation >= 2)
    if (auto v = meet.try_get("g" + std::to_string(generation - 1) + "/joiner_ids"))
      old_joiners = parse_joiner_ids(*v, static_cast<std::size_t>(std::max(old_size, 0)));
  for (;;) {
    const auto arrived = meet.add(base + "arrivals", 0);
    std::vector<std::string> keys;
    for (auto n = static_cast<std::int64_t>(members.size()) + 1; n <= arrived; ++n)
      keys.push_back(base + "arrival/" + std::to_string(n));
    if (!keys.empty())
      for (const auto& v : meet.multi_get(keys, timeout)) {
        auto one = parse_members(v);
        members.insert(members.end(), one.begin(), one.end());
      }
    auto lost = old.lost_ranks();
    for (std::size_t r = 0; r < old_joiners.size(); ++r)
      if (!old_joiners[r].empty() && joiner_lost(*joins, old_joiners[r])) {
        never_connected.push_back(static_cast<int>(r));
        old_joiners[r].clear(); // a lost mark is final: looked at no more
      }
    for (int r : never_connected)
      if (std::find(lost.begin(), lost.end(), r) == lost.end()) lost.push_back(r);
    const auto lost_away = std::count_if(lost.begin(), lost.end(), [&](int r) {
      return std::none_of(members.begin(), members.end(),
                          [&](const elastic_survivor& m) { return m.old_rank == r; });
    });
    bool joiners_here = true, joiners_expected = false;
    if (joins) {
      drop_lost_joiners();
      // Any decision naming this generation, lost joiner or not, makes the meeting an admission's.
      for (const auto& e : joiners_decided_for(*joins, generation, seen)) {
        joiners_expected = true;
        const bool in =
            std::any_of(joined.begin(), joined.end(), [&](const auto& j) { return j.first == e.id; });
        if (in || joiner_lost(*joins, e.id)) continue;
        if (auto v = meet.try_get(base + "joined/" + e.id)) {
          for (const auto& one : parse_members(*v))
            joined.emplace_back(e.id, one);
        } else {
          joiners_here = false;
        }
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const auto waited = now - start;
    const bool survivors_here = static_cast<std::int64_t>(members.size()) + lost_away >= old_size;
    if (survivors_here && survivors_since == std::chrono::steady_clock::time_point::max())
      survivors_since = now;
    if ((survivors_here && (joiners_here || now - survivors_since >= last_call)) || waited >= timeout ||
        (lost.empty() && !joiners_expected && waited >= last_call))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); // a look is a few store round trips
  }
  if (joins) drop_lost_joiners();
  for (const auto& j : joined)
    members.push_back(j.second);
  std::sort(members.begin(), members.end(),
            [](const elastic_survivor& a, const elastic_survivor& b) { return a.old_rank < b.old_rank; });
  ids.assign(members.size(), std::string());
  for (std::size_t r = 0; r < members.size(); ++r)
    for (const auto& j : joined)
      if (j.second.old_rank == members[r].old_rank) ids[r] = j.first;
  meet.set(base + "joiner_ids", joiner_ids_text(ids)); // first: "members" is what the others wait for
  meet.set(base + "members", members_text(members));
  return members;
}

/// The new generation's layout: ranks by their place in `members`, nodes in order of appearance.
inline ddp::topology generation_topology(const ddp::topology& job,
                                         const std::vector<elastic_survivor>& members, int rank) {
  ddp::topology t = job;
  t.rank = rank;
  t.world_size = static_cast<int>(members.size());
  std::vector<int> nodes;
  for (const auto& m : members)
    if (std::find(nodes.begin(), nodes.end(), m.node) == nodes.end()) nodes.push_back(m.node);
  const int mine = members[static_cast<std::size_t>(rank)].node;
  t.nnodes = static_cast<int>(nodes.size());
  t.node_rank = static_cast<int>(std::find(nodes.begin(), nodes.end(), mine) - nodes.begin());
  t.local_rank = t.local_world_size = 0;
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (members[k].node != mine) continue;
    if (static_cast<int>(k) < rank) ++t.local_rank;
    ++t.local_world_size;
  }
  return t;
}

/// Generation `generation` of `members`, as member `rank` sees it: its layout and its store.
inline elastic_generation form_generation(const ddp::topology& job, std::vector<elastic_survivor> members,
                                          std::vector<std::string> ids, int rank, std::uint64_t generation,
                                          std::chrono::milliseconds timeout, const std::string& token) {
  elastic_generation g;
  g.rv.topo = generation_topology(job, members, rank);
  g.members = std::move(members);
  g.joiner_ids = std::move(ids);
  g.joiner_ids.resize(g.members.size());
  if (joiners_possible()) g.joins = joiners_store_options(job, timeout, token);
  g.rv.timeout = timeout;
  g.rv.token = token;
  g.rv.store = std::make_shared<tcp_store>(
      elastic_store_options(job, elastic_scope(job, generation), rank, timeout, token));
  return g;
}

DDP_INLINE elastic_generation meet_survivors(const ddp::topology& job, elastic_survivor me, int old_size,
                                             std::uint64_t generation, std::chrono::milliseconds last_call,
                                             std::chrono::milliseconds timeout, const std::string& token) {
  const std::string who =
      "rank " + std::to_string(me.old_rank) + " of generation " + std::to_string(generation - 1);
  const std::string base = "g" + std::to_string(generation) + "/";
  // The meeting's keys in a scope of their own, where no rank registers: a store wait where a
  // rank was lost fails at once, naming it, and every generation's scope has its lost rank.
  tcp_store meet(elastic_store_options(job, elastic_scope(job, 0) + "meet/", -1, timeout, token));
  tcp_store old(elastic_store_options(job, elastic_scope(job, generation - 1), -1, timeout, token));
  const auto n = meet.add(base + "arrivals", 1);
  meet.set(base + "arrival/" + std::to_string(n), members_text({me}));
  std::vector<elastic_survivor> members;
  std::vector<std::string> ids;
  if (n == 1) {
    std::unique_ptr<tcp_store> joins;
    if (joiners_possible()) joins = std::make_unique<tcp_store>(joiners_store_options(job, timeout, token));
    members = close_meeting(meet, old, joins.get(), base, generation, old_size, last_call, timeout, ids);
  } else {
    const auto patience = std::max(last_call, timeout) + timeout;
    if (!meet.try_wait({base + "members"}, patience))
      throw error(error_kind::timeout,
                  who + ": the survivors' meeting for generation " + std::to_string(generation) +
                      " did not close within " + std::to_string(patience.count()) +
                      " ms (the first survivor to arrive closes it: it may have died too); the job "
                      "cannot recover in process: restart it from its checkpoint");
    members = parse_members(meet.get(base + "members"));
    ids = parse_joiner_ids(meet.try_get(base + "joiner_ids").value_or(""), members.size());
  }
  const auto at = std::find_if(members.begin(), members.end(),
                               [&](const elastic_survivor& m) { return m.old_rank == me.old_rank; });
  if (at == members.end())
    throw error(error_kind::timeout,
                who + ": arrived after the survivors' meeting for generation " + std::to_string(generation) +
                    " closed without it (" + std::to_string(members.size()) +
                    " members; the meeting waits for a busy survivor up to DDP_TIMEOUT, " +
                    std::to_string(timeout.count()) + " ms, and up to ddp::elastic::options::last_call, " +
                    std::to_string(last_call.count()) +
                    " ms, when the store saw no rank lost and no joiner was admitted): raise them if "
                    "survivors take longer to notice a loss");
  const int rank = static_cast<int>(at - members.begin());
  return form_generation(job, std::move(members), std::move(ids), rank, generation, timeout, token);
}

DDP_INLINE elastic_generation meet_as_joiner(const ddp::topology& job, const std::string& id,
                                             std::uint64_t generation, std::chrono::milliseconds last_call,
                                             std::chrono::milliseconds timeout, const std::string& token) {
  const std::string who = "joiner " + id + " (job rank " + std::to_string(job.rank) + ")";
  const std::string base = "g" + std::to_string(generation) + "/";
  tcp_store meet(elastic_store_options(job, elastic_scope(job, 0) + "meet/", -1, timeout, token));
  const elastic_survivor me{joiner_rank_base + job.rank, job.node_rank};
  meet.set(base + "joined/" + id, members_text({me}));
  const auto patience = std::max(last_call, timeout) + timeout;
  if (!meet.try_wait({base + "members"}, patience))
    throw error(error_kind::timeout,
                who + ": admitted to generation " + std::to_string(generation) +
                    ", whose meeting did not close within " + std::to_string(patience.count()) +
                    " ms (a survivor closes it: they may all be lost); ending this joiner",
                job.rank);
  auto members = parse_members(meet.get(base + "members"));
  auto ids = parse_joiner_ids(meet.try_get(base + "joiner_ids").value_or(""), members.size());
  const auto at = std::find_if(members.begin(), members.end(),
                               [&](const elastic_survivor& m) { return m.old_rank == me.old_rank; });
  if (at == members.end())
    throw error(error_kind::timeout,
                who + ": admitted to generation " + std::to_string(generation) +
                    ", arrived after its meeting closed without it (a meeting waits for an admitted "
                    "joiner up to ddp::elastic::options::last_call, " +
                    std::to_string(last_call.count()) + " ms, once the survivors are there)",
                job.rank);
  const int rank = static_cast<int>(at - members.begin());
  return form_generation(job, std::move(members), std::move(ids), rank, generation, timeout, token);
}

/// "absent", the ranks taken for absent, then "lost" and the members lost after they arrived
/// (the store's record), so that every member names the same ranks whichever wrote it.
inline std::string absent_verdict(const std::vector<int>& ranks, const std::vector<int>& lost = {}) {
  std::string v = "absent";
  for (int r : ranks)
    v += " " + std::to_string(r);
  if (!lost.empty()) v += " lost";
  for (int r : lost)
    v += " " + std::to_string(r);
  return v;
}

struct absent_members {
  std::vector<int> absent, lost;
};

inline absent_members parse_absent(const std::string& verdict) {
  std::istringstream in(verdict);
  std::string word;
  in >> word;
  absent_members out;
  auto* into = &out.absent;
  while (in >> word) {
    if (word == "lost") {
      into = &out.lost;
      continue;
    }
    try {
      into->push_back(std::stoi(word));
    } catch (const std::exception&) { break; } // not ours: the ranks read so far
  }
  return out;
}

inline std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks)
    s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

DDP_INLINE void wait_for_members(const elastic_generation& g) {
  // Every member arrives before any enters the backend's mesh, as in init_process_group: one
  // lost meanwhile is named by this wait at once.
  const rendezvous& rv = g.rv;
  const std::string who = "rank " + std::to_string(rv.topo.rank) + " of a new generation";
  rv.store->set("ddp/arrived/" + std::to_string(rv.topo.rank), "1");
  std::vector<std::string> arrived;
  for (int r = 0; r < rv.topo.world_size; ++r)
    arrived.push_back("ddp/arrived/" + std::to_string(r));
  // The members not arrived yet: only the joiners among them at every look (only a joiner's
  // death before it connects leaves a mark to look at, its agent's), every member at the deadline.
  const auto missing = [&](bool joiners_only) {
    std::vector<int> out;
    for (int r = 0; r < rv.topo.world_size; ++r)
      if ((!joiners_only || !g.joiner_ids[static_cast<std::size_t>(r)].empty()) &&
          !rv.store->check({arrived[static_cast<std::size_t>(r)]}))
        out.push_back(r);
    return out;
  };
  std::unique_ptr<tcp_store> joins; // opened at the first look that needs it
  const auto dead_joiners = [&](const std::vector<int>& away) {
    std::vector<int> out;
    if (!g.joins) return out;
    for (int r : away) {
      const auto& id = g.joiner_ids[static_cast<std::size_t>(r)];
      if (id.empty()) continue;
      if (!joins) joins = std::make_unique<tcp_store>(*g.joins);
      if (joiner_lost(*joins, id)) out.push_back(r);
    }
    return out;
  };
  const auto deadline = std::chrono::steady_clock::now() + rv.timeout;
  std::optional<error> lost; // a member lost after it arrived: the store's record
  std::string proposal;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      if (rv.store->try_wait(arrived, std::clamp(left, std::chrono::milliseconds(1), arrival_look_every))) {
        proposal = "all";
        break;
      }
    } catch (const error& e) {
      if (e.kind() != error_kind::peer_lost) throw;
      lost = e;
    }
    if (auto v = rv.store->try_get(members_verdict_key)) { // another member decided first
      proposal = *v;
      break;
    }
    if (lost) { // ends this generation: the dead joiners among the missing are marked with it
      std::vector<int> lost_ranks;
      if (lost->rank() >= 0) lost_ranks.push_back(lost->rank());
      proposal = absent_verdict(dead_joiners(missing(true)), lost_ranks);
      break;
    }
    if (auto dead = dead_joiners(missing(true)); !dead.empty()) {
      proposal = absent_verdict(dead);
      break;
    }
    if (g.joins) {
      if (!joins) joins = std::make_unique<tcp_store>(*g.joins);
      if (job_ended(joins))
        throw error(error_kind::timeout,
                    who + ": the job ended (a rank's loop returned) while this generation formed: "
                          "nothing is left to run in it",
                    rv.topo.rank);
    }
    if (left <= std::chrono::milliseconds(0)) {
      const auto away = missing(false);
      proposal = away.empty() ? "all" : absent_verdict(away); // the last one came at the deadline
      break;
    }
  }
  // One verdict for the generation: the first proposal stands, whichever member made it.
  const auto verdict = rv.store->compare_set(members_verdict_key, "", proposal).value_or(proposal);
  if (verdict == "all") {
    if (lost) throw *lost; // all came, then one was lost: the mesh cannot form either
    return;
  }
  const auto [absent, lost_members] = parse_absent(verdict);
  for (int r : absent)
    rv.store->set(absent_key(r), "1"); // the next meeting does not wait for them
  if (lost) throw *lost;
  if (absent.empty()) // the verdict of a member that saw a loss this one did not
    throw error(
        error_kind::peer_lost,
        who + ": member(s) " +
            (lost_members.empty() ? std::string("(unnamed by the store)") : ranks_text(lost_members)) +
            " lost after arriving (another member's verdict): the survivors meet again without them",
        lost_members.empty() ? -1 : lost_members.front());
  const bool me_absent = std::find(absent.begin(), absent.end(), rv.topo.rank) != absent.end();
  throw error(error_kind::peer_lost,
              who + ": member(s) " + ranks_text(absent) +
                  " taken for absent (a joiner its agent saw die, or one that did not arrive within "
                  "DDP_TIMEOUT, " +
                  std::to_string(rv.timeout.count()) + " ms, after the survivors' meeting)" +
                  (lost_members.empty()
                       ? ""
                       : ", and member(s) " + ranks_text(lost_members) + " lost after arriving") +
                  (me_absent ? ", this one among them (it arrived after the verdict)" : "") +
                  ": the survivors meet again without them",
              absent.front());
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_ELASTIC_MEETING_INL_HPP
