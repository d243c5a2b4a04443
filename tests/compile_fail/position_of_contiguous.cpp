// EXPECT: set_position needs an interleaved sampling policy
#include <ddp/sampler.hpp>

int main() {
  // Each rank of `contiguous` reads its own block: a count of consumed samples does not say which.
  ddp::distributed_sampler<ddp::sampling::contiguous> s(100, 2, 0);
  s.set_position(10);
}
