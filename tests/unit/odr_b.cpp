#include <ddp/data/cifar10.hpp>
#include <ddp/data/idx.hpp>
#include <ddp/ddp.hpp>

#include <string>

std::string version_from_b() { return std::string(ddp::version().string); }

std::size_t sampler_size_from_b() {
  ddp::distributed_sampler<> s(10, 3, 1);
  return s.size();
}
