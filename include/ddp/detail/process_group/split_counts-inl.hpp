// The definition behind split_counts.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_PROCESS_GROUP_SPLIT_COUNTS_INL_HPP
#define DDP_DETAIL_PROCESS_GROUP_SPLIT_COUNTS_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/process_group/split_counts.hpp>
#include <ddp/error.hpp>

#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void check_split_counts(const char* what, int rank, int world, std::size_t in_size,
                                   const std::vector<std::size_t>& send_counts, std::size_t out_size,
                                   const std::vector<std::size_t>& recv_counts) {
  const std::string who = detail::message({what, " on rank ", rank, ": "});
  const auto w = static_cast<std::size_t>(world);
  if (send_counts.size() != w || recv_counts.size() != w)
    detail::throw_error(error_kind::config,
                        {who, "send_counts has ", send_counts.size(), " entries and recv_counts ",
                         recv_counts.size(), "; each needs one per rank (", world, ")"});
  // Every rank's counts travel with the header round (header_round::inline_cap: at least 4 KiB).
  if (w > 256)
    detail::throw_error(error_kind::config, {who,
                                             "counts per peer are checked across ranks up to 256 ranks; this "
                                             "group has ",
                                             world, ": use equal splits (all_to_all without counts)"});
  std::size_t s = 0, r = 0;
  for (std::size_t p = 0; p < w; ++p)
    s += send_counts[p], r += recv_counts[p];
  if (s != in_size || r != out_size)
    detail::throw_error(error_kind::config,
                        {who, "the counts add up to ", s, " to send and ", r,
                         " to receive, but the input has ", in_size, " elements and the output ", out_size,
                         ": make each tensor as long as its counts' sum"});
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_PROCESS_GROUP_SPLIT_COUNTS_INL_HPP
