// EXPECT: this collective writes its result into a temporary that owns its elements
// A temporary view is fine: it names storage that outlives the call.
#include <ddp/ddp.hpp>

#include <span>
#include <vector>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  std::vector<float> x(10);
  pg.all_reduce(std::span<float>(x));   // fine: a view
  pg.all_reduce(std::vector<float>(x)); // refused: the result would die with the temporary
}
