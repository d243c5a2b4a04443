// The bucket plan is a pure function: policy assignment + dtypes + sizes +
// addresses + backend capabilities -> one path per bucket. No process group.
#include <ddp/detail/data_parallel/bucket_order.hpp>
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

// Buckets in the order backward runs: the policies' ordered form and the
// pieces of the rebuild that need no process group.
namespace {
std::vector<ddp::parameter_desc> descs_of(const std::vector<std::size_t>& bytes) {
  std::vector<ddp::parameter_desc> d;
  for (auto b : bytes)
    d.push_back({"p", ddp::dtype::f32, b / 4, b});
  return d;
}
using order_t = std::vector<std::size_t>;
using buckets_t = std::vector<std::vector<std::size_t>>;
} // namespace

TEST_CASE("size_capped and per_tensor fill buckets in a given order, under the same caps") {
  static_assert(ddp::reorderable_bucketing_policy<ddp::bucketing::size_capped<>>);
  static_assert(ddp::reorderable_bucketing_policy<ddp::bucketing::per_tensor>);
  static_assert(!ddp::reorderable_bucketing_policy<ddp::bucketing::single_buffer>,
                "one buffer may be a layout the user relies on: not reordered");
  using capped = ddp::bucketing::size_capped<100, 40>;
  const auto d = descs_of({16, 16, 16, 60, 40, 8});
  // Without an order: reverse registration, as before.
  CHECK(capped::assign(d) == capped::assign(d, order_t{5, 4, 3, 2, 1, 0}));
  CHECK(capped::assign(d) == buckets_t{{5}, {4, 3}, {2, 1, 0}});
  // In backward's order: the first bucket holds the first gradients, at most 40 bytes (a
  // single tensor may exceed it), the others at most 100.
  CHECK(capped::assign(d, order_t{0, 1, 2, 3, 4, 5}) == buckets_t{{0, 1}, {2, 3}, {4, 5}});
  CHECK(capped::assign(d, order_t{4, 3, 0, 1, 2, 5}) ==
        buckets_t{{4}, {3, 0, 1}, {2, 5}}); // 60 + 16 + 16 + 16 > 100
  CHECK(capped::assign(d, order_t{3, 0, 1, 2, 4, 5}) == buckets_t{{3}, {0, 1, 2, 4, 5}});
  CHECK(capped::assign(d, order_t{3, 4, 5, 0, 1, 2}) == buckets_t{{3}, {4, 5, 0, 1, 2}});
  CHECK(ddp::bucketing::per_tensor::assign(d, order_t{2, 0, 1, 5, 4, 3}) ==
        buckets_t{{2}, {0}, {1}, {5}, {4}, {3}});
  CHECK(ddp::bucketing::per_tensor::assign(d) == buckets_t{{5}, {4}, {3}, {2}, {1}, {0}});
}

TEST_CASE("the rebuild's order: marked ready first, in mark order, then the rest last first") {
  using ddp::detail::backward_order;
  CHECK(backward_order(order_t{}, 4) == order_t{3, 2, 1, 0});
  CHECK(backward_order(order_t{0, 1, 2, 3}, 4) == order_t{0, 1, 2, 3});
  CHECK(backward_order(order_t{2, 0}, 5) == order_t{2, 0, 4, 3, 1});
  CHECK(backward_order(order_t{1, 1, 9}, 3) == order_t{1, 2, 0}); // repeats and strays ignored
}

TEST_CASE("rebuilt buckets keep an arena's contiguity where their members are neighbours") {
  // An arena: slot k at offsets laid out in reverse registration order.
  fake_model m({4, 6, 2, 8}, {16, 10, 8, 0});
  ddp::detail::bucket_plan first = make_bucket_plan({{3, 2, 1, 0}}, m.params, same, plain);
  REQUIRE(first.buckets[0].path == bucket_path::in_place);
  CHECK(ddp::detail::laid_out_for(first));
  CHECK(ddp::detail::in_place_bytes(first) == 20 * sizeof(float));
  auto whole = [](std::span<const ddp::parameter_desc> p, std::span<const std::size_t> o) {
    return ddp::bucketing::size_capped<1000, 1000>::assign(p, o);
  };
  auto pairs = [](std::span<const ddp::parameter_desc> p, std::span<const std::size_t> o) {
    return ddp::bucketing::size_capped<40, 40>::assign(p, o);
  };
  auto request = [&](ddp::detail::ordered_assign a) {
    return ddp::detail::bucket_order_request{m.params, {}, a, same, plain, nullptr, false, 0, 1, 1};
  };
  // Backward marks 0, 1, 2, 3: one bucket as before, its members in memory order again.
  const order_t forward{0, 1, 2, 3};
  auto same_members = ddp::detail::plan_in_order(request(whole), forward);
  CHECK(same_members.buckets[0].params == order_t{3, 2, 1, 0});
  CHECK(same_members.buckets[0].path == bucket_path::in_place);
  // Two buckets of neighbours: each still one range, bucket 0 the first marked.
  auto split = ddp::detail::plan_in_order(request(pairs), forward);
  REQUIRE(split.buckets.size() == 2);
  CHECK(split.buckets[0].params == order_t{1, 0});
  CHECK(split.buckets[1].params == order_t{3, 2});
  CHECK(ddp::detail::in_place_bytes(split) == 20 * sizeof(float));
  // Members that are not neighbours are packed: fewer bytes in place, which keeps the first plan.
  auto scattered = ddp::detail::plan_in_order(request(pairs), order_t{0, 2, 1, 3});
  CHECK(scattered.buckets[0].params == order_t{2, 0});
  CHECK(scattered.buckets[0].path == bucket_path::packed);
  CHECK(ddp::detail::in_place_bytes(scattered) < ddp::detail::in_place_bytes(first));
  // Separate allocations lie for no bucket: their buckets are rebuilt whatever the paths.
  fake_model apart({4, 6}, {0, 100});
  CHECK_FALSE(ddp::detail::laid_out_for(make_bucket_plan({{1, 0}}, apart.params, same, plain)));
}
