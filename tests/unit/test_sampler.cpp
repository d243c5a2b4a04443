#include <ddp/global_batches.hpp>
#include <ddp/sampler.hpp>
#include <ddp/step_batches.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <ranges>
#include <set>
#include <span>
#include <sstream>

namespace {

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

template <class P>
std::vector<std::int64_t> indices_of(std::size_t n, int replicas, int rank, std::uint64_t seed,
                                     std::uint64_t epoch, bool drop) {
  ddp::distributed_sampler<P> s(n, replicas, rank, {.seed = seed, .drop_last = drop});
  s.set_epoch(epoch);
  return {s.begin(), s.end()};
}

std::string reference_path() {
  if (const char* p = std::getenv("DDP_SAMPLER_REFERENCE")) return p;
  return DDP_SAMPLER_REFERENCE_FILE;
}

/// One line of tests/reference/sampler_reference.txt: a sampler's arguments, its indices' count
/// and hash, and the indices themselves where the line lists them.
struct reference_case {
  std::string line, policy, hash;
  std::size_t n = 0, count = 0;
  int replicas = 1, rank = 0, drop = 0;
  std::uint64_t seed = 0, epoch = 0;
  std::vector<std::int64_t> want;
};

std::vector<reference_case> read_reference() {
  std::ifstream in(reference_path());
  REQUIRE_MESSAGE(in.good(), "cannot read " << reference_path());
  std::vector<reference_case> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    reference_case c;
    std::istringstream ls(line);
    std::string colon;
    ls >> c.policy >> c.n >> c.replicas >> c.seed >> c.epoch >> c.drop >> c.rank >> c.count >> c.hash >>
        colon;
    REQUIRE(colon == ":");
    for (std::int64_t v; ls >> v;)
      c.want.push_back(v);
    c.line = std::move(line);
    cases.push_back(std::move(c));
  }
  return cases;
}

} // namespace

TEST_CASE("ddp's MT19937 gives std::mt19937's numbers") {
  for (std::uint32_t seed : {0u, 1u, 5489u, 123456789u, 0xffffffffu}) {
    std::mt19937 expected(seed);
    ddp::detail::mt19937 gen(seed);
    int differ = 0;
    for (int i = 0; i < 5000; ++i) // past several regenerations of the 624 words
      differ += static_cast<std::uint32_t>(expected()) != gen();
    CHECK_MESSAGE(differ == 0, "seed " << seed);
  }
}

TEST_CASE("shuffled and sequential are index-identical to PyTorch's DistributedSampler") {
  int compared = 0, listed = 0;
  std::set<std::string> policies;
  for (const auto& c : read_reference()) {
    auto got =
        c.policy == "shuffled"
            ? indices_of<ddp::sampling::shuffled>(c.n, c.replicas, c.rank, c.seed, c.epoch, c.drop != 0)
            : indices_of<ddp::sampling::sequential>(c.n, c.replicas, c.rank, c.seed, c.epoch, c.drop != 0);
    std::string text;
    for (auto v : got) {
      if (!text.empty()) text += ',';
      text += std::to_string(v);
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a64(text)));
    INFO(c.line.substr(0, 80));
    REQUIRE(got.size() == c.count);
    REQUIRE(std::string(buf) == c.hash);
    if (!c.want.empty() || c.count == 0) {
      REQUIRE(got == c.want);
      ++listed;
    }
    policies.insert(c.policy);
    ++compared;
  }
  MESSAGE("compared " << compared << " cases (" << listed << " listed in full) from " << reference_path());
  CHECK(compared >= 9000);
  CHECK(policies == std::set<std::string>{"sequential", "shuffled"});
}

namespace {

/// One line of tests/reference/sampler_reference_large.py's output.
struct large_case {
  std::string line;
  std::size_t n = 0, count = 0;
  int replicas = 1, rank = 0;
  std::uint64_t seed = 0, epoch = 0, sum = 0, wsum = 0;
  bool drop = false;
  std::vector<std::pair<std::size_t, std::int64_t>> at; // (k, idx[k])
};

void check_share(const large_case& c, std::span<const std::int64_t> got) {
  INFO(c.line.substr(0, 70));
  REQUIRE(got.size() == c.count);
  std::uint64_t sum = 0, wsum = 0; // wsum = sum((k % 64 + 1) * idx[k]) mod 2^64, as the script
  for (std::size_t k = 0; k < got.size(); ++k) {
    const auto v = static_cast<std::uint64_t>(got[k]);
    sum += v;
    wsum += (k % 64 + 1) * v;
  }
  CHECK(sum == c.sum);
  CHECK(wsum == c.wsum);
  for (auto [k, v] : c.at) {
    CAPTURE(k);
    CHECK(got[k] == v);
  }
}

} // namespace

