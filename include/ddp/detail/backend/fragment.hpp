// A contiguous piece of a bucket: one tensor's memory, as a backend sees it.
#ifndef DDP_DETAIL_BACKEND_FRAGMENT_HPP
#define DDP_DETAIL_BACKEND_FRAGMENT_HPP

#include <ddp/config.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct fragment {
  void* data;
  std::size_t count; ///< elements
};

/// Elements in all the fragments together.
inline std::size_t total_count(const std::vector<fragment>& frags) {
  std::size_t n = 0;
  for (const auto& f : frags)
    n += f.count;
  return n;
}

/// Calls f(ptr, at, count) for each contiguous piece of elements [first,
/// first + count) of the concatenated fragments: `ptr` points into the
/// fragment's memory, `at` counts elements from `first`. Elements are `esz`
/// bytes. A linear walk: buckets hold hundreds of fragments, not millions.
template <class F>
void for_each_piece(const std::vector<fragment>& frags, std::size_t first, std::size_t count, std::size_t esz,
                    F&& f) {
  std::size_t pos = 0, at = 0;
  for (const auto& fr : frags) {
    if (at == count) return;
    if (first + at >= pos + fr.count) {
      pos += fr.count;
      continue;
    }
    const std::size_t from = first + at - pos, take = std::min(count - at, fr.count - from);
    f(static_cast<char*>(fr.data) + from * esz, at, take);
    at += take;
    pos += fr.count;
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_FRAGMENT_HPP
