// EXPECT: the model type must provide `template <class F> void for_each_parameter
#include <ddp/ddp.hpp>

struct not_a_model {
  std::vector<float> weights; // no for_each_parameter
};

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  not_a_model m;
  ddp::distributed_data_parallel dp(m, pg);
}
