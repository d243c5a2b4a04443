// EXPECT: an _async collective got as input a temporary that owns its elements
// The blocking form reads it before the call returns; the async form would read freed memory.
#include <ddp/ddp.hpp>

#include <vector>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  std::vector<float> out(2 * static_cast<std::size_t>(pg.size()));
  pg.all_gather(std::vector<float>{1, 2}, out); // fine: blocking
  pg.all_gather_async(std::vector<float>{1, 2}, out).wait();
}
