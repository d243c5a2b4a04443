// The smallest ddp program: each rank contributes its rank + 1, all_reduce sums them.
//   ddprun --nproc-per-node 2 ./quickstart_all_reduce
#include <ddp/ddp.hpp>

#include <cstdio>
#include <vector>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>(); // RANK, WORLD_SIZE, MASTER_ADDR, ... from ddprun
  std::vector<float> v(4, static_cast<float>(pg.rank() + 1));
  pg.all_reduce(v, ddp::op::sum); // every rank now holds 1 + 2 + ... + W in each element
  const float want = static_cast<float>(pg.size() * (pg.size() + 1) / 2);
  std::printf("rank %d of %d: %g (want %g)\n", pg.rank(), pg.size(), static_cast<double>(v[0]),
              static_cast<double>(want));
  return v[0] == want ? 0 : 1;
}