TEST_CASE("the inside-out randperm (PyTorch 2.6+, large n) matches the Python model of PyTorch's source") {
  // Values from tests/reference/randperm_model.py: CPython's MT19937 with std::mt19937's
  // seeding driving the loop of randperm_cpu; its forward loop is checked against torch.
  static_assert(ddp::detail::randperm_inside_out_from == 214'748'364); // (2^32 - 1) / 20, integer division
  auto inside_out = [](std::size_t n, std::uint64_t seed) {
    std::mt19937 gen(static_cast<std::uint32_t>(seed));
    std::vector<std::uint32_t> r;
    ddp::detail::randperm_inside_out(r, n, gen);
    return std::vector<std::int64_t>(r.begin(), r.end());
  };
  CHECK(inside_out(12, 8) == std::vector<std::int64_t>{0, 5, 2, 8, 3, 11, 4, 6, 10, 1, 7, 9});
  CHECK(inside_out(20, (1ull << 32) + 5) ==
        std::vector<std::int64_t>{16, 17, 4, 11, 18, 0, 15, 13, 1, 19, 9, 8, 7, 2, 14, 5, 12, 10, 6, 3});
  CHECK(inside_out(1, 3) == std::vector<std::int64_t>{0});
  CHECK(inside_out(0, 3).empty());
  const large_case big{
      .line = "inside_out n=100000 seed=8",
      .count = 100000,
      .sum = 100000ull * 99999 / 2,
      .wsum = 162284838257ull,
      .at = {{0, 24793}, {1, 88861}, {2, 86898}, {99997, 58052}, {99998, 8938}, {99999, 11326}}};
  check_share(big, inside_out(100000, 8));
  // Below the switch every PyTorch, and so every option, gives the forward shuffle.
  std::vector<std::uint32_t> a, b;
  ddp::detail::randperm(a, 1000, 5, ddp::torch_randperm::since_2_6);
  ddp::detail::randperm(b, 1000, 5, ddp::torch_randperm::before_2_6);
  CHECK(a == b);
  // The permutation buffer of `shuffled` (2 MiB-aligned, huge pages asked for, from 2 MiB up)
  // holds the same as a plain vector.
  ddp::detail::shuffle_buffer<std::uint32_t> big_buffer;
  std::vector<std::uint32_t> plain;
  ddp::detail::randperm(big_buffer, std::size_t{1} << 20, 5);
  ddp::detail::randperm(plain, std::size_t{1} << 20, 5);
  CHECK(reinterpret_cast<std::uintptr_t>(big_buffer.data()) % (std::size_t{2} << 20) == 0);
  CHECK(std::equal(big_buffer.begin(), big_buffer.end(), plain.begin(), plain.end()));
}

