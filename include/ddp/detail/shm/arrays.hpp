// The node's shm arrays (process_group<gloo>::make_shm_array): each is a
// segment of its own (shm_segment, no result area), one area per local rank,
// every rank's array at the start of its area. Made collectively in the same
// order on every rank, so array k is the same segment on all of a node's
// ranks. The backend asks find() whether an all_reduce's memory lies in one:
// then it reduces in place (shm_all_reduce::run_in_place).
#ifndef DDP_DETAIL_SHM_ARRAYS_HPP
#define DDP_DETAIL_SHM_ARRAYS_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/shm/segment.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class shm_array_registry {
public:
  /// An all_reduce's memory found in array `id`, `offset` bytes into this rank's area.
  struct hit {
    std::shared_ptr<shm_segment> seg; ///< held for the collective: the array cannot unmap under it
    std::uint32_t id = 0;
    std::size_t offset = 0;
  };

  /// The store key prefix and id of the next array (every rank counts alike),
  /// under `prefix`, the group's shm keys ("ddp/shm/" for the job's own group).
  std::pair<std::string, std::uint32_t> next(const std::string& prefix) {
    std::lock_guard lock(mu_);
    const std::uint32_t id = made_++;
    return {detail::message({prefix, "array", id, "/"}), id};
  }

  void add(std::uint32_t id, const std::shared_ptr<shm_segment>& seg) {
    std::lock_guard lock(mu_);
    std::erase_if(arrays_, [](const auto& a) { return a.second.expired(); });
    arrays_.emplace_back(id, seg);
  }

  /// Whether [p, p + bytes) lies in this rank's area of a live array.
  std::optional<hit> find(const void* p, std::size_t bytes) const {
    std::lock_guard lock(mu_);
    for (const auto& [id, weak] : arrays_)
      if (auto seg = weak.lock(); seg && seg->in_area(seg->local_rank(), p, bytes))
        return hit{seg, id,
                   static_cast<std::size_t>(static_cast<const char*>(p) - seg->data(seg->local_rank()))};
    return std::nullopt;
  }

private:
  mutable std::mutex mu_;
  std::uint32_t made_ = 0;
  std::vector<std::pair<std::uint32_t, std::weak_ptr<shm_segment>>> arrays_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_ARRAYS_HPP
