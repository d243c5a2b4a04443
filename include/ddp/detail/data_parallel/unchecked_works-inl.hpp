// The definitions behind unchecked_works.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/unchecked_works.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void unchecked_works::stream_wait(const work& w, CUstream_st* stream) {
  works_.push_back(w);
  try {
    w.stream_wait(stream);
  } catch (...) {
    if (works_.back().done()) works_.pop_back();
    throw;
  }
}

DDP_INLINE void unchecked_works::check() {
  std::exception_ptr first;
  std::erase_if(works_, [&](work& w) {
    if (!w.done()) return false;
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
    return true;
  });
  if (first) std::rethrow_exception(first);
}

DDP_INLINE void unchecked_works::wait_all() {
  std::exception_ptr first;
  for (auto& w : works_)
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  works_.clear();
  if (first) std::rethrow_exception(first);
}

DDP_INLINE void unchecked_works::log_all() noexcept {
  std::vector<std::pair<std::string, int>> seen;
  for (auto& w : works_)
    try {
      w.wait();
    } catch (const std::exception& e) {
      auto it = std::find_if(seen.begin(), seen.end(), [&](auto& p) { return p.first == e.what(); });
      if (it == seen.end())
        seen.emplace_back(e.what(), 1);
      else
        ++it->second;
    } catch (...) {}
  works_.clear();
  for (auto& [what, times] : seen)
    log_line(detail::message({"rank ", rank_}),
             detail::message(
                 {(times > 1 ? detail::message({times, " collectives"}) : std::string("a collective")),
                  " whose results a stream waited for failed after synchronize() returned (the values left "
                  "on the device are not valid): ",
                  what}));
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_INL_HPP
