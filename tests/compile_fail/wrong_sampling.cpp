// EXPECT: distributed_sampler<P> needs a sampling policy
#include <ddp/sampler.hpp>

struct not_a_policy {
  static std::vector<int> indices(std::size_t n) { return std::vector<int>(n); }
};

int main() {
  ddp::distributed_sampler<not_a_policy> s(100, 2, 0);
  (void)s;
}
