// C-style models and temporary views: what the model concept accepts compiles
// and trains, and every collective takes a temporary view (world 1, file://).
#include <ddp/ddp.hpp>

#include <Eigen/Core>
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

/// A world of one over file:// in a directory of its own: no port, no launcher.
struct solo {
  std::filesystem::path dir;
  ddp::process_group<ddp::gloo> pg;
  solo() : dir(make_dir()), pg(ddp::init_process_group<ddp::gloo>(options(dir))) {}
  ~solo() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  static std::filesystem::path make_dir() {
    std::string t = (std::filesystem::temp_directory_path() / "ddp_c_style_XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    return t;
  }
  static ddp::init_options options(const std::filesystem::path& d) {
    ddp::init_options o;
    o.init_method = "file://" + d.string();
    o.rank = 0;
    o.world_size = 1;
    return o;
  }
};

/// A linear model y = W x + b in raw arrays, as a C trainer keeps them; its
/// walk hands out temporary spans.
struct c_model {
  static constexpr std::size_t in = 4, out = 3;
  std::vector<float> storage = std::vector<float>(2 * (in * out + out) + out);
  float* w = storage.data();
  float* b = w + in * out;
  float* dw = b + out;
  float* db = dw + in * out;
  float* seen = db + out; // a buffer: the last batch's mean target

  explicit c_model(unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> n(0.f, 0.5f);
    for (std::size_t i = 0; i < in * out + out; ++i)
      w[i] = n(gen);
  }
  template <class F> void for_each_parameter(F&& f) {
    f("fc.weight", std::span<float>(w, in * out), std::span<float>(dw, in * out));
    f("fc.bias", std::span<float>(b, out), std::span<float>(db, out));
  }
  template <class F> void for_each_buffer(F&& f) { f("seen", std::span<float>(seen, out)); }

  /// Mean squared error's gradient over a batch of `count` samples.
  void backward(const std::vector<float>& x, const std::vector<float>& y, std::size_t count) {
    std::fill(dw, dw + in * out, 0.f);
    std::fill(db, db + out, 0.f);
    std::fill(seen, seen + out, 0.f);
    for (std::size_t s = 0; s < count; ++s)
      for (std::size_t o = 0; o < out; ++o) {
        float p = b[o];
        for (std::size_t i = 0; i < in; ++i)
          p += w[o * in + i] * x[s * in + i];
        const float g = 2.f * (p - y[s * out + o]) / static_cast<float>(count);
        db[o] += g;
        for (std::size_t i = 0; i < in; ++i)
          dw[o * in + i] += g * x[s * in + i];
        seen[o] += y[s * out + o] / static_cast<float>(count);
      }
  }
  void sgd(float lr) {
    for (std::size_t i = 0; i < in * out + out; ++i)
      w[i] -= lr * dw[i]; // w and b are one run, as are dw and db
  }
};

std::vector<float> randoms(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v)
    x = u(gen);
  return v;
}

/// Parameters as an Eigen map and a span, gradients as ddp::arena slot and map: all temporaries.
struct mixed {
  std::vector<float> w = std::vector<float>(6, 1.f), b = std::vector<float>(2, 2.f);
  ddp::arena<float> grads{std::vector<std::size_t>{6, 2}};
  template <class F> void for_each_parameter(F&& f) {
    f("w", Eigen::Map<Eigen::MatrixXf>(w.data(), 2, 3), grads.slot(0));
    f("b", std::span<float>(b), grads.matrix(1, 2, 1));
  }
};

/// Device memory, walked as temporary device_spans.
struct on_device {
  float* p = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  template <class F> void for_each_parameter(F&& f) {
    f("w", ddp::device_span<float>{p, 4}, ddp::device_span<float>{p + 4, 4});
  }
};

} // namespace

TEST_CASE("a C-style model whose walk passes temporary spans trains under distributed_data_parallel") {
  static_assert(ddp::model<c_model> && ddp::model_with_buffers<c_model>);
  solo s;
  c_model local(1), reference(1);
  ddp::distributed_data_parallel dp(local, s.pg);
  CHECK(dp.num_parameters() == 2);
  CHECK(dp.parameter_name(0) == "fc.weight");
  const std::vector<float> before(local.w, local.w + c_model::in * c_model::out);
  constexpr std::size_t batch = 8;
  for (unsigned step = 0; step < 5; ++step) {
    const auto x = randoms(batch * c_model::in, 10 + step), y = randoms(batch * c_model::out, 20 + step);
    local.backward(x, y, batch);
    dp.mark_grad_ready(std::span<float>(local.db, c_model::out)); // a temporary view marks too
    dp.synchronize();
    local.sgd(0.1f);
    reference.backward(x, y, batch);
    reference.sgd(0.1f);
  }
  // World 1: the mean over one rank is the rank's own gradient, bit for bit.
  CHECK(local.storage == reference.storage);
  CHECK(std::vector<float>(local.w, local.w + c_model::in * c_model::out) != before);
}

