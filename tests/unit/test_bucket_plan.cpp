// The bucket plan is a pure function: policy assignment + dtypes + sizes +
// addresses + backend capabilities -> one path per bucket. No process group.
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/reduction.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

using ddp::bucket_path;
using ddp::detail::make_bucket_plan;
using ddp::detail::plan_capabilities;
using ddp::detail::tensor_slot;

constexpr plan_capabilities ring{.fragments = true};
constexpr plan_capabilities plain{.fragments = false};

/// Parameters of the given sizes whose gradients lie at the given element
/// offsets of one float array (so contiguity is a matter of the offsets).
struct fake_model {
  std::vector<float> storage;
  std::vector<tensor_slot> params;
  fake_model(std::vector<std::size_t> sizes, std::vector<std::size_t> at, ddp::dtype type = ddp::dtype::f32) {
    std::size_t end = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      end = std::max(end, at[i] + sizes[i]);
    storage.resize(end);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      std::string name(1, 'p'); // not "p" + std::to_string(i): g++ 12's false -Wrestrict at -O3
      name += std::to_string(i);
      params.push_back({name, type, nullptr, storage.data() + at[i], sizes[i]});
    }
  }
};

constexpr auto same = &ddp::reduction::mean::wire;
constexpr auto bf16 = &ddp::reduction::bf16_compressed_mean::wire;

} // namespace

TEST_CASE("contiguous gradients in bucket order are reduced in place") {
  // Buckets in reverse registration order, as size_capped makes them: p1 then p0.
  fake_model m({4, 6}, {6, 0});
  auto plan = make_bucket_plan({{1, 0}}, m.params, same, ring);
  REQUIRE(plan.buckets.size() == 1);
  CHECK(plan.buckets[0].path == bucket_path::in_place);
  CHECK(plan.buckets[0].elements == 10);
  CHECK(plan.buckets[0].offsets == std::vector<std::size_t>{0, 6});
  CHECK(plan.bucket_of == std::vector<std::size_t>{0, 0});
  CHECK(make_bucket_plan({{1, 0}}, m.params, same, plain).buckets[0].path == bucket_path::in_place);
}

TEST_CASE("scattered small gradients are packed; scattered large ones go as fragments on a ring") {
  fake_model small({4, 6}, {0, 100}); // a gap: not contiguous
  CHECK(make_bucket_plan({{0, 1}}, small.params, same, ring).buckets[0].path == bucket_path::packed);
  const std::size_t big = ddp::detail::unpacked_min_average_bytes / sizeof(float);
  fake_model large({big, big}, {0, big + 1});
  CHECK(make_bucket_plan({{0, 1}}, large.params, same, ring).buckets[0].path == bucket_path::fragments);
  // Without a fragment ring there is nothing but packing.
  CHECK(make_bucket_plan({{0, 1}}, large.params, same, plain).buckets[0].path == bucket_path::packed);
  // Contiguous, but in the wrong order for the bucket: not in place.
  fake_model swapped({4, 6}, {0, 4});
  CHECK(make_bucket_plan({{1, 0}}, swapped.params, same, plain).buckets[0].path == bucket_path::packed);
}

TEST_CASE("a compressed wire type always packs") {
  fake_model m({4, 6}, {6, 0});
  auto plan = make_bucket_plan({{1, 0}}, m.params, bf16, ring);
  CHECK(plan.buckets[0].path == bucket_path::packed);
  CHECK(plan.buckets[0].wire_type == ddp::dtype::bf16);
  CHECK(plan.buckets[0].param_type == ddp::dtype::f32);
}

TEST_CASE("paths follow moved storage") {
  fake_model m({4, 6}, {6, 0});
  auto plan = make_bucket_plan({{1, 0}}, m.params, same, ring);
  REQUIRE(plan.buckets[0].path == bucket_path::in_place);
  std::vector<float> elsewhere(4);
  m.params[0].grad = elsewhere.data();
  ddp::detail::choose_paths(plan, m.params, ring);
  CHECK(plan.buckets[0].path == bucket_path::packed);
}

TEST_CASE("a bad assignment is refused with the parameter's name") {
  fake_model m({4, 6, 2}, {0, 4, 10});
  auto message = [&](std::vector<std::vector<std::size_t>> a) {
    try {
      make_bucket_plan(a, m.params, same, ring);
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::config);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message({{0, 1}}).find("left parameter 'p2' out") != std::string::npos);
  CHECK(message({{0, 1}, {1, 2}}).find("put parameter 'p1' in two buckets") != std::string::npos);
  CHECK(message({{0, 1, 2}, {}}).find("empty bucket") != std::string::npos);
  CHECK(message({{0, 1, 7}}).find("named parameter 7 of 3") != std::string::npos);
  fake_model mixed({4, 6}, {0, 4});
  mixed.params[1].type = ddp::dtype::f64;
  CHECK_THROWS_WITH_AS(make_bucket_plan({{0, 1}}, mixed.params, same, ring),
                       doctest::Contains("mixed dtypes in one bucket ('p1' is float64)"), ddp::error);
}
