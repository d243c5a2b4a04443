// ddp::save_checkpoint / load_checkpoint at world sizes 1..4: a torn, truncated, damaged or
// foreign file is refused on every rank with its name and what is wrong, and the previous
// checkpoint is loaded instead; another model or optimizer is refused and changes nothing.
// (Saving at one world size and loading at another: checkpoint_resize.sh.)
#include "../support/mlp.hpp"
#include "group.hpp"

#include <ddp/checkpoint.hpp>
#include <ddp/sharded_data_parallel.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/file.h>
#include <type_traits>
#include <unistd.h>

using ddp_test::group;
using ddp_test::mlp;

namespace {

const std::vector<int> dims{6, 16, 12, 3};

/// The same path on every rank (ddprun's pid), one per test.
std::string path_for(const std::string& name) {
  return "/tmp/ddp-test-ckpt-" + name + "-" + std::to_string(group().size()) + "-" +
         std::to_string(::getppid());
}

void remove_all(const std::string& p) {
  group().barrier();
  if (group().rank() == 0)
    for (auto f : {p, p + ".prev", p + ".lock", p + ".bad"})
      std::remove(f.c_str());
}

/// Rank 0 changes the file, the others wait for it.
template <class F> void on_rank0(F&& f) {
  if (group().rank() == 0) f();
  group().barrier();
}

void train(mlp<float>& net, ddp::sharded_data_parallel<mlp<float>, ddp::gloo>& sdp,
           ddp::optim::adam<ddp::sharded_data_parallel<mlp<float>, ddp::gloo>>& opt, int steps) {
  auto& pg = group();
  for (int s = 0; s < steps; ++s) {
    auto [x, y] =
        ddp_test::make_batch<float>(dims.front(), dims.back(), 2 * pg.size(), 40u + static_cast<unsigned>(s));
    net.zero_grad();
    net.train_step(x.middleCols(2 * pg.rank(), 2), y.middleCols(2 * pg.rank(), 2));
    sdp.synchronize();
    opt.step();
  }
}

/// load_checkpoint's message on this rank (every rank must fail).
template <class F> std::string refusal(F&& load) {
  try {
    load();
  } catch (const ddp::error& e) { return e.what(); }
  return "(no error)";
}

} // namespace

TEST_CASE(
    "a truncated, bit-flipped or foreign checkpoint is refused by name, and the previous one is loaded") {
  auto& pg = group();
  const auto path = path_for("torn");
  mlp<float> net(dims, 5, false);
  ddp::sharded_data_parallel sdp(net, pg);
  ddp::optim::adam opt(sdp, {.lr = 1e-2});
  train(net, sdp, opt, 2);
  ddp::save_checkpoint(path, sdp, opt, {.step = 2});
  const auto at_2 = net.flat();
  train(net, sdp, opt, 1);
  ddp::save_checkpoint(path, sdp, opt, {.step = 3});
  const auto at_3 = net.flat();

  auto load_strict = [&] { ddp::load_checkpoint(path, sdp, opt, {.fall_back_to_previous = false}); };
  auto expect_refused = [&](const char* what) {
    const auto m = refusal(load_strict);
    CHECK_MESSAGE(m.find("checkpoint " + path + " " + what) != std::string::npos, m);
    // Nothing changed, then the previous checkpoint (step 2) is loaded instead.
    CHECK(net.flat() == at_3);
    const auto p = ddp::load_checkpoint(path, sdp, opt);
    CHECK(p.step == 2);
    CHECK(opt.steps() == 2);
    CHECK(net.flat() == at_2);
  };

  std::vector<char> whole;
  on_rank0([&] {
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  });
  const auto rewrite = [&](const std::vector<char>& bytes) {
    on_rank0([&] {
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    });
  };

  SUBCASE("truncated") {
    rewrite(std::vector<char>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2)));
    expect_refused("is truncated");
  }
  SUBCASE("a bit flipped") {
    auto bytes = whole;
    if (!bytes.empty()) bytes[bytes.size() / 2] ^= 0x10;
    rewrite(bytes);
    expect_refused("fails its SHA-256 check");
  }
  SUBCASE("foreign") {
    const std::string text = "hello, world: no checkpoint\n"; // (under 8 bytes: truncated)
    rewrite(std::vector<char>(text.begin(), text.end()));
    expect_refused("is not a ddp checkpoint");
  }
  SUBCASE("missing, and no previous one either") {
    on_rank0([&] {
      std::remove(path.c_str());
      std::remove((path + ".prev").c_str());
    });
    const auto m = refusal([&] { ddp::load_checkpoint(path, sdp, opt); });
    CHECK_MESSAGE(m.find("checkpoint " + path + " cannot be opened") != std::string::npos, m);
    CHECK_MESSAGE(m.find("checkpoint " + path + ".prev cannot be opened") != std::string::npos, m);
  }
  remove_all(path);
}

