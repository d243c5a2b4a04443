// What the LibTorch consumers build (with second.cpp, a second file that
// includes ddp): a LibTorch module under distributed_data_parallel, one
// backward whose loss each rank scales by rank + 1, so every gradient
// element must come out as the mean of 1..size after synchronize().
#include <ddp/ddp.hpp>
#include <ddp/torch.hpp>

// What this file uses of LibTorch (ddp's headers include only what they use).
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <string>

int world_size_from_a_second_file(ddp::process_group<ddp::gloo>& pg); // second.cpp

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  torch::nn::Linear net(3, 2);
  ddp::distributed_data_parallel dp(*net, pg);
  auto loss = net->forward(torch::ones({4, 3})).sum() * static_cast<double>(pg.rank() + 1);
  loss.backward();
  dp.synchronize();
  // d loss / d weight = 4 (rank + 1) per element, d loss / d bias = 4 (rank + 1).
  const double mean = 4.0 * (pg.size() + 1) / 2.0;
  const bool ok = net->weight.grad().eq(mean).all().item<bool>() &&
                  net->bias.grad().eq(mean).all().item<bool>() &&
                  world_size_from_a_second_file(pg) == pg.size();
  std::printf("consumer rank %d/%d ddp %s with LibTorch: %s\n", pg.rank(), pg.size(),
              std::string(ddp::version().string).c_str(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
