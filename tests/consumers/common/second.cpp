// A second file of the consumer that includes ddp too: with ddp::runtime both
// files link against the one runtime (nothing defined twice, nothing missing).
#include <ddp/ddp.hpp>

int world_size_from_a_second_file(ddp::process_group<ddp::gloo>& pg) {
  std::vector<int> one{1};
  pg.all_reduce(one);
  return one[0];
}
