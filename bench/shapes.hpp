// Gradient shapes the synchronization benchmarks use (CPU and GPU alike).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace bench {

/// ResNet-50 (torchvision) parameter sizes in registration order: 161 tensors, 25 557 032 floats
/// (the same list as ../shared/gpu/shapes.py, which PyTorch's anchor uses).
inline std::vector<std::size_t> resnet50_sizes() {
  std::vector<std::size_t> s{64 * 3 * 7 * 7, 64, 64};
  std::size_t in = 64;
  for (auto [planes, blocks] : {std::pair<std::size_t, int>{64, 3}, {128, 4}, {256, 6}, {512, 3}}) {
    for (int b = 0; b < blocks; ++b) {
      std::size_t out = planes * 4;
      for (std::size_t x :
           {planes * in, planes, planes, planes * planes * 9, planes, planes, out * planes, out, out})
        s.push_back(x);
      if (b == 0) s.insert(s.end(), {out * in, out, out});
      in = out;
    }
  }
  s.insert(s.end(), {1000 * 2048, 1000});
  return s;
}

} // namespace bench
