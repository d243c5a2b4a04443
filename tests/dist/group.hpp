// The process group a multi-process suite shares: joined once per process,
// from the environment ddprun sets.
#pragma once

#include <ddp/ddp.hpp>

namespace ddp_test {

inline ddp::process_group<ddp::gloo>& group() {
  static auto pg = ddp::init_process_group<ddp::gloo>();
  return pg;
}

} // namespace ddp_test
