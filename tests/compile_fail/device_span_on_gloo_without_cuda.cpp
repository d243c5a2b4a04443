// EXPECT: a device_span is staged through pinned host memory only where ddp is built with CUDA
#include <ddp/ddp.hpp>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  ddp::device_span<float> grads{nullptr, 10}; // without DDP_WITH_CUDA (ddp::cuda not linked)
  pg.all_reduce(grads);
}
