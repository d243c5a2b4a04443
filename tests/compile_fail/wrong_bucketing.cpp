// EXPECT: Bucketing must be a bucketing policy
#include <ddp/ddp.hpp>

struct model {
  std::vector<float> w{1, 2}, dw{0, 0};
  template <class F> void for_each_parameter(F&& f) { f("w", w, dw); }
};

struct not_a_policy {
  static int assign() { return 0; } // wrong signature
};

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  model m;
  ddp::distributed_data_parallel<model, ddp::gloo, not_a_policy> dp(m, pg);
}
