#include <ddp/tensor.hpp>

#include <doctest/doctest.h>

#if __has_include(<Eigen/Core>) && !defined(DDP_NO_EIGEN)
#include <Eigen/Core> // ddp declares Eigen's templates; a file with Eigen objects includes Eigen
#endif

#include <cmath>
#include <cstring>

TEST_CASE("containers are tensors") {
  std::vector<float> v(5);
  std::array<double, 3> a{};
  std::span<std::int32_t> s;
  static_assert(ddp::tensor<std::vector<float>>);
  static_assert(ddp::tensor<const std::vector<float>>);
  static_assert(ddp::tensor<std::array<double, 3>>);
  static_assert(ddp::tensor<std::span<std::int32_t>>);
  static_assert(!ddp::tensor<std::vector<bool>>);
  static_assert(!ddp::tensor<std::vector<std::string>>);
  static_assert(!ddp::tensor<int>);
  CHECK(ddp::as_span(v).size() == 5);
  CHECK(ddp::as_span(a).data() == a.data());
  CHECK(ddp::as_span(s).empty());
  static_assert(ddp::dtype_v<float> == ddp::dtype::f32);
  static_assert(ddp::dtype_v<std::int64_t> == ddp::dtype::i64);
}

template <class T> constexpr bool spannable = requires(T&& t) { ddp::as_span(static_cast<T&&>(t)); };

TEST_CASE("views: as_span takes a temporary view, not a temporary that owns its elements") {
  std::vector<float> v(4);
  CHECK(ddp::as_span(std::span<float>(v).subspan(1)).data() == v.data() + 1);
  CHECK(ddp::as_span(ddp::device_span<float>{v.data(), 2}).size() == 2);
  static_assert(ddp::tensor_view<std::span<float>> && ddp::tensor_view<const std::span<const double, 3>>);
  static_assert(ddp::tensor_view<ddp::device_span<float>>);
  static_assert(!ddp::tensor_view<std::vector<float>> && !ddp::tensor_view<std::array<float, 2>>);
  static_assert(spannable<std::span<float>> && spannable<const std::vector<float>&>);
  static_assert(!spannable<std::vector<float>>); // a temporary vector: the span would dangle
}

TEST_CASE("device_span is a device tensor") {
  ddp::device_span<float> d{nullptr, 7};
  static_assert(ddp::tensor<ddp::device_span<float>>);
  static_assert(ddp::on_device_v<ddp::device_span<float>>);
  static_assert(!ddp::on_device_v<std::vector<float>>);
  CHECK(ddp::as_span(d).size() == 7);
}

#ifdef DDP_HAS_EIGEN
TEST_CASE("Eigen dense objects are tensors") {
  Eigen::MatrixXf m(3, 4);
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r(2, 5);
  Eigen::ArrayXd arr(6);
  std::vector<float> store(12);
  Eigen::Map<Eigen::MatrixXf> map(store.data(), 3, 4);
  Eigen::Ref<Eigen::MatrixXf> ref(m);
  Eigen::Matrix<Eigen::half, 2, 2> h;
  Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, 1> b(4);
  CHECK(ddp::as_span(m).size() == 12);
  CHECK(ddp::as_span(r).size() == 10);
  CHECK(ddp::as_span(arr).size() == 6);
  CHECK(ddp::as_span(map).data() == store.data());
  CHECK(ddp::as_span(ref).data() == m.data());
  CHECK(ddp::as_span(h).size() == 4);
  CHECK(ddp::as_span(b).size() == 4);
  static_assert(ddp::dtype_v<ddp::tensor_value_t<decltype(h)>> == ddp::dtype::f16);
  static_assert(ddp::dtype_v<ddp::tensor_value_t<decltype(b)>> == ddp::dtype::bf16);
  // A column of a column-major matrix is contiguous...
  Eigen::Ref<Eigen::VectorXf> col(m.col(1));
  CHECK(ddp::as_span(col).size() == 3);
  // ...a block of several columns is not, and says so at run time.
  Eigen::Ref<Eigen::MatrixXf> blk(m.block(0, 0, 2, 2));
  CHECK_THROWS_AS(ddp::as_span(blk), ddp::error);
  // A row of a column-major matrix has a non-unit inner stride: not a tensor at all.
  static_assert(!ddp::tensor<decltype(m.row(0))>);
  // Maps, Refs and blocks are views; a Matrix owns its elements.
  static_assert(ddp::tensor_view<decltype(map)> && ddp::tensor_view<decltype(ref)>);
  static_assert(ddp::tensor_view<decltype(m.col(1))> && !ddp::tensor_view<Eigen::MatrixXf>);
}
#endif
