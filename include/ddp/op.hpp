// ddp::op — the reduction operators of all_reduce and reduce_scatter.
#ifndef DDP_OP_HPP
#define DDP_OP_HPP

#include <ddp/config.hpp>

#include <string_view>

DDP_BEGIN_NAMESPACE

enum class op { sum, avg, min, max, product };

constexpr std::string_view to_string(op o) noexcept {
  switch (o) {
  case op::sum: return "sum";
  case op::avg: return "avg";
  case op::min: return "min";
  case op::max: return "max";
  case op::product: return "product";
  }
  return "?";
}

DDP_END_NAMESPACE

#endif // DDP_OP_HPP
