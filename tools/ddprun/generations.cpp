#include "generations.hpp"

#include <algorithm>
#include <sstream>
#include <string>

namespace ddprun {

generations::generations(int world_size) {
  for (int r = 0; r < world_size; ++r)
    members_.push_back(r);
}

bool generations::update(ddp::tcp_store& store, int round) {
  bool fresh = false;
  for (;;) {
    auto v =
        store.try_get("r" + std::to_string(round) + "/meet/g" + std::to_string(latest_ + 1) + "/members");
    if (!v) return fresh;
    // Each member is named by its rank in the generation before: follow it back to its job rank.
    std::vector<int> next;
    std::istringstream in(*v);
    for (int old = 0, node = 0; in >> old >> node;)
      if (old >= 0 && old < static_cast<int>(members_.size()))
        next.push_back(members_[static_cast<std::size_t>(old)]);
    members_ = std::move(next);
    ++latest_;
    fresh = true;
  }
}

bool generations::member(int job_rank) const {
  return std::find(members_.begin(), members_.end(), job_rank) != members_.end();
}

} // namespace ddprun
