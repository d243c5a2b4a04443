// Data-parallel training of a model that is two plain vectors: fit y = 2x - 1 by
// SGD, each rank on its share of the data, gradients averaged by ddp.
//   ddprun --nproc-per-node 2 ./quickstart_train [batch size per rank, default 32]
#include <ddp/ddp.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

// Any type is a model once it lists its parameters with their gradients.
struct line {
  std::vector<float> w{0.0f}, b{0.0f}, dw{0.0f}, db{0.0f};
  template <class F> void for_each_parameter(F&& f) {
    f("w", w, dw);
    f("b", b, db);
  }
};

int main(int argc, char** argv) {
  auto pg = ddp::init_process_group<ddp::gloo>();
  const std::size_t batch_size = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 32;
  const std::size_t n = 960; // the data set: x = i / n, y = 2x - 1
  auto x = [&](std::size_t i) { return static_cast<float>(i) / static_cast<float>(n); };
  auto y = [&](std::size_t i) { return 2.0f * x(i) - 1.0f; };

  line model;
  ddp::distributed_data_parallel dp(model, pg); // checks the model on every rank, copies rank 0's
  ddp::distributed_sampler<ddp::sampling::shuffled> sampler(n, pg, {.seed = 0}); // as PyTorch shards
  for (int epoch = 0; epoch < 60; ++epoch) {
    sampler.set_epoch(epoch); // a new shuffle each epoch
    for (auto batch : ddp::batches(sampler, batch_size)) {
      model.dw[0] = model.db[0] = 0.0f; // backward: the mean squared error's gradient on this batch
      for (auto i : batch) {
        const float err = model.w[0] * x(i) + model.b[0] - y(i);
        model.dw[0] += 2.0f * err * x(i) / static_cast<float>(batch.size());
        model.db[0] += 2.0f * err / static_cast<float>(batch.size());
      }
      dp.synchronize();                 // the gradients are now the average over every rank
      model.w[0] -= 0.5f * model.dw[0]; // the same step on every rank keeps them equal
      model.b[0] -= 0.5f * model.db[0];
    }
    if (epoch == 0 || epoch == 59)
      std::printf("rank %d of %d: epoch %d: w = %.9g, b = %.9g\n", pg.rank(), pg.size(), epoch + 1,
                  static_cast<double>(model.w[0]), static_cast<double>(model.b[0]));
  }
  return std::abs(model.w[0] - 2.0f) < 1e-3f && std::abs(model.b[0] + 1.0f) < 1e-3f ? 0 : 1;
}
