// bench/compile_cost: a user's own small program, logistic regression on
// made-up data, trained data-parallel (what a first program looks like).
#include <ddp/ddp.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

struct logistic {
  std::vector<float> w = std::vector<float>(8, 0.0f), b{0.0f};
  std::vector<float> dw = std::vector<float>(8, 0.0f), db{0.0f};
  template <class F> void for_each_parameter(F&& f) {
    f("w", w, dw);
    f("b", b, db);
  }
  float predict(const float* x) const {
    float z = b[0];
    for (std::size_t j = 0; j < w.size(); ++j)
      z += w[j] * x[j];
    return 1.0f / (1.0f + std::exp(-z));
  }
};

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  const std::size_t n = 4096, d = 8;
  std::vector<float> x(n * d), y(n);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < n; ++i) {
    float s = 0;
    for (std::size_t j = 0; j < d; ++j)
      s += (x[i * d + j] = normal(gen)) * (j % 2 ? 1.0f : -0.5f);
    y[i] = s > 0 ? 1.0f : 0.0f;
  }
  logistic model;
  ddp::distributed_data_parallel dp(model, pg);
  ddp::distributed_sampler<ddp::sampling::shuffled> sampler(n, pg, {.seed = 1});
  for (int epoch = 0; epoch < 5; ++epoch) {
    sampler.set_epoch(epoch);
    for (auto batch : ddp::batches(sampler, 64)) {
      std::fill(model.dw.begin(), model.dw.end(), 0.0f);
      model.db[0] = 0.0f;
      for (auto i : batch) {
        const float err = model.predict(&x[i * d]) - y[i];
        for (std::size_t j = 0; j < d; ++j)
          model.dw[j] += err * x[i * d + j] / static_cast<float>(batch.size());
        model.db[0] += err / static_cast<float>(batch.size());
      }
      dp.synchronize();
      for (std::size_t j = 0; j < d; ++j)
        model.w[j] -= 0.5f * model.dw[j];
      model.b[0] -= 0.5f * model.db[0];
    }
  }
  if (pg.rank() == 0) std::printf("w0 = %f\n", static_cast<double>(model.w[0]));
}
