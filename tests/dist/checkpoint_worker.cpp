// One job of the checkpoint resize test (checkpoint_resize.sh): `save DIR S1` trains S1 steps
// at this world size and saves; `resume DIR S1 S2` loads at this world size, trains S2 more.
// Each job compares its parameters to single-process training on the whole global batch:
// sharded_data_parallel + ddp::optim::adam (state re-sharded), and distributed_data_parallel
// + plain SGD. The global batch (6) splits evenly at 1, 2 and 3 ranks. `elastic` is one round of
// the elastic ddprun test (tests/netns/elastic.sh), on the same oracle.
#include "../support/mlp.hpp"
#include "../support/whole_optimizer.hpp"

#include <ddp/checkpoint.hpp>
#include <ddp/ddp.hpp>
#include <ddp/sharded_data_parallel.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

using ddp_test::mlp;

namespace {

const std::vector<int> dims{6, 16, 12, 3};
constexpr int global_batch = 6;
const ddp::optim::adam_options adam_opts{.lr = 1e-2, .weight_decay = 1e-3};
const ddp::optim::sgd_options momentum_opts{
    .lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true};
constexpr float sgd_lr = 0.05f;

auto batch(int step) {
  return ddp_test::make_batch<float>(dims.front(), dims.back(), global_batch,
                                     700u + static_cast<unsigned>(step));
}

enum class trained { adam, momentum, plain_sgd };

/// Single-process training on the whole batch: the trajectory every world size must follow.
std::vector<double> oracle(trained how, int steps) {
  mlp<float> net(dims, how == trained::adam ? 5u : how == trained::momentum ? 6u : 7u, false);
  ddp_test::whole_optimizer<float> ref{how == trained::adam};
  ref.a = adam_opts;
  ref.g = momentum_opts;
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(s);
    net.zero_grad();
    net.train_step(x, y);
    if (how == trained::plain_sgd)
      net.sgd(sgd_lr);
    else
      ref.step(net);
  }
  return net.flat();
}

/// This rank's share of step `s`'s global batch, trained into `net`'s gradients.
void local_step(mlp<float>& net, int s, int rank, int world) {
  auto [x, y] = batch(s);
  const int share = global_batch / world;
  net.zero_grad();
  net.train_step(x.middleCols(rank * share, share), y.middleCols(rank * share, share));
}

int fail(const std::string& why) {
  std::printf("RESULT fail %s\n", why.c_str());
  return 1;
}

} // namespace

