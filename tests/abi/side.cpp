// One side of tests/abi's program, compiled twice: with ddp::ddp's flags
// (DDP_ABI_TEST_SIDE=host), with ddp::cuda's (DDP_WITH_CUDA,
// DDP_ABI_TEST_SIDE=cuda) and with ddp::runtime's (DDP_SEPARATE_COMPILATION,
// DDP_ABI_TEST_SIDE=separate: its runtime defined once, in another file). Each instantiates
// distributed_data_parallel and process_group with the same template arguments, whose layouts differ (the
// CUDA build's engine std::variant has the device engine): linked into one program, they must be distinct
// types, in ABI namespaces of distinct names.
#include "model.hpp"

#include <ddp/backend/gloo.hpp>
#include <ddp/data_parallel.hpp>
#include <ddp/process_group.hpp>

#include <typeinfo>
#include <vector>

#define DDP_ABI_TEST_CAT2(a, b) a##b
#define DDP_ABI_TEST_CAT(a, b) DDP_ABI_TEST_CAT2(a, b)
#define DDP_ABI_TEST_SIDE_FN DDP_ABI_TEST_CAT(DDP_ABI_TEST_CAT(abi_, DDP_ABI_TEST_SIDE), _side)

namespace {
using ddp_type = ddp::distributed_data_parallel<abi_model, ddp::gloo>;

// Never called (it needs peers): linked, so that each side's member functions of
// distributed_data_parallel and process_group are in the program, weak symbols that
// would be merged by name were the two layouts given one name.
void train_step(ddp::process_group<ddp::gloo>& pg, abi_model& m) {
  ddp_type dp(m, pg);
  dp.mark_grad_ready(0);
  dp.synchronize();
  std::vector<float> loss{1.0f};
  pg.all_reduce(loss);
}
} // namespace

abi_side DDP_ABI_TEST_SIDE_FN() {
  return {DDP_DETAIL_STR(DDP_ABI_NAMESPACE), typeid(ddp_type).name(),
          typeid(ddp::process_group<ddp::gloo>).name(), sizeof(ddp_type),
          reinterpret_cast<const void*>(&train_step)};
}
