// The C++ side of tests/torch/python_ddp.py: trains the example's CNN with ddp
// from the initial weights and on the data Python wrote, and writes the final
// parameters for Python to compare with its own DistributedDataParallel's.
// usage: python_twin DIR STEPS PER_RANK   (DIR holds init.bin, x.bin, y.bin)
#include "../../examples/libtorch_fashion_mnist/cnn.hpp"

#include <ddp/ddp.hpp>
#include <ddp/torch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

namespace {

void read_into(const std::string& path, void* to, std::size_t bytes, std::size_t offset = 0) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  if (!f.read(static_cast<char*>(to), static_cast<std::streamsize>(bytes)))
    throw std::runtime_error("python_twin: cannot read " + std::to_string(bytes) + " bytes at " +
                             std::to_string(offset) + " of " + path);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: python_twin DIR STEPS PER_RANK\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int steps = std::stoi(argv[2]);
  const std::int64_t per_rank = std::stoll(argv[3]);
  torch::set_num_threads(1);
  try {
    auto pg = ddp::init_process_group<ddp::gloo>();
    example::Cnn net;
    std::size_t offset = 0;
    {
      torch::NoGradGuard no_grad;
      for (auto& p : net->parameters()) {
        const auto bytes = static_cast<std::size_t>(p.numel()) * sizeof(float);
        read_into(dir + "/init.bin", p.data_ptr(), bytes, offset);
        offset += bytes;
      }
    }
    ddp::distributed_data_parallel dp(*net, pg);
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    const std::int64_t global = per_rank * pg.size();
    auto x = torch::empty({steps * global, 1, 28, 28});
    auto y = torch::empty({steps * global}, torch::kInt64);
    read_into(dir + "/x.bin", x.data_ptr(), static_cast<std::size_t>(x.numel()) * sizeof(float));
    read_into(dir + "/y.bin", y.data_ptr(), static_cast<std::size_t>(y.numel()) * sizeof(std::int64_t));
    for (int s = 0; s < steps; ++s) {
      const auto first = s * global + pg.rank() * per_rank;
      opt.zero_grad();
      torch::nn::functional::cross_entropy(net->forward(x.narrow(0, first, per_rank)),
                                           y.narrow(0, first, per_rank))
          .backward();
      dp.synchronize();
      opt.step();
    }
    if (pg.rank() == 0) {
      std::ofstream out(dir + "/cpp_final.bin", std::ios::binary);
      for (auto& p : net->parameters())
        out.write(static_cast<const char*>(p.data_ptr()), static_cast<std::streamsize>(p.numel() * 4));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "python_twin: %s\n", e.what());
    return 1;
  }
}
