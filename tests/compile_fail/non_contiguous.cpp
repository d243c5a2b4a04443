// EXPECT: this type is not a contiguous tensor
#include <ddp/ddp.hpp>

#include <list>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  std::list<float> values(10, 1.0f); // not contiguous
  pg.all_reduce(values);
}
