// The numeric kernels under ddp/detail/numeric/: half and bfloat16
// conversions (half.hpp) and the reduce, scale and convert loops (elementwise.hpp).
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/detail/numeric/half.hpp>

#include <doctest/doctest.h>

#if __has_include(<Eigen/Core>) && !defined(DDP_NO_EIGEN)
#include <Eigen/Core> // ddp declares Eigen's templates; a file with Eigen objects includes Eigen
#endif

#include <cmath>
#include <cstdint>
#include <vector>

TEST_CASE("half conversions round-trip every finite half exactly") {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    auto h = static_cast<std::uint16_t>(bits);
    if ((h & 0x7c00u) == 0x7c00u) continue; // inf and nan
    float f = ddp::detail::half_bits_to_float(h);
    REQUIRE(ddp::detail::float_to_half_bits(f) == h);
  }
  CHECK(ddp::detail::half_bits_to_float(0x3c00) == 1.0f);
  CHECK(ddp::detail::float_to_half_bits(65520.0f) == 0x7c00);           // rounds to inf
  CHECK(ddp::detail::float_to_half_bits(1.0f + 1.0f / 4096) == 0x3c00); // ties to even
  CHECK(std::isnan(ddp::detail::half_bits_to_float(ddp::detail::float_to_half_bits(NAN))));
#ifdef DDP_HAS_EIGEN
  for (float f : {0.1f, -3.75f, 1e-6f, 6e-8f, 60000.0f, 1.0f / 3})
    CHECK(ddp::detail::float_to_half_bits(f) == Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(f)));
  for (float f : {0.1f, -3.75f, 1e-30f, 3e38f, 1.0f / 3})
    CHECK(ddp::detail::float_to_bf16_bits(f) == Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(f)));
#endif
}

TEST_CASE("reduce kernels") {
  std::vector<float> a{1, -2, 3}, b{4, 5, -6}, out(3);
  ddp::detail::reduce_for(ddp::dtype::f32, ddp::op::sum)(out.data(), a.data(), b.data(), 3);
  CHECK(out == std::vector<float>{5, 3, -3});
  ddp::detail::reduce_for(ddp::dtype::f32, ddp::op::min)(out.data(), a.data(), b.data(), 3);
  CHECK(out == std::vector<float>{1, -2, -6});
  ddp::detail::reduce_for(ddp::dtype::f32, ddp::op::max)(out.data(), a.data(), b.data(), 3);
  CHECK(out == std::vector<float>{4, 5, 3});
  ddp::detail::reduce_for(ddp::dtype::f32, ddp::op::product)(out.data(), a.data(), b.data(), 3);
  CHECK(out == std::vector<float>{4, -10, -18});
  std::vector<std::int64_t> x{1, 2}, y{3, 4}, z(2);
  ddp::detail::reduce_for(ddp::dtype::i64, ddp::op::sum)(z.data(), x.data(), y.data(), 2);
  CHECK(z == std::vector<std::int64_t>{4, 6});
  ddp::detail::scale_in_place(a.data(), 3, ddp::dtype::f32, 0.5);
  CHECK(a == std::vector<float>{0.5f, -1, 1.5f});
  CHECK_THROWS_AS(ddp::detail::scale_in_place(x.data(), 2, ddp::dtype::i64, 0.5), ddp::error);
}

TEST_CASE("converting kernels scale in the same pass, and round once") {
  std::vector<double> src{1.0, -2.5, 1.0 / 3};
  std::vector<float> dst(3);
  ddp::detail::copy_scaled(dst.data(), ddp::dtype::f32, src.data(), ddp::dtype::f64, 3, 0.5);
  CHECK(dst == std::vector<float>{0.5f, -1.25f, static_cast<float>(1.0 / 6)});
  std::vector<std::uint16_t> half(3);
  ddp::detail::copy_scaled(half.data(), ddp::dtype::f16, dst.data(), ddp::dtype::f32, 3, 2.0);
  CHECK(ddp::detail::half_bits_to_float(half[0]) == 1.0f);
  CHECK(ddp::detail::half_bits_to_float(half[1]) == -2.5f);
}