TEST_CASE("index-identical to PyTorch at n = 214,748,363 and 214,748,364 (large n; torch_live_large)") {
  const char* path = std::getenv("DDP_SAMPLER_REFERENCE_LARGE");
  if (!path) {
    MESSAGE("skipped: DDP_SAMPLER_REFERENCE_LARGE is not set (ctest unit.sampler.torch_live_large sets it)");
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::optional<ddp::torch_randperm> mode;
  std::map<std::size_t, std::vector<large_case>> by_n; // one permutation per n
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      // "# torch 1.13.0a0 randperm before_2_6": which randperm the installed PyTorch has.
      auto m = line.substr(line.rfind(' ') + 1);
      REQUIRE((m == "since_2_6" || m == "before_2_6"));
      auto v = m == "since_2_6" ? ddp::torch_randperm::since_2_6 : ddp::torch_randperm::before_2_6;
      REQUIRE((!mode || *mode == v));
      mode = v;
      MESSAGE(line);
      continue;
    }
    std::istringstream ls(line);
    large_case c;
    c.line = line;
    std::string policy, colon;
    int drop = 0;
    ls >> policy >> c.n >> c.replicas >> c.seed >> c.epoch >> drop >> c.rank >> c.count >> c.sum >> c.wsum >>
        colon;
    REQUIRE(policy == "shuffled");
    REQUIRE(colon == ":");
    c.drop = drop != 0;
    for (std::string kv; ls >> kv;) {
      auto eq = kv.find('=');
      REQUIRE(eq != std::string::npos);
      c.at.emplace_back(std::stoull(kv.substr(0, eq)), std::stoll(kv.substr(eq + 1)));
    }
    REQUIRE(c.at.size() >= 7);
    by_n[c.n].push_back(std::move(c));
  }
  REQUIRE(mode.has_value());
  REQUIRE(by_n.size() >= 2);
  CHECK(by_n.begin()->first < ddp::detail::randperm_inside_out_from); // both sides of the switch
  CHECK(by_n.rbegin()->first >= ddp::detail::randperm_inside_out_from);
  int compared = 0;
  for (const auto& [n, cases] : by_n) {
    // Drawing a permutation takes seconds at this n: once per n, end to end, as the
    // share of a single replica (the whole permutation); the other cases take their
    // shares from it with the policy's own helper and their sizes from the sampler.
    const large_case& whole = cases.front();
    REQUIRE_MESSAGE((whole.replicas == 1 && !whole.drop), "the first case of each n must be one replica");
    ddp::sampler_options o{.seed = whole.seed, .drop_last = false};
    // Below the switch with the default options (every PyTorch agrees there), from
    // it on with the installed PyTorch's.
    if (n >= ddp::detail::randperm_inside_out_from) o.randperm = *mode;
    ddp::distributed_sampler<> all(n, 1, 0, o);
    all.set_epoch(whole.epoch);
    const std::span<const std::int64_t> perm = all.indices();
    check_share(whole, perm);
    ++compared;
    std::vector<std::int64_t> out;
    for (const auto& c : std::span(cases).subspan(1)) {
      REQUIRE(c.seed + c.epoch == whole.seed + whole.epoch);
      ddp::distributed_sampler<> s(n, c.replicas, c.rank,
                                   {.seed = c.seed, .drop_last = c.drop, .randperm = *mode});
      s.set_epoch(c.epoch);
      ddp::detail::strided_share(s.context(), out, [&](std::size_t j) { return perm[j]; });
      check_share(c, out);
      ++compared;
    }
  }
  MESSAGE("compared " << compared << " large-n shares from " << std::string(path));
}

TEST_CASE("sizes follow PyTorch's num_samples and total_size") {
  ddp::distributed_sampler<> a(10, 4, 0);
  CHECK(a.size() == 3);
  CHECK(a.total_size() == 12);
  ddp::distributed_sampler<> b(10, 4, 0, {.drop_last = true});
  CHECK(b.size() == 2);
  ddp::distributed_sampler<> c(3, 4, 3, {.drop_last = true});
  CHECK(c.size() == 0);
  ddp::distributed_sampler<> d(0, 2, 1);
  CHECK(d.size() == 0);
  CHECK(d.indices().empty());
}

TEST_CASE("every index is covered, and ranks are disjoint without padding") {
  const std::size_t n = 1000;
  for (int R : {1, 2, 4, 5, 8}) {
    std::vector<int> seen(n, 0);
    for (int r = 0; r < R; ++r)
      for (auto i : indices_of<ddp::sampling::shuffled>(n, R, r, 7, 3, false))
        ++seen[static_cast<std::size_t>(i)];
    CAPTURE(R);
    CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  }
}

TEST_CASE("set_epoch reshuffles; the same epoch gives the same order") {
  ddp::distributed_sampler<> s(100, 2, 0, {.seed = 3});
  std::vector<std::int64_t> e0(s.begin(), s.end());
  s.set_epoch(1);
  std::vector<std::int64_t> e1(s.begin(), s.end());
  s.set_epoch(0);
  std::vector<std::int64_t> again(s.begin(), s.end());
  CHECK(e0 != e1);
  CHECK(e0 == again);
}

