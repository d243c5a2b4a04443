// EXPECT: send/recv, all_to_all, gather, scatter and reduce are offered by ddp::gloo
// Compiled with DDP_WITH_NCCL (as ddp::nccl does): ddp::nccl does not model
// extended_communicator yet, so the call is refused in one message that says
// what to use instead.
#include <ddp/ddp.hpp>

#include <vector>

int main() {
  auto pg = ddp::init_process_group<ddp::nccl>();
  std::vector<float> in(8), out(8);
  pg.all_to_all(in, out);
}