/// `bench DIR WIDTH`: the time to save and to load an MLP of 2 hidden layers of WIDTH with
/// Adam's state, at this world size (the figures of docs/performance.md, Checkpoints).
int bench(const std::string& dir, int width) {
  auto pg = ddp::init_process_group<ddp::gloo>();
  mlp<float> net({width, width, width, 10}, 5, false);
  ddp::sharded_data_parallel sdp(net, pg);
  ddp::optim::adam opt(sdp);
  using clock = std::chrono::steady_clock;
  std::vector<double> save_ms, load_ms;
  for (int i = 0; i < 5; ++i) {
    pg.barrier();
    auto t0 = clock::now();
    ddp::save_checkpoint(dir + "/bench.ckpt", sdp, opt, {.step = static_cast<std::uint64_t>(i)});
    auto t1 = clock::now();
    (void)ddp::load_checkpoint(dir + "/bench.ckpt", sdp, opt);
    auto t2 = clock::now();
    save_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    load_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::sort(save_ms.begin(), save_ms.end());
  std::sort(load_ms.begin(), load_ms.end());
  std::size_t params = 0;
  net.for_each_parameter([&](auto&&, auto& v, auto&) { params += static_cast<std::size_t>(v.size()); });
  if (pg.rank() == 0)
    std::printf("RESULT bench world=%d params=%zu file_mb=%.1f save_ms=%.1f load_ms=%.1f (medians of 5)\n",
                pg.size(), params, 3.0 * 4.0 * static_cast<double>(params) / 1e6, save_ms[2], load_ms[2]);
  return 0;
}

/// `visit first|next|last DIR WORLD_TAG [BATCHES]`: one job of an epoch that changes world size
/// (the samples' part of checkpoint_resize.sh). `first` starts epoch 0; `next` and `last` load the
/// position from DIR/visit.ckpt. Each takes BATCHES batches of 2 per rank (`last`: the rest of the
/// epoch), writes the indices it visited to DIR/visited.<tag>.<rank>, and saves the position.
int visit(const std::string& stage, const std::string& dir, const std::string& tag, int batches) {
  constexpr std::size_t n = 50, per_batch = 2;
  auto pg = ddp::init_process_group<ddp::gloo>();
  mlp<float> net(dims, 5, false);
  ddp::distributed_data_parallel dp(net, pg);
  ddp::training_progress at{};
  if (stage != "first") at = ddp::load_checkpoint(dir + "/visit.ckpt", dp);
  ddp::distributed_sampler<> sampler(n, pg, {.seed = 3});
  sampler.set_epoch(at.epoch);
  sampler.set_position(at.samples);
  std::size_t taken = 0;
  std::string out;
  for (auto batch : ddp::batches(sampler, per_batch)) {
    if (stage != "last" && taken >= static_cast<std::size_t>(batches) * per_batch) break;
    for (auto i : batch)
      out += std::to_string(i) + "\n";
    taken += batch.size();
  }
  std::FILE* f = std::fopen((dir + "/visited." + tag + "." + std::to_string(pg.rank())).c_str(), "w");
  if (f == nullptr) return fail("cannot write the visited indices in " + dir);
  std::fputs(out.c_str(), f);
  std::fclose(f);
  std::vector<std::int64_t> all{static_cast<std::int64_t>(taken)}; // shares may differ by one
  pg.all_reduce(all);
  at.samples += static_cast<std::uint64_t>(all[0]);
  ddp::save_checkpoint(dir + "/visit.ckpt", dp, at);
  std::printf("RESULT ok phase=visit rank=%d size=%d took=%zu position=%llu\n", pg.rank(), pg.size(), taken,
              static_cast<unsigned long long>(at.samples));
  return 0;
}

/// `elastic DIR TOTAL EVERY STEP_MS`: one round of an elastic job (tests/netns/elastic.sh). Resumes
/// from DIR/elastic.ckpt when it exists, trains to step TOTAL (DDP, plain SGD, the global batch
/// split over this round's ranks), saves every EVERY steps, sleeps STEP_MS a step so that a test
/// can act mid-round, and at the end compares with single-process training to TOTAL.
int elastic(const std::string& dir, int total, int every, int step_ms) {
  auto pg = ddp::init_process_group<ddp::gloo>();
  const int r = pg.rank(), w = pg.size();
  if (global_batch % w != 0)
    return fail("the global batch does not split over " + std::to_string(w) + " ranks");
  const std::string path = dir + "/elastic.ckpt";
  mlp<float> b(dims, 7u, false);
  ddp::distributed_data_parallel dp(b, pg);
  std::vector<std::int32_t> resume{r == 0 && std::ifstream(path).good() ? 1 : 0};
  pg.broadcast(resume, 0); // only rank 0's node needs the file
  ddp::training_progress at{};
  if (resume[0]) at = ddp::load_checkpoint(path, dp);
  const char* round = std::getenv("DDP_RESTART_ROUND");
  std::printf("ELASTIC round=%s world=%d rank=%d group_rank=%s from_step=%llu\n", round ? round : "-", w, r,
              std::getenv("GROUP_RANK") ? std::getenv("GROUP_RANK") : "-",
              static_cast<unsigned long long>(at.step));
  std::fflush(stdout);
  for (int s = static_cast<int>(at.step); s < total; ++s) {
    local_step(b, s, r, w);
    dp.synchronize();
    b.sgd(sgd_lr);
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    if ((s + 1) % every == 0) {
      ddp::save_checkpoint(path, dp, {.step = static_cast<std::uint64_t>(s + 1)});
      if (r == 0) std::printf("STEP %d world=%d\n", s + 1, w);
      std::fflush(stdout);
    }
  }
  const double d = ddp_test::relative_difference(b.flat(), oracle(trained::plain_sgd, total));
  if (d > 1e-5)
    return fail("rank " + std::to_string(r) + " of " + std::to_string(w) + ": differs by " +
                std::to_string(d));
  std::printf("RESULT ok phase=elastic rank=%d size=%d step=%d sgd_diff=%.3g\n", r, w, total, d);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4)
    return fail("usage: checkpoint_worker save DIR S1 | resume DIR S1 S2 | bench DIR WIDTH | "
                "visit first|next|last DIR TAG [BATCHES] | elastic DIR TOTAL EVERY STEP_MS");
  const std::string phase = argv[1], dir = argv[2];
  if (phase == "bench") return bench(dir, std::atoi(argv[3]));
  if (phase == "elastic" && argc > 5) try {
      return elastic(dir, std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
    } catch (const std::exception& e) { return fail(e.what()); }
  if (phase == "visit") try {
      return visit(argv[2], argv[3], argv[4], argc > 5 ? std::atoi(argv[5]) : 0);
    } catch (const std::exception& e) { return fail(e.what()); }
  const int s1 = std::atoi(argv[3]), s2 = argc > 4 ? std::atoi(argv[4]) : 0;
  try {
    auto pg = ddp::init_process_group<ddp::gloo>();
    const int r = pg.rank(), w = pg.size();
    if (global_batch % w != 0)
      return fail("the global batch does not split over " + std::to_string(w) + " ranks");
    const unsigned other_seed = 1000u + 17u * static_cast<unsigned>(r); // loading must replace these
    const bool save = phase == "save";
    const int from = save ? 0 : s1, to = save ? s1 : s1 + s2;
    const ddp::training_progress at_s1{.step = static_cast<std::uint64_t>(s1),
                                       .epoch = 0,
                                       .samples = static_cast<std::uint64_t>(s1) * global_batch};

    // Sharded parameters, Adam's moments in 1/W shards.
    mlp<float> a(dims, save ? 5u : other_seed, false);
    ddp::sharded_data_parallel sdp(a, pg);
    ddp::optim::adam opt(sdp, adam_opts);
    if (!save) {
      const auto p = ddp::load_checkpoint(dir + "/sharded.ckpt", sdp, opt);
      if (p.step != at_s1.step || p.samples != at_s1.samples || opt.steps() != at_s1.step)
        return fail("loaded progress step=" + std::to_string(p.step) +
                    " samples=" + std::to_string(p.samples));
    }
    for (int s = from; s < to; ++s) {
      local_step(a, s, r, w);
      sdp.synchronize();
      opt.step();
    }
    if (save) ddp::save_checkpoint(dir + "/sharded.ckpt", sdp, opt, at_s1);
    const double da = ddp_test::relative_difference(a.flat(), oracle(trained::adam, to));

    // SGD's momentum (one value per element), saved from size_capped buckets and loaded into
    // per-tensor ones: the file does not depend on the bucketing.
    mlp<float> m(dims, save ? 6u : other_seed, false);
    double dm = 0;
    auto momentum_run = [&](auto& sharded) {
      ddp::optim::sgd opt_m(sharded, momentum_opts);
      if (!save) (void)ddp::load_checkpoint(dir + "/momentum.ckpt", sharded, opt_m);
      for (int s = from; s < to; ++s) {
        local_step(m, s, r, w);
        sharded.synchronize();
        opt_m.step();
      }
      if (save) ddp::save_checkpoint(dir + "/momentum.ckpt", sharded, opt_m, at_s1);
      dm = ddp_test::relative_difference(m.flat(), oracle(trained::momentum, to));
    };
    if (save) {
      ddp::sharded_data_parallel<mlp<float>, ddp::gloo> sm(m, pg);
      momentum_run(sm);
    } else {
      ddp::sharded_data_parallel<mlp<float>, ddp::gloo, ddp::bucketing::per_tensor> sm(m, pg);
      momentum_run(sm);
    }

    // Replicated parameters, a stateless optimizer.
    mlp<float> b(dims, save ? 7u : other_seed, false);
    ddp::distributed_data_parallel dp(b, pg);
    if (!save) {
      const auto p = ddp::load_checkpoint(dir + "/ddp.ckpt", dp);
      if (p.step != at_s1.step) return fail("loaded step " + std::to_string(p.step));
    }
    for (int s = from; s < to; ++s) {
      local_step(b, s, r, w);
      dp.synchronize();
      b.sgd(sgd_lr);
    }
    if (save) ddp::save_checkpoint(dir + "/ddp.ckpt", dp, at_s1);
    const double db = ddp_test::relative_difference(b.flat(), oracle(trained::plain_sgd, to));

    // Float summation order differs from the oracle's (per-rank means, then the mean of those).
    if (da > 1e-5 || dm > 1e-5 || db > 1e-5)
      return fail("rank " + std::to_string(r) + " of " + std::to_string(w) + " after step " +
                  std::to_string(to) + ": sharded+adam differs by " + std::to_string(da) +
                  ", sharded+momentum by " + std::to_string(dm) + ", ddp+sgd by " + std::to_string(db));
    std::printf(
        "RESULT ok phase=%s rank=%d size=%d step=%d adam_diff=%.3g momentum_diff=%.3g sgd_diff=%.3g\n",
        phase.c_str(), r, w, to, da, dm, db);
    return 0;
  } catch (const std::exception& e) { return fail(e.what()); }
}