TEST_CASE("the optimizer's state comes back bit for bit: -0.0, denormals, signalling NaNs") {
  auto& pg = group();
  const auto path = path_for("bits");
  mlp<float> net(dims, 5, false);
  ddp::sharded_data_parallel sdp(net, pg);
  ddp::optim::adam opt(sdp, {.lr = 1e-2});
  train(net, sdp, opt, 1);
  // Values a float sum over the ranks changes (-0.0 + 0.0 = +0.0; a signalling NaN is quieted).
  const std::uint32_t patterns[] = {0x80000000u, 0x00000001u, 0x7f800001u, 0xff800123u, 0x3f800000u};
  auto fill = [&](bool clear) {
    std::size_t i = 0;
    sdp.for_each_shard([&](auto& r) {
      using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
      if constexpr (std::is_same_v<T, float>)
        for (std::size_t k = 0; k < opt.state().slots(); ++k) {
          T* v = opt.state().template at<T>(k, r.bucket, r.state_offset);
          for (std::size_t e = 0; e < r.value.size(); ++e, ++i) {
            const std::uint32_t bits = clear ? 0u : patterns[(r.offset + e + k) % 5];
            std::memcpy(v + e, &bits, sizeof bits);
          }
        }
    });
    return i;
  };
  auto mismatches = [&] {
    std::size_t bad = 0;
    sdp.for_each_shard([&](auto& r) {
      using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
      if constexpr (std::is_same_v<T, float>)
        for (std::size_t k = 0; k < opt.state().slots(); ++k) {
          const T* v = opt.state().template at<T>(k, r.bucket, r.state_offset);
          for (std::size_t e = 0; e < r.value.size(); ++e) {
            std::uint32_t bits = 0;
            std::memcpy(&bits, v + e, sizeof bits);
            bad += bits != patterns[(r.offset + e + k) % 5];
          }
        }
    });
    return bad;
  };
  REQUIRE(fill(false) > 0);
  ddp::save_checkpoint(path, sdp, opt, {.step = 1});
  fill(true);
  ddp::load_checkpoint(path, sdp, opt);
  CHECK(mismatches() == 0);
  remove_all(path);
}