TEST_CASE("a global position: the rest of an epoch split among a job of another size, each sample once") {
  // A job of R ranks takes m batches of b each, then a job of R2 ranks resumes at the
  // position m·b·R and takes the rest; then (chained) a third size resumes the third's rest.
  for (std::size_t n : {std::size_t{97}, std::size_t{100}, std::size_t{7}})
    for (auto [R, R2, R3] :
         {std::array{2, 3, 1}, std::array{3, 1, 2}, std::array{4, 3, 5}, std::array{1, 2, 3}})
      for (bool seq : {false, true}) {
        CAPTURE(n);
        CAPTURE(R);
        CAPTURE(R2);
        CAPTURE(seq);
        std::vector<int> seen(n, 0);
        auto take = [&](int world, std::uint64_t from, std::size_t count_per_rank) {
          std::uint64_t taken = 0;
          for (int r = 0; r < world; ++r) {
            auto run = [&](auto s) {
              s.set_epoch(5);
              s.set_position(from);
              CHECK(s.position() == from);
              const std::size_t k = std::min(count_per_rank, s.size());
              for (std::size_t i = 0; i < k; ++i)
                ++seen[static_cast<std::size_t>(s.indices()[i])];
              taken += k;
            };
            if (seq)
              run(ddp::distributed_sampler<ddp::sampling::sequential>(n, world, r, {.seed = 11}));
            else
              run(ddp::distributed_sampler<>(n, world, r, {.seed = 11}));
          }
          return from + taken;
        };
        const std::size_t b = 3, m = n / (b * static_cast<std::size_t>(R) * 2); // about a third of the epoch
        std::uint64_t at = take(R, 0, m * b);
        CHECK(at == m * b * static_cast<std::size_t>(R));
        at = take(R2, at, 2); // two samples each, then another resize
        at = take(R3, at, n); // the rest
        CHECK(at == n);
        CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
      }
}

TEST_CASE(
    "a global position: position 0 is the PyTorch epoch; set_epoch starts whole; shares differ by one") {
  ddp::distributed_sampler<> whole(100, 3, 1, {.seed = 2});
  std::vector<std::int64_t> before(whole.begin(), whole.end());
  whole.set_position(30);
  CHECK(whole.size() == 23); // 70 left over 3 ranks: 24, 23, 23
  CHECK(whole.indices()[0] == before[10]);
  whole.set_position(0);
  CHECK(std::vector<std::int64_t>(whole.begin(), whole.end()) == before);
  whole.set_position(31);
  whole.set_epoch(1);
  CHECK(whole.position() == 0);
  CHECK(whole.size() == 34);
  std::size_t total = 0;
  for (int r = 0; r < 3; ++r) {
    ddp::distributed_sampler<> s(100, 3, r, {.seed = 2});
    s.set_position(30);
    total += s.size();
    CHECK(s.size() >= 23);
    CHECK(s.size() <= 24);
  }
  CHECK(total == 70);
  ddp::distributed_sampler<> cut(100, 3, 2, {.seed = 2, .drop_last = true});
  cut.set_position(30);
  CHECK(cut.size() == 23); // the rest cut to 69
  CHECK(cut.total_size() == 69);
}

namespace {
/// A policy that says it is not interleaved: set_position must not compile for it.
struct not_interleaved {
  static constexpr bool interleaved = false;
};
} // namespace

TEST_CASE("a global position at the end of an epoch is an empty rest, at any world size") {
  // Without drop_last, 3 ranks over 10 samples consume 12 positions (4 each, padded): a
  // checkpoint there resumes, at 2 or 4 ranks, with nothing left of the epoch.
  for (std::uint64_t at : {10u, 12u, 101u})
    for (int world : {2, 3, 4})
      for (int r = 0; r < world; ++r) {
        ddp::distributed_sampler<> s(10, world, r, {.seed = 2});
        CHECK_NOTHROW(s.set_position(at));
        CHECK(s.size() == 0);
        CHECK(s.indices().empty());
        s.set_epoch(1);
        CHECK(s.size() == (10u + static_cast<unsigned>(world) - 1) / static_cast<unsigned>(world));
      }
  static_assert(!ddp::detail::interleaved_policy<ddp::sampling::contiguous>());
  static_assert(ddp::detail::interleaved_policy<ddp::sampling::shuffled>());
  static_assert(!ddp::detail::interleaved_policy<not_interleaved>());
}

