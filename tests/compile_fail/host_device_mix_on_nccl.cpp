// EXPECT: this backend (NCCL) takes a collective's tensors in one memory space
// Compiled with DDP_WITH_NCCL (as ddp::nccl does): NCCL's host path copies with the CPU, so a device
// tensor beside a host one is refused at compile time instead of read by the CPU at run time.
#include <ddp/ddp.hpp>

#include <vector>

int main() {
  auto pg = ddp::init_process_group<ddp::nccl>();
  ddp::device_span<float> in{nullptr, 10};
  std::vector<float> out(20);
  pg.all_gather(in, out);
}