TEST_CASE("another model or another optimizer is refused, and nothing changes") {
  auto& pg = group();
  const auto path = path_for("other");
  mlp<float> net(dims, 5, false);
  ddp::sharded_data_parallel sdp(net, pg);
  ddp::optim::adam opt(sdp, {.lr = 1e-2});
  train(net, sdp, opt, 1);
  ddp::save_checkpoint(path, sdp, opt, {.step = 1});

  mlp<float> wider({6, 17, 12, 3}, 5, false);
  ddp::distributed_data_parallel dp(wider, pg);
  const auto before = wider.flat();
  auto m = refusal([&] { ddp::load_checkpoint(path, dp); });
  CHECK_MESSAGE(m.find("parameter 'fc1.weight' is 102 × float32 here but 96 × float32 in checkpoint " +
                       path) != std::string::npos,
                m);
  CHECK(wider.flat() == before);

  mlp<float> same(dims, 9, false);
  ddp::sharded_data_parallel sdp2(same, pg);
  ddp::optim::sgd plain(sdp2, {.lr = 0.1, .momentum = 0.9});
  const auto same_before = same.flat();
  m = refusal([&] { ddp::load_checkpoint(path, sdp2, plain); });
  CHECK_MESSAGE(
      m.find("holds the state of adam (2 values per element), but this job's optimizer is sgd (1)") !=
          std::string::npos,
      m);
  CHECK(same.flat() == same_before);
  // An optimizer of another data-parallel object (its shards index that model): refused on
  // save and on load before anything is read or written.
  {
    mlp<float> small({6, 4, 3}, 5, false);
    ddp::sharded_data_parallel sdp_small(small, pg);
    ddp::optim::adam foreign(sdp_small, {.lr = 1e-2});
    const auto before_other = net.flat();
    auto f = refusal([&] { ddp::save_checkpoint(path, sdp, foreign, {.step = 9}); });
    CHECK_MESSAGE(f.find("save_checkpoint(" + path +
                         "): the optimizer (adam) was built on another data-parallel object") !=
                      std::string::npos,
                  f);
    f = refusal([&] { ddp::load_checkpoint(path, sdp, foreign); });
    CHECK_MESSAGE(f.find("load_checkpoint(" + path + "): the optimizer (adam)") != std::string::npos, f);
    CHECK(net.flat() == before_other);
    CHECK(ddp::load_checkpoint(path, sdp2).step == 1); // the file is still the step-1 one
  }
  // The parameters alone load into the same model, whatever optimizer comes later.
  CHECK(ddp::load_checkpoint(path, sdp2).step == 1);
  CHECK(same.flat() == net.flat());
  remove_all(path);
}

TEST_CASE("a save that cannot be written fails on every rank with rank 0's reason; the old file stays") {
  auto& pg = group();
  mlp<float> net(dims, 5, false);
  ddp::distributed_data_parallel dp(net, pg);
  const std::string nowhere = "/nonexistent-ddp-dir/ckpt";
  const auto m = refusal([&] { ddp::save_checkpoint(nowhere, dp, {.step = 1}); });
  CHECK_MESSAGE(m.find("checkpoint " + nowhere + ": cannot create") != std::string::npos, m);
  if (pg.rank() != 0) CHECK_MESSAGE(m.find("failed on rank 0") != std::string::npos, m);
  if (pg.rank() == 0) CHECK_MESSAGE(m.find("rank 0: ") != std::string::npos, m);

  // A writer already at work on the path (another job, an earlier incarnation): refused, naming
  // the lock, and the old file is untouched.
  {
    const auto path = path_for("locked");
    ddp::save_checkpoint(path, dp, {.step = 1});
    int other = -1;
    on_rank0([&] {
      other = ::open((path + ".lock").c_str(), O_RDWR | O_CLOEXEC);
      REQUIRE(::flock(other, LOCK_EX | LOCK_NB) == 0);
    });
    const auto l = refusal([&] { ddp::save_checkpoint(path, dp, {.step = 2}); });
    CHECK_MESSAGE(l.find("another process is writing it (it holds " + path + ".lock)") != std::string::npos,
                  l);
    if (pg.rank() == 0) {
      ::close(other);
      CHECK(ddp::detail::decode_checkpoint(ddp::detail::read_checkpoint_file(path), path).step == 1);
    }
    remove_all(path);
  }

  // Steps that differ across ranks would save a state no rank had.
  if (pg.size() > 1) {
    const auto path = path_for("steps");
    const auto s =
        refusal([&] { ddp::save_checkpoint(path, dp, {.step = static_cast<std::uint64_t>(pg.rank())}); });
    CHECK_MESSAGE(s.find("called at steps 0 to " + std::to_string(pg.size() - 1)) != std::string::npos, s);
  }
}
