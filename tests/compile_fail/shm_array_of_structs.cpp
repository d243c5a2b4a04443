// EXPECT: make_shm_array<T> needs an element type
#include <ddp/ddp.hpp>

struct vec3 {
  float x, y, z;
};

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  auto points = pg.make_shm_array<vec3>(100);
  (void)points;
}