TEST_CASE("contiguous: one block per rank, same sizes and padding as shuffled") {
  auto r0 = indices_of<ddp::sampling::contiguous>(10, 3, 0, 0, 0, false);
  auto r1 = indices_of<ddp::sampling::contiguous>(10, 3, 1, 0, 0, false);
  auto r2 = indices_of<ddp::sampling::contiguous>(10, 3, 2, 0, 0, false);
  CHECK(r0 == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(r1 == std::vector<std::int64_t>{4, 5, 6, 7});
  CHECK(r2 == std::vector<std::int64_t>{8, 9, 0, 1}); // padded with the head, like PyTorch
  auto d2 = indices_of<ddp::sampling::contiguous>(10, 3, 2, 0, 0, true);
  CHECK(d2 == std::vector<std::int64_t>{6, 7, 8});
  // Shuffled blocks: a permutation of the blocks across ranks, changing by epoch.
  for (std::uint64_t epoch : {0u, 1u, 2u}) {
    std::set<std::int64_t> firsts;
    for (int r = 0; r < 4; ++r) {
      auto v = indices_of<ddp::sampling::contiguous_shuffled_blocks>(40, 4, r, 9, epoch, false);
      REQUIRE(v.size() == 10);
      CHECK(v.back() - v.front() == 9);
      firsts.insert(v.front());
    }
    CHECK(firsts == std::set<std::int64_t>{0, 10, 20, 30});
  }
  std::vector<std::int64_t> e0, e1;
  for (int r = 0; r < 4; ++r) {
    e0.push_back(indices_of<ddp::sampling::contiguous_shuffled_blocks>(40, 4, r, 9, 0, false).front());
    e1.push_back(indices_of<ddp::sampling::contiguous_shuffled_blocks>(40, 4, r, 9, 1, false).front());
  }
  CHECK(e0 != e1);
}

namespace {
/// A user-written policy: every rank sees the whole data set in reverse.
struct reversed_everything {
  static void rank_indices(const ddp::sampler_context& c, std::vector<std::int64_t>& out) {
    out.resize(c.num_samples);
    for (std::size_t k = 0; k < c.num_samples; ++k)
      out[k] = static_cast<std::int64_t>((c.n - 1 - k % c.n));
  }
};
struct wrong_count {
  static void rank_indices(const ddp::sampler_context&, std::vector<std::int64_t>& out) { out.assign(1, 0); }
};
} // namespace

TEST_CASE("a user-written sampling policy works") {
  static_assert(ddp::sampling_policy<reversed_everything>);
  static_assert(!ddp::sampling_policy<int>);
  ddp::distributed_sampler<reversed_everything> s(5, 1, 0);
  CHECK(std::vector<std::int64_t>(s.begin(), s.end()) == std::vector<std::int64_t>{4, 3, 2, 1, 0});
  ddp::distributed_sampler<wrong_count> w(5, 1, 0);
  CHECK_THROWS_AS(w.indices(), ddp::error);
}

TEST_CASE("invalid arguments name the argument and value") {
  auto msg = [](auto&& f) {
    try {
      f();
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::config);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg([] { ddp::distributed_sampler<> s(10, 2, 2); }).find("rank=2") != std::string::npos);
  CHECK(msg([] { ddp::distributed_sampler<> s(10, 0, 0); }).find("num_replicas=0") != std::string::npos);
  CHECK(msg([] { ddp::distributed_sampler<> s(10, 2, -1); }).find("rank=-1") != std::string::npos);
  CHECK(msg([] {
          ddp::distributed_sampler<> s(10, 1, 0);
          (void)ddp::batches(s, 0);
        }).find("batch_size") != std::string::npos);
}

TEST_CASE("a process-group-like object gives replicas and rank") {
  struct fake_group {
    int rank() const { return 1; }
    int size() const { return 3; }
  } g;
  ddp::distributed_sampler<ddp::sampling::sequential> s(9, g);
  CHECK(std::vector<std::int64_t>(s.begin(), s.end()) == std::vector<std::int64_t>{1, 4, 7});
}

TEST_CASE("batches: spans into the index list, last batch short unless drop_last") {
  ddp::distributed_sampler<ddp::sampling::sequential> s(10, 1, 0);
  std::vector<std::size_t> sizes;
  const std::int64_t* expect = s.indices().data();
  for (auto b : ddp::batches(s, 4)) {
    CHECK(b.data() == expect); // no copy: a view into the sampler's list
    expect += b.size();
    sizes.push_back(b.size());
  }
  CHECK(sizes == std::vector<std::size_t>{4, 4, 2});
  CHECK(ddp::batches(s, 4).size() == 3);
  sizes.clear();
  for (auto b : ddp::batches(s, 4, true))
    sizes.push_back(b.size());
  CHECK(sizes == std::vector<std::size_t>{4, 4});
  CHECK(ddp::batches(s, 20, true).size() == 0);
  static_assert(std::ranges::input_range<ddp::batch_range>);
}

TEST_CASE("batches(...).from(k): an epoch resumed at batch k yields what the whole epoch yields from there") {
  ddp::distributed_sampler<ddp::sampling::shuffled> s(103, 2, 1, {.seed = 7});
  s.set_epoch(3);
  auto all = ddp::batches(s, 8);
  std::vector<std::vector<std::int64_t>> whole;
  for (auto b : all)
    whole.emplace_back(b.begin(), b.end());
  REQUIRE(whole.size() == 7); // 52 indices: 6 full batches and one of 4
  for (std::size_t k = 0; k <= whole.size(); ++k) {
    CAPTURE(k);
    auto rest = all.from(k);
    CHECK(rest.first() == k);
    CHECK(rest.size() == whole.size() - k);
    CHECK(rest.epoch_batches() == whole.size());
    std::size_t i = k;
    for (auto b : rest)
      CHECK(std::vector<std::int64_t>(b.begin(), b.end()) == whole[i++]);
    CHECK(i == whole.size());
  }
  // A fresh sampler at the same epoch (a restarted process) gives the same batches.
  ddp::distributed_sampler<ddp::sampling::shuffled> again(103, 2, 1, {.seed = 7});
  again.set_epoch(3);
  auto b5 = *ddp::batches(again, 8).from(5).begin();
  CHECK(std::vector<std::int64_t>(b5.begin(), b5.end()) == whole[5]);
  CHECK_THROWS_WITH_AS(all.from(8), doctest::Contains("cannot start at batch 8 of an epoch of 7"),
                       ddp::error);
  CHECK(ddp::batches(s, 8, true).from(6).size() == 0);
}

namespace {

/// What an epoch loop over ddp::batches gives for epochs [0, epochs): one entry per batch.
std::vector<std::vector<std::int64_t>> epoch_loop(ddp::distributed_sampler<ddp::sampling::shuffled> s,
                                                  std::size_t batch, bool drop, std::uint64_t epochs) {
  std::vector<std::vector<std::int64_t>> out;
  for (std::uint64_t e = 0; e < epochs; ++e) {
    s.set_epoch(e);
    for (auto b : ddp::batches(s, batch, drop))
      out.emplace_back(b.begin(), b.end());
  }
  return out;
}

} // namespace

TEST_CASE("step_batches: step s is the batch an epoch loop reaches at s, across epoch boundaries") {
  for (bool drop : {false, true}) {
    CAPTURE(drop);
    ddp::distributed_sampler<ddp::sampling::shuffled> s(103, 2, 1, {.seed = 7});
    const auto want = epoch_loop(s, 8, drop, 4);
    ddp::step_batches steps(s, 8, drop);
    REQUIRE(steps.steps_per_epoch() == (drop ? 6u : 7u)); // 52 indices per rank
    REQUIRE(want.size() == 4 * steps.steps_per_epoch());
    for (std::uint64_t k = 0; k < want.size(); ++k) {
      CAPTURE(k);
      auto b = steps.at(k);
      CHECK(std::vector<std::int64_t>(b.begin(), b.end()) == want[k]);
      CHECK(s.epoch() == k / steps.steps_per_epoch()); // the view set the sampler's epoch
    }
    // Backwards across a boundary too: the epoch is set, not advanced.
    auto back = steps.at(1);
    CHECK(std::vector<std::int64_t>(back.begin(), back.end()) == want[1]);
  }
}

TEST_CASE(
    "step_batches over two epochs are index-identical to PyTorch's DistributedSampler for both epochs") {
  // Cases of the reference listed in full for consecutive epochs: the steps of both epochs,
  // one batch per step, are PyTorch's indices for epoch e then e + 1.
  std::map<std::string, std::map<std::uint64_t, std::vector<std::int64_t>>>
      listed; // case -> epoch -> indices
  for (auto& c : read_reference()) {
    if (c.policy != "shuffled" || c.count < 3 || c.want.size() != c.count) continue;
    std::ostringstream key;
    key << c.n << ' ' << c.replicas << ' ' << c.seed << ' ' << c.drop << ' ' << c.rank;
    listed[key.str()][c.epoch] = std::move(c.want);
  }
  int compared = 0;
  for (auto& [key, epochs] : listed)
    for (auto& [e, first] : epochs) {
      auto next = epochs.find(e + 1);
      if (next == epochs.end()) continue;
      CAPTURE(key);
      CAPTURE(e);
      std::istringstream ks(key);
      std::size_t n;
      int replicas, drop, rank;
      std::uint64_t seed;
      ks >> n >> replicas >> seed >> drop >> rank;
      ddp::distributed_sampler<ddp::sampling::shuffled> s(n, replicas, rank,
                                                          {.seed = seed, .drop_last = drop != 0});
      const std::size_t batch = 2; // several steps per epoch, the last one short when the share is odd
      ddp::step_batches steps(s, batch);
      std::vector<std::int64_t> got;
      for (auto [step, epoch, idx] :
           steps.from(e * steps.steps_per_epoch()) | std::views::take(2 * steps.steps_per_epoch())) {
        CHECK(epoch == step / steps.steps_per_epoch());
        got.insert(got.end(), idx.begin(), idx.end());
      }
      std::vector<std::int64_t> want = first;
      want.insert(want.end(), next->second.begin(), next->second.end());
      CHECK(got == want);
      ++compared;
    }
  MESSAGE("compared " << compared << " pairs of consecutive epochs with PyTorch's");
  CHECK(compared >= 100);
}

TEST_CASE("step_batches: resuming at step k yields what iterating from 0 yields from k") {
  ddp::distributed_sampler<ddp::sampling::shuffled> s(50, 3, 2, {.seed = 11});
  ddp::step_batches steps(s, 4); // 17 indices per rank: 5 steps per epoch, the last of 1
  static_assert(std::ranges::input_range<ddp::step_batches<ddp::sampling::shuffled>>);
  std::vector<std::vector<std::int64_t>> straight;
  for (auto b : steps | std::views::take(23))
    straight.emplace_back(b.indices.begin(), b.indices.end());
  for (std::uint64_t k : {0u, 4u, 5u, 9u, 12u, 22u}) {
    CAPTURE(k);
    // A restarted process: a fresh sampler, told nothing but the step.
    ddp::distributed_sampler<ddp::sampling::shuffled> fresh(50, 3, 2, {.seed = 11});
    auto resumed = ddp::step_batches(fresh, 4).from(k);
    CHECK(resumed.first() == k);
    std::uint64_t i = k;
    for (auto b : resumed | std::views::take(23 - k)) {
      CHECK(b.step == i);
      CHECK(std::vector<std::int64_t>(b.indices.begin(), b.indices.end()) == straight[i]);
      ++i;
    }
    CHECK(i == 23);
  }
}

TEST_CASE("step_batches refuses a batch size that leaves an epoch without a batch") {
  ddp::distributed_sampler<ddp::sampling::shuffled> s(10, 2, 0); // 5 per rank
  CHECK_THROWS_WITH_AS(ddp::step_batches(s, 6, true), doctest::Contains("an epoch has no batch"), ddp::error);
  CHECK_THROWS_WITH_AS(ddp::step_batches(s, 0), doctest::Contains("batch_size must be at least 1"),
                       ddp::error);
  CHECK(ddp::step_batches(s, 6).steps_per_epoch() == 1); // one short batch
}

namespace {
/// The samples of global step `step` across all `world` ranks, in the order of the ranks' shares.
std::vector<std::int64_t> whole_global_batch(std::size_t n, int world, std::size_t g, std::uint64_t step,
                                             std::uint64_t resumed_at_step = 0) {
  std::vector<std::int64_t> out;
  for (int r = 0; r < world; ++r) {
    ddp::distributed_sampler<ddp::sampling::shuffled> s(n, world, r, {.seed = 3});
    ddp::global_batches view(s, g);
    if (resumed_at_step > 0) {
      s.set_epoch(view.epoch_of(resumed_at_step));
      s.set_position(view.position_of(resumed_at_step));
    }
    auto b = view.at(step);
    CHECK(b.global_samples() == std::min(g, n - b.first));
    out.insert(out.end(), b.indices.begin(), b.indices.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}
} // namespace

TEST_CASE("global_batches: a step's samples are the same at every world size, shares differ by at most one") {
  const std::size_t n = 23, g = 7; // 4 steps per epoch: 7, 7, 7, 2
  ddp::distributed_sampler<ddp::sampling::shuffled> one(n, 1, 0, {.seed = 3});
  ddp::global_batches<ddp::sampling::shuffled> view(one, g);
  CHECK(view.steps_per_epoch() == 4);
  for (std::uint64_t step = 0; step < 8; ++step) {
    const auto whole = view.at(step);
    // World 1: the global order itself, positions [first, first + size).
    std::vector<std::int64_t> expect(whole.indices.begin(), whole.indices.end());
    CHECK(whole.first == view.position_of(step));
    std::sort(expect.begin(), expect.end());
    for (int world = 2; world <= 5; ++world) {
      CHECK(whole_global_batch(n, world, g, step) == expect);
      std::size_t lo = g, hi = 0;
      for (int r = 0; r < world; ++r) {
        ddp::distributed_sampler<ddp::sampling::shuffled> s(n, world, r, {.seed = 3});
        const auto share = ddp::global_batches(s, g).at(step).local_samples();
        lo = std::min(lo, share);
        hi = std::max(hi, share);
      }
      CHECK(hi - lo <= 1);
    }
  }
}

TEST_CASE("global_batches: a job resumed mid-epoch at another world size takes the same global batches") {
  const std::size_t n = 23, g = 7;
  for (int world = 1; world <= 4; ++world)
    for (std::uint64_t at : {1u, 2u, 3u, 5u})
      for (std::uint64_t step = at; step < 8; ++step)
        CHECK(whole_global_batch(n, world, g, step, at) == whole_global_batch(n, 1, g, step));
  // Every sample of an epoch once: 2 ranks for steps 0-1, then 3 ranks from step 2.
  std::vector<std::int64_t> seen;
  for (std::uint64_t step = 0; step < 4; ++step) {
    auto b = whole_global_batch(n, step < 2 ? 2 : 3, g, step, step < 2 ? 0 : 2);
    seen.insert(seen.end(), b.begin(), b.end());
  }
  std::sort(seen.begin(), seen.end());
  std::vector<std::int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
}

TEST_CASE("global_batches: going back within an epoch, drop_last, and refusals") {
  ddp::distributed_sampler<ddp::sampling::sequential> s(23, 2, 1);
  ddp::global_batches view(s, 7, /*drop_last=*/true);
  CHECK(view.steps_per_epoch() == 3);
  CHECK(view.epoch_of(3) == 1);
  s.set_position(14);
  auto b = view.at(2); // positions 14..20; rank 1 holds 15, 17, 19
  CHECK(std::vector<std::int64_t>(b.indices.begin(), b.indices.end()) ==
        std::vector<std::int64_t>{15, 17, 19});
  b = view.at(0); // before the position: the sampler goes back to the whole epoch
  CHECK(s.position() == 0);
  CHECK(std::vector<std::int64_t>(b.indices.begin(), b.indices.end()) == std::vector<std::int64_t>{1, 3, 5});
  ddp::distributed_sampler<ddp::sampling::sequential> dropping(23, 2, 0, {.drop_last = true});
  CHECK_THROWS_WITH_AS(ddp::global_batches(dropping, 7), doctest::Contains("the sampler has drop_last"),
                       ddp::error);
  CHECK_THROWS_WITH_AS(ddp::global_batches(s, 24, true), doctest::Contains("an epoch has no batch"),
                       ddp::error);
  CHECK_THROWS_AS(ddp::global_batches(s, 0), ddp::error);
}
