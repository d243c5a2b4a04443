// The definitions behind bucketing.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_BUCKETING_INL_HPP
#define DDP_BUCKETING_INL_HPP

#include <ddp/bucketing.hpp>

#include <map>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE std::vector<std::vector<std::size_t>> assign_size_capped(std::span<const parameter_desc> params,
                                                                    std::span<const std::size_t> order,
                                                                    std::size_t cap_bytes,
                                                                    std::size_t first_bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  struct open_bucket {
    std::size_t index;
    std::size_t bytes;
    bool first;
  };
  std::map<dtype, open_bucket> open;
  for (std::size_t k : order) {
    const auto& p = params[k];
    auto it = open.find(p.type);
    if (it != open.end()) {
      auto& b = it->second;
      std::size_t cap = b.first ? first_bucket_bytes : cap_bytes;
      if (b.bytes + p.bytes > cap) {
        open.erase(it);
        buckets.push_back({k});
        open.emplace(p.type, open_bucket{buckets.size() - 1, p.bytes, false});
      } else {
        buckets[b.index].push_back(k);
        b.bytes += p.bytes;
      }
    } else {
      bool first = true;
      for (auto& b : buckets)
        if (params[b.front()].type == p.type) first = false;
      buckets.push_back({k});
      open.emplace(p.type, open_bucket{buckets.size() - 1, p.bytes, first});
    }
  }
  return buckets;
}

DDP_INLINE std::vector<std::size_t> reverse_registration_order(std::size_t n) {
  std::vector<std::size_t> order(n);
  for (std::size_t k = 0; k < n; ++k)
    order[k] = n - 1 - k;
  return order;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_BUCKETING_INL_HPP
