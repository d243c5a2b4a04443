// The LibTorch example's epoch the way C++ users synchronize today: LibTorch's
// c10d::ProcessGroupGloo, one all-reduce per gradient after backward (PyTorch's
// own C++ distributed example), same CNN, data order, batch, optimizer and
// evaluation as examples/libtorch_fashion_mnist. One JSON line (rank 0).
// Launched by ddprun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); its store
// listens on MASTER_PORT + 1, beside ddprun's.
//   ddprun --nproc-per-node 2 --no-prefix build/bench/bench_torch_c10d_epoch --limit 12000
#include "../examples/libtorch_fashion_mnist/cnn.hpp"

#include <ddp/data/idx.hpp>
#include <ddp/sampler.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v)
    throw std::runtime_error(std::string("bench_torch_c10d_epoch: ") + name +
                             " is not set: run it under ddprun");
  return std::stoi(v);
}

struct tensors {
  torch::Tensor x, y;
};
tensors load(const std::string& dir, const std::string& kind) {
  auto d = ddp::data::read_idx(dir + "/" + kind + "-images-idx3-ubyte.gz",
                               dir + "/" + kind + "-labels-idx1-ubyte.gz", 10);
  const auto n = static_cast<std::int64_t>(d.size());
  return {torch::from_blob(d.images.data(), {n, 1, 28, 28}).clone(),
          torch::from_blob(d.labels.data(), {n}, torch::kUInt8).to(torch::kInt64)};
}

} // namespace

int main(int argc, char** argv) {
  std::size_t limit = 0;
  std::string data = "/usr/share/datasets/fashion-mnist";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--limit") limit = std::stoul(argv[i + 1]);
    if (std::string(argv[i]) == "--data") data = argv[i + 1];
  }
  torch::set_num_threads(1);
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(env_int("MASTER_PORT") + 1);
  so.isServer = rank == 0;
  so.numWorkers = world;
  auto store = c10::make_intrusive<c10d::TCPStore>(std::getenv("MASTER_ADDR"), so);
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  c10d::ProcessGroupGloo pg(store, rank, world, opts);

  auto train = load(data, "train");
  auto test = load(data, "t10k");
  const auto n = limit ? std::min<std::size_t>(limit, static_cast<std::size_t>(train.y.size(0)))
                       : static_cast<std::size_t>(train.y.size(0));
  torch::manual_seed(0);
  example::Cnn net;
  for (auto& p : net->parameters()) { // rank 0's weights everywhere, as DDP's constructor does
    std::vector<torch::Tensor> t{p.data()};
    pg.broadcast(t)->wait();
  }
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  ddp::distributed_sampler<> sampler(n, world, rank, {.seed = 0});
  std::vector<torch::Tensor> barrier{torch::zeros({1})};
  pg.allreduce(barrier)->wait();
  const auto t0 = std::chrono::steady_clock::now();
  sampler.set_epoch(0);
  auto idx = sampler.indices();
  const std::size_t batch = 64, steps = (idx.size() + batch - 1) / batch;
  for (std::size_t s = 0; s < steps; ++s) {
    const auto first = s * batch, count = std::min(batch, idx.size() - first);
    auto rows =
        torch::tensor(std::vector<std::int64_t>(idx.begin() + static_cast<std::ptrdiff_t>(first),
                                                idx.begin() + static_cast<std::ptrdiff_t>(first + count)));
    for (auto& g : opt.param_groups())
      static_cast<torch::optim::SGDOptions&>(g.options())
          .lr(0.5 * 0.05 *
              (1 + std::cos(3.14159265358979 * static_cast<double>(s) / static_cast<double>(steps))));
    opt.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(train.x.index_select(0, rows)),
                                         train.y.index_select(0, rows))
        .backward();
    for (auto& p : net->parameters()) { // one all-reduce per gradient, after backward
      std::vector<torch::Tensor> t{p.grad()};
      pg.allreduce(t)->wait();
      p.grad().div_(world);
    }
    opt.step();
  }
  const double train_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  torch::NoGradGuard no_grad;
  auto counts = torch::zeros({2}, torch::kFloat64);
  for (std::int64_t i = rank * 1000; i < test.y.size(0); i += world * 1000) {
    const auto k = std::min<std::int64_t>(1000, test.y.size(0) - i);
    auto pred = net->forward(test.x.narrow(0, i, k)).argmax(1);
    counts[0] += pred.eq(test.y.narrow(0, i, k)).sum().item<double>();
    counts[1] += static_cast<double>(k);
  }
  std::vector<torch::Tensor> c{counts};
  pg.allreduce(c)->wait();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == 0)
    std::printf(
        "{\"impl\":\"c10d_per_gradient\",\"ranks\":%d,\"test_acc\":%.4f,\"epoch_s\":%.4f,\"train_s\":%.4f}\n",
        world, (counts[0] / counts[1]).item<double>(), secs, train_secs);
  return 0;
}
