// EXPECT: a device tensor's collective is staged through pinned host memory and blocks
// Compiled with DDP_WITH_CUDA (as ddp::cuda does): the blocking form is staged; the async form is refused.
#include <ddp/ddp.hpp>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  ddp::device_span<float> grads{nullptr, 10};
  pg.all_reduce(grads); // fine: staged, blocking
  pg.all_reduce_async(grads).wait();
}
