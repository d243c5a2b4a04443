// The definitions behind hybrid_tiling.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_SHARDED_HYBRID_TILING_INL_HPP
#define DDP_DETAIL_SHARDED_HYBRID_TILING_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/sharded/hybrid_tiling.hpp>

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

namespace hybrid_field {
enum : std::size_t { problem, shard_rank, shard_size, shard_id, rep_rank, rep_size, rep_id };
enum : std::int64_t { none, not_in_shard, not_in_replicate, shard_outside, replicate_outside };
} // namespace hybrid_field

DDP_INLINE std::vector<std::int64_t> hybrid_record(const hybrid_side& shard, const hybrid_side& replicate,
                                                   const std::vector<int>& world_job_ranks) {
  // FNV-1a of the name: the name carries the creating call's prefix, so two
  // groups of the same ranks made by different calls (different meshes) differ.
  auto id = [](const hybrid_side& s) {
    std::uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : *s.name)
      h = (h ^ c) * 1099511628211ULL;
    return static_cast<std::int64_t>(h >> 1);
  };
  auto outside = [&](const hybrid_side& s) {
    for (int j : *s.job_ranks)
      if (std::find(world_job_ranks.begin(), world_job_ranks.end(), j) == world_job_ranks.end()) return true;
    return false;
  };
  std::int64_t problem = hybrid_field::none;
  if (!shard.member)
    problem = hybrid_field::not_in_shard;
  else if (!replicate.member)
    problem = hybrid_field::not_in_replicate;
  else if (outside(shard))
    problem = hybrid_field::shard_outside;
  else if (outside(replicate))
    problem = hybrid_field::replicate_outside;
  return {problem, shard.rank, shard.size, id(shard), replicate.rank, replicate.size, id(replicate)};
}

DDP_INLINE std::string hybrid_tiling_problem(const std::vector<std::int64_t>& records, int world) {
  namespace f = hybrid_field;
  const auto w = static_cast<std::size_t>(world);
  auto at = [&](std::size_t r, std::size_t k) { return records[r * hybrid_record_fields + k]; };
  auto rk = [](std::size_t r) { return detail::message({"rank ", r}); };
  for (std::size_t r = 0; r < w; ++r)
    switch (at(r, f::problem)) {
    case f::not_in_shard: return rk(r) + " is not a member of the shard group it passed";
    case f::not_in_replicate: return rk(r) + " is not a member of the replicate group it passed";
    case f::shard_outside:
      return rk(r) + "'s shard group holds ranks outside the world group passed beside it";
    case f::replicate_outside:
      return rk(r) + "'s replicate group holds ranks outside the world group passed beside it";
    default: break;
    }
  const std::int64_t S = at(0, f::shard_size), R = at(0, f::rep_size);
  for (std::size_t r = 1; r < w; ++r) {
    if (at(r, f::shard_size) != S)
      return detail::message({rk(r), "'s shard group has ", at(r, f::shard_size), " ranks and rank 0's ", S,
                              ": every shard group must have as many"});
    if (at(r, f::rep_size) != R)
      return detail::message({rk(r), "'s replicate group has ", at(r, f::rep_size), " ranks and rank 0's ", R,
                              ": every replicate group must have as many"});
  }
  if (S * R != world)
    return detail::message({"shard groups of ", S, " ranks and replicate groups of ", R, " ranks make ",
                            S * R, " places, not the world's ", world});
  // Each group's ranks 0..size-1, each claimed by one world rank.
  auto each_once = [&](std::size_t rank_field, std::size_t id_field, const char* what) -> std::string {
    std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> seen;
    for (std::size_t r = 0; r < w; ++r) {
      auto [it, fresh] = seen.emplace(std::make_pair(at(r, id_field), at(r, rank_field)), r);
      if (!fresh)
        return detail::message({rk(it->second), " and ", rk(r), " both say they are rank ", at(r, rank_field),
                                " of the same ", what, " group: they passed groups made by different calls"});
    }
    // A member that passed another group leaves this one's collectives waiting.
    std::map<std::int64_t, std::pair<std::size_t, std::size_t>> count; // id: (members here, a rank)
    for (std::size_t r = 0; r < w; ++r)
      ++count.try_emplace(at(r, id_field), 0, r).first->second.first;
    const std::int64_t size = std::string_view(what) == "shard" ? S : R;
    for (auto& [id, c] : count)
      if (static_cast<std::int64_t>(c.first) != size)
        return detail::message({"the ", what, " group of ", rk(c.second), " has ", size,
                                " members, but only ", c.first,
                                " ranks passed it: every member must pass the same group"});
    return {};
  };
  if (auto p = each_once(f::shard_rank, f::shard_id, "shard"); !p.empty()) return p;
  if (auto p = each_once(f::rep_rank, f::rep_id, "replicate"); !p.empty()) return p;
  // Within a replicate group: one shard rank, and every member in another shard group.
  for (std::size_t a = 0; a < w; ++a)
    for (std::size_t b = a + 1; b < w; ++b) {
      if (at(a, f::rep_id) != at(b, f::rep_id)) continue;
      if (at(a, f::shard_id) == at(b, f::shard_id))
        return detail::message({rk(a), " and ", rk(b),
                                " share both a shard group and a replicate group: the groups "
                                "overlap, so a shard would be summed twice"});
      if (at(a, f::shard_rank) != at(b, f::shard_rank))
        return detail::message(
            {rk(a), " and ", rk(b), " share a replicate group but are ranks ", at(a, f::shard_rank), " and ",
             at(b, f::shard_rank),
             " of their shard groups: they hold different shards, so averaging them mixes unrelated "
             "elements"});
    }
  return {};
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHARDED_HYBRID_TILING_INL_HPP
