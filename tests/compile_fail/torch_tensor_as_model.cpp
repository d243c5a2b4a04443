// EXPECT: the model type must provide `template <class F> void for_each_parameter
// A tensor is not a model: a torch::nn::Module (or its holder) is.
#include <ddp/ddp.hpp>
#include <ddp/torch.hpp>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  auto weights = torch::zeros({4}, torch::requires_grad());
  ddp::distributed_data_parallel dp(weights, pg);
}