TEST_CASE("a walk may pass Eigen maps, ddp::arena slots and device_spans as temporaries") {
  solo s;
  mixed m;
  ddp::distributed_data_parallel<mixed, ddp::gloo, ddp::bucketing::single_buffer> dp(m, s.pg);
  REQUIRE(dp.buckets().size() == 1);
  CHECK(dp.buckets()[0].path == ddp::bucket_path::in_place); // the arena's layout, through temporaries
  std::iota(m.grads.slot(0).begin(), m.grads.slot(0).end(), 1.f);
  dp.synchronize();
  CHECK(m.grads.slot(0)[5] == 6.f);

  // The walk records device memory without touching it: the pointers here are never read.
  on_device d;
  const auto slots = ddp::detail::collect_parameters(d);
  REQUIRE(slots.size() == 1);
  CHECK(slots[0].on_device);
  CHECK(slots[0].grad == static_cast<void*>(d.p + 4));
  CHECK(ddp::detail::same_storage(d, slots, {}));
}

TEST_CASE("every collective takes temporary views, blocking and async") {
  solo s;
  auto& pg = s.pg;
  std::vector<float> x{1, 2, 3, 4};
  pg.all_reduce(std::span<float>(x.data(), 2), ddp::op::max);
  pg.all_reduce_async(std::span<float>(x), ddp::op::sum).wait();
  pg.broadcast(std::span<float>(x), 0);
  pg.broadcast_async(ddp::as_span(x), 0).wait();
  CHECK(x == std::vector<float>{1, 2, 3, 4});

  std::vector<float> out(4);
  pg.all_gather(std::vector<float>{5, 6, 7, 8},
                std::span<float>(out)); // a temporary input is fine when blocking
  CHECK(out == std::vector<float>{5, 6, 7, 8});
  pg.all_gather_async(std::span<const float>(x), std::span<float>(out)).wait();
  CHECK(out == x);
  pg.reduce_scatter(std::vector<float>{9, 9, 9, 9}, std::span<float>(out), ddp::op::sum);
  CHECK(out == std::vector<float>{9, 9, 9, 9});
  pg.reduce_scatter_async(std::span<float>(x), std::span<float>(out)).wait();
  CHECK(out == x);

  // Eigen: a map and a column of a column-major matrix, as temporaries.
  Eigen::MatrixXd m = Eigen::MatrixXd::Constant(3, 2, 1.5);
  pg.all_reduce(m.col(1), ddp::op::avg);
  pg.all_reduce_async(Eigen::Map<Eigen::VectorXd>(m.data(), 3)).wait();
  CHECK(m(2, 1) == 1.5);
}

TEST_CASE("flat_model: walks from the highest offset down, finds tensors by name, refuses overlaps") {
  std::vector<float> p(10), g(10);
  ddp::flat_model m(p.data(), g.data(), {{"a", 0, 4}, {"c", 7, 3}, {"empty", 4, 0}, {"b", 4, 3}});
  static_assert(ddp::model<ddp::flat_model<float>>);
  std::vector<std::string> names;
  m.for_each_parameter([&](std::string_view n, std::span<float> v, std::span<float> d) {
    names.emplace_back(n);
    CHECK(d.data() - g.data() == v.data() - p.data()); // the same offset in both blocks
  });
  // Reversed (the buckets' order), every tensor starts where the one before ends, the empty one too.
  CHECK(names == std::vector<std::string>{"c", "b", "empty", "a"});
  CHECK(m.grad("b").data() == g.data() + 4);
  CHECK(m.value("c").size() == 3);
  CHECK_THROWS_WITH_AS(m.grad("d"), doctest::Contains("no tensor is named 'd'"), ddp::error);
  CHECK_THROWS_WITH_AS(ddp::flat_model(p.data(), g.data(), {{"a", 0, 5}, {"b", 4, 3}}),
                       doctest::Contains("tensor 'a' (elements 0..5) overlaps 'b' (from element 4)"),
                       ddp::error);
}

TEST_CASE("arena::matrix maps a slot column-major and refuses a shape that does not fill it") {
  ddp::arena<float> a{std::vector<std::size_t>{6, 0}};
  auto all = a.all();
  for (std::size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<float>(i);
  auto m = a.matrix(0, 2, 3);
  CHECK(m.rows() == 2);
  CHECK(m(1, 0) == doctest::Approx(1.f)); // column-major: (1, 0) is the second element
  CHECK(m(0, 1) == doctest::Approx(2.f));
  CHECK(a.matrix(1, 0, 5).size() == 0);
  CHECK_THROWS_AS(a.matrix(0, 3, 3), ddp::error);
  CHECK_THROWS_AS(a.matrix(0, -2, -3), ddp::error); // negatives whose product is the size
  CHECK_THROWS_AS(a.matrix(0, 6, 0), ddp::error);
  // rows * cols would overflow: the check divides instead of multiplying.
  CHECK_THROWS_AS(a.matrix(0, std::ptrdiff_t{1} << 62, 8), ddp::error);
}
