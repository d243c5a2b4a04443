// EXPECT: for_each_parameter (or for_each_buffer) passed a temporary that owns its elements
// A view made in the call (std::span over the model's storage) is fine; a vector made there dies
// with the call while ddp keeps its address.
#include <ddp/ddp.hpp>

#include <span>
#include <vector>

struct model {
  std::vector<float> w = std::vector<float>(4), dw = std::vector<float>(4);
  template <class F> void for_each_parameter(F&& f) {
    f("w", std::span<float>(w), std::span<float>(dw));               // fine: views
    f("copy", std::vector<float>(w), std::vector<float>(dw.size())); // refused: owning temporaries
  }
};

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  model m;
  ddp::distributed_data_parallel dp(m, pg);
}
