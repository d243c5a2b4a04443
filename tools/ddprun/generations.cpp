#include "generations.hpp"

#include <ddp/detail/elastic/joiners.hpp>

#include <algorithm>
#include <sstream>
#include <string>

namespace ddprun {

generations::generations(int world_size) {
  for (int r = 0; r < world_size; ++r)
    members_.push_back(r);
  since_.assign(members_.size(), 0);
}

bool generations::update(ddp::tcp_store& store, int round) {
  bool fresh = false;
  for (;;) {
    auto v =
        store.try_get("r" + std::to_string(round) + "/meet/g" + std::to_string(latest_ + 1) + "/members");
    if (!v) return fresh;
    // Each member is named by its rank in the generation before: follow it back to its job rank.
    // A joiner is named by the slot it was started in.
    std::vector<int> next, since;
    std::istringstream in(*v);
    for (int old = 0, node = 0; in >> old >> node;)
      if (old >= 0 && old < static_cast<int>(members_.size())) {
        next.push_back(members_[static_cast<std::size_t>(old)]);
        since.push_back(since_[static_cast<std::size_t>(old)]);
      } else if (old >= ddp::detail::joiner_rank_base) {
        const int job_rank = old - ddp::detail::joiner_rank_base;
        next.push_back(job_rank);
        since.push_back(latest_ + 1);
        joiners_entered_.emplace_back(latest_ + 1, job_rank);
      }
    members_ = std::move(next);
    since_ = std::move(since);
    ++latest_;
    fresh = true;
  }
}

bool generations::member(int job_rank) const {
  return std::find(members_.begin(), members_.end(), job_rank) != members_.end();
}

bool generations::member_since_above(int job_rank, int after) const {
  for (std::size_t k = 0; k < members_.size(); ++k)
    if (members_[k] == job_rank && since_[k] > after) return true;
  return false;
}

bool generations::member_since_at_most(int job_rank, int after) const {
  for (std::size_t k = 0; k < members_.size(); ++k)
    if (members_[k] == job_rank && since_[k] <= after) return true;
  return false;
}

bool generations::member_entered_at(int job_rank, int generation) const {
  for (std::size_t k = 0; k < members_.size(); ++k)
    if (members_[k] == job_rank && since_[k] == generation) return true;
  return false;
}

bool generations::joiner_entered_after(int job_rank, int after) const {
  return std::any_of(joiners_entered_.begin(), joiners_entered_.end(),
                     [&](const std::pair<int, int>& e) { return e.second == job_rank && e.first > after; });
}

bool generations::joiner_entered(int job_rank, int generation) const {
  return std::find(joiners_entered_.begin(), joiners_entered_.end(), std::pair{generation, job_rank}) !=
         joiners_entered_.end();
}

} // namespace ddprun
