// EXPECT: this collective writes its result into a tensor of const elements
#include <ddp/ddp.hpp>

#include <vector>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  const std::vector<float> in(2);
  std::vector<float> out(2 * static_cast<std::size_t>(pg.size()));
  pg.all_gather(in, out); // fine: only the output is written
  pg.broadcast(in, 0);
}
