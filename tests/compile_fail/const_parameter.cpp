// EXPECT: for_each_parameter (or for_each_buffer) passed a tensor of const elements
// ddp writes rank 0's values into every rank's parameters and the averages into the gradients.
#include <ddp/ddp.hpp>

#include <span>
#include <vector>

struct model {
  std::vector<float> w = std::vector<float>(4), dw = std::vector<float>(4);
  template <class F> void for_each_parameter(F&& f) {
    f("w", std::span<const float>(w), std::span<float>(dw));
  }
};

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  model m;
  ddp::distributed_data_parallel dp(m, pg);
}
