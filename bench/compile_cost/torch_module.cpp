// bench/compile_cost: a LibTorch module trained on made-up data, without ddp
// (the baseline) and, with -DWITH_DDP, data-parallel under ddp: the difference
// is what ddp adds to a LibTorch file.
#include <torch/torch.h>
#ifdef WITH_DDP
#include <ddp/ddp.hpp>
#include <ddp/torch.hpp>
#endif

#include <cstdio>

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3)))),
        fc(register_module("fc", torch::nn::Linear(8 * 26 * 26, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(torch::relu(conv(x)).flatten(1)); }
  torch::nn::Conv2d conv;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main() {
  torch::manual_seed(0);
  Net net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
#ifdef WITH_DDP
  auto pg = ddp::init_process_group<ddp::gloo>();
  ddp::distributed_data_parallel dp(*net, pg);
  torch::manual_seed(pg.rank() + 1);
#endif
  for (int step = 0; step < 10; ++step) {
    auto x = torch::randn({16, 1, 28, 28});
    auto y = torch::randint(0, 10, {16});
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
#ifdef WITH_DDP
    dp.synchronize();
#endif
    opt.step();
    if (step == 9) std::printf("loss %f\n", loss.item<double>());
  }
}
