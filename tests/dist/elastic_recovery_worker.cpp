// The ranks of the in-process recovery test (elastic_recovery.sh) and of its timing against a
// full restart (bench/elastic_recovery.sh). One model and data set: an MLP trained with DDP and
// plain SGD on a global batch of 6 (ddp::global_batches, sample-weighted) of 60 samples.
//   recover OUT TOTAL EVERY STEP_MS [broken|adam|adam-unheld|adam-held-once]  under ddp::elastic::run,
//       committing every EVERY steps; `broken` commits one step more than the parameters hold
//       (a restore that skips a step), which the oracle must catch. `adam`: sharded_data_parallel
//       and ddp::optim::adam handed to the state (its moments recovered); `adam-unheld`: the
//       same without state.hold(), so a recovery restarts the moments, which the oracle must catch;
//       `adam-held-once`: held in generation 0 only, which the next commit must refuse.
//   restart OUT TOTAL EVERY STEP_MS  the same loop under ddprun --max-restarts: a checkpoint
//       every EVERY steps, resumed by a restarted round.
//   compare A B  the relative difference of two parameter dumps.
// Under `recover`, ELASTIC_PAUSE=RANK:STEP:MS[:GENERATION][,...] makes job rank RANK print PAUSED
// and sleep MS after its commit of STEP in GENERATION (0 unless named; a survivor busy outside
// collectives, or one stuck), one pause per comma-separated spec; a pause ends early once the
// file OUT/resume.RANK.STEP exists (a test's event, not a time a loaded machine can miss), and
// ELASTIC_LAST_CALL_MS and ELASTIC_MAX_RECOVERIES set ddp::elastic::options' last_call and
// max_recoveries; ELASTIC_EXIT=RANK:CODE makes job rank RANK exit with CODE once it finished well
// (a survivor's failure at the very end, which the job's verdict must carry).
//   misuse  hold() of an optimizer that has stepped, and a commit after run() returned: both
//       must be refused with a ddp::error (MISUSE lines).
// Under ddprun --max-restarts, a joiner (DDP_ELASTIC_JOINER set) of `recover` prints JOINER-PID
// instead of PID, starts from other initial values (only the survivors' state can put it on the
// trajectory), prints JOINED with the step it received, and "JOINER ended-without" (exit 0) when
// the job ended before admitting it; ELASTIC_JOINER_EXIT0 makes it exit 0 at once, without joining.
// ELASTIC_HOLD_END=RANK holds job rank RANK after its loop returned until OUT/resume.end.RANK
// exists (60 s at most): the job has ended, and node 0's agent still serves its store.
// Each training job checks its final parameters against single-process training of the same
// global batches and dumps them to OUT/params.<rank>.
#include "../support/mlp.hpp"
#include "../support/whole_optimizer.hpp"

#include <ddp/checkpoint.hpp>
#include <ddp/ddp.hpp>
#include <ddp/elastic.hpp>
#include <ddp/global_batches.hpp>
#include <ddp/sharded_data_parallel.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using ddp_test::mlp;

namespace {

const std::vector<int> dims{6, 16, 12, 3};
constexpr std::size_t samples = 60, global_batch = 6;
constexpr float lr = 0.05f;
const ddp::optim::adam_options adam_opts{.lr = 1e-2, .weight_decay = 1e-3};
const auto data = ddp_test::make_batch<float>(dims.front(), dims.back(), static_cast<int>(samples), 11u);

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// This rank's share of global step `step`: its gradients (of the mean loss over the share) in
/// `net`; returns the share's size.
std::size_t local_gradients(mlp<float>& net, const ddp::global_batches<ddp::sampling::shuffled>& gb,
                            std::uint64_t step) {
  const auto b = gb.at(step);
  mlp<float>::mat x(dims.front(), static_cast<Eigen::Index>(b.local_samples())),
      y(dims.back(), static_cast<Eigen::Index>(b.local_samples()));
  for (std::size_t k = 0; k < b.indices.size(); ++k) {
    x.col(static_cast<Eigen::Index>(k)) = data.first.col(b.indices[k]);
    y.col(static_cast<Eigen::Index>(k)) = data.second.col(b.indices[k]);
  }
  net.zero_grad();
  if (b.local_samples() > 0) net.train_step(x, y);
  return b.local_samples();
}

/// Single-process Adam on the whole global batches: the trajectory of the `adam` runs.
std::vector<double> adam_oracle(int total) {
  mlp<float> net(dims, 7u, false);
  ddp_test::whole_optimizer<float> ref{true};
  ref.a = adam_opts;
  ddp::distributed_sampler<> sampler(samples, 1, 0, {.seed = 3});
  ddp::global_batches gb(sampler, global_batch);
  for (int s = 0; s < total; ++s) {
    local_gradients(net, gb, static_cast<std::uint64_t>(s));
    ref.step(net);
  }
  return net.flat();
}

/// One step on this rank's share of global step `step`; with `dp`, its gradients averaged by samples.
template <class Parallel>
void train_step(mlp<float>& net, const ddp::global_batches<ddp::sampling::shuffled>& gb, std::uint64_t step,
                Parallel* dp) {
  const auto b = gb.at(step);
  mlp<float>::mat x(dims.front(), static_cast<Eigen::Index>(b.local_samples())),
      y(dims.back(), static_cast<Eigen::Index>(b.local_samples()));
  for (std::size_t k = 0; k < b.indices.size(); ++k) {
    x.col(static_cast<Eigen::Index>(k)) = data.first.col(b.indices[k]);
    y.col(static_cast<Eigen::Index>(k)) = data.second.col(b.indices[k]);
  }
  net.zero_grad();
  if (dp) dp->set_samples(b.local_samples(), b.global_samples());
  if (b.local_samples() > 0) net.train_step(x, y);
  if (dp) dp->synchronize();
  net.sgd(lr);
}

std::vector<double> oracle(int total) {
  mlp<float> net(dims, 7u, false);
  ddp::distributed_sampler<> sampler(samples, 1, 0, {.seed = 3});
  ddp::global_batches gb(sampler, global_batch);
  for (int s = 0; s < total; ++s)
    train_step<ddp::distributed_data_parallel<mlp<float>, ddp::gloo>>(net, gb, static_cast<std::uint64_t>(s),
                                                                      nullptr);
  return net.flat();
}

void dump(const std::string& path, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(float)));
}

std::vector<double> undump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<double> v;
  float x;
  while (in.read(reinterpret_cast<char*>(&x), sizeof x))
    v.push_back(x);
  return v;
}

/// The job's end: this rank's parameters against the oracle, dumped.
int finish(const std::string& out, mlp<float>& net, int job_rank, const std::string& what, int total,
           bool adam = false) {
  const auto mine = net.flat();
  const double d = ddp_test::relative_difference(mine, adam ? adam_oracle(total) : oracle(total));
  dump(out + "/params." + std::to_string(job_rank), mine);
  std::printf("RESULT %s job_rank=%d pid=%d %s oracle_diff=%.3g\n", d <= 1e-5 ? "ok" : "fail", job_rank,
              static_cast<int>(::getpid()), what.c_str(), d);
  return d <= 1e-5 ? 0 : 1;
}

/// ELASTIC_PAUSE's specs (see the header comment).
struct pause_spec {
  int rank = -1, step = -1, ms = 0, generation = 0;
};
std::vector<pause_spec> pauses_from_env() {
  std::vector<pause_spec> pauses;
  if (const char* p = std::getenv("ELASTIC_PAUSE"))
    for (std::string rest = p; !rest.empty();) {
      const auto comma = rest.find(',');
      pause_spec one;
      std::sscanf(rest.substr(0, comma).c_str(), "%d:%d:%d:%d", &one.rank, &one.step, &one.ms,
                  &one.generation);
      pauses.push_back(one);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
  return pauses;
}
void pause_if_asked(const std::vector<pause_spec>& pauses, const std::string& out, int job_rank,
                    std::uint64_t done, std::uint64_t generation) {
  for (const auto& p : pauses)
    if (job_rank == p.rank && done == static_cast<std::uint64_t>(p.step) &&
        static_cast<long long>(generation) == p.generation) {
      std::printf("PAUSED rank=%d step=%d\n", job_rank, p.step);
      std::fflush(stdout);
      const std::string resume = out + "/resume." + std::to_string(job_rank) + "." + std::to_string(p.step);
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(p.ms);
      while (std::chrono::steady_clock::now() < until && ::access(resume.c_str(), F_OK) != 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

/// ELASTIC_HOLD_END=RANK: job rank RANK, its loop returned (the job's end is in the store),
/// prints HELD-END and stays until OUT/resume.end.RANK exists (60 s at most), so its agent, and
/// the store it serves on node 0, outlive the job's end for as long as a test needs.
void hold_end_if_asked(const std::string& out, int job_rank) {
  const char* h = std::getenv("ELASTIC_HOLD_END");
  if (!h || std::atoi(h) != job_rank) return;
  std::printf("HELD-END rank=%d\n", job_rank);
  std::fflush(stdout);
  const std::string resume = out + "/resume.end." + std::to_string(job_rank);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until && ::access(resume.c_str(), F_OK) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

/// The process's start: its PID line (JOINER-PID for a joiner ddprun started), and whether it is one.
const char* say_pid(int job_rank) {
  const char* joiner = std::getenv("DDP_ELASTIC_JOINER");
  if (joiner && std::getenv("ELASTIC_JOINER_EXIT0")) { // a joiner that ends well without joining
    std::printf("JOINER-PID rank=%d pid=%d id=%s\nJOINER exit0 id=%s\n", job_rank,
                static_cast<int>(::getpid()), joiner, joiner);
    std::fflush(stdout);
    std::_Exit(0);
  }
  if (joiner)
    std::printf("JOINER-PID rank=%d pid=%d id=%s\n", job_rank, static_cast<int>(::getpid()), joiner);
  else
    std::printf("PID rank=%d pid=%d\n", job_rank, static_cast<int>(::getpid()));
  std::fflush(stdout);
  return joiner;
}

/// The `adam` variants of recover(): sharded_data_parallel (shares are equal: 2 of 6 at world 3,
/// 3 at world 2, so its mean is the global batch's) and ddp::optim::adam, handed to the state
/// in every generation, in none (`never`) or in generation 0 only (`once`).
enum class held { always, never, once };
int recover_adam(const std::string& out, int total, int every, int step_ms, held how) {
  const int job_rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  const char* joiner = say_pid(job_rank);
  const auto pauses = pauses_from_env();
  mlp<float> net(dims, joiner ? 99u : 7u, false);
  ddp::elastic::state st(net);
  int world = 0;
  const bool ran =
      ddp::elastic::run(st, [&](ddp::process_group<ddp::gloo>& pg, const ddp::training_progress& from) {
        world = pg.size();
        ddp::sharded_data_parallel sdp(net, pg);
        ddp::optim::adam opt(sdp, adam_opts);
        if (how == held::always || (how == held::once && st.generation() == 0)) st.hold(opt);
        ddp::distributed_sampler<> sampler(samples, pg, {.seed = 3});
        ddp::global_batches gb(sampler, global_batch);
        for (auto s = from.step; s < static_cast<std::uint64_t>(total); ++s) {
          if (local_gradients(net, gb, s) * static_cast<std::size_t>(pg.size()) != global_batch)
            throw ddp::error(ddp::error_kind::config, "the adam runs need equal shares of the global batch");
          sdp.synchronize();
          opt.step();
          if (s == from.step && st.generation() > 0)
            std::printf("RECOVERED generation=%llu world=%d rank=%d from_step=%llu adam_steps=%llu "
                        "first_step_ns=%lld\n",
                        static_cast<unsigned long long>(st.generation()), pg.size(), pg.rank(),
                        static_cast<unsigned long long>(from.step),
                        static_cast<unsigned long long>(opt.steps()), static_cast<long long>(wall_ns()));
          std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
          if ((s + 1) % static_cast<std::uint64_t>(every) == 0) {
            st.commit({s + 1, gb.epoch_of(s + 1), gb.position_of(s + 1)});
            if (pg.rank() == 0)
              std::printf("STEP %llu world=%d\n", static_cast<unsigned long long>(s + 1), pg.size());
          }
          pause_if_asked(pauses, out, job_rank, s + 1, st.generation());
          std::fflush(stdout);
        }
      });
  if (!ran) {
    std::printf("JOINER ended-without id=%s rank=%d pid=%d\n", joiner, job_rank,
                static_cast<int>(::getpid()));
    return 0;
  }
  return finish(out, net, job_rank,
                "generation=" + std::to_string(st.generation()) + " world=" + std::to_string(world), total,
                true);
}

/// Misuse of hold(), which must be refused with a ddp::error naming it: an optimizer that has
/// stepped (its moments would be overwritten), and a commit after run() returned (the loop's
/// optimizer is gone). Prints MISUSE lines; returns 0 when both were refused as documented.
int misuse() {
  mlp<float> net(dims, 7u, false);
  ddp::elastic::state st(net);
  auto refused = [](const char* what, const std::function<void()>& f, const char* expected) {
    try {
      f();
    } catch (const ddp::error& e) {
      const bool ok =
          e.kind() == ddp::error_kind::config && std::string(e.what()).find(expected) != std::string::npos;
      std::printf("MISUSE %s %s: %s\n", what, ok ? "refused" : "wrong-error", e.what());
      return ok;
    }
    std::printf("MISUSE %s accepted\n", what);
    return false;
  };
  bool ok = true;
  const bool ran =
      ddp::elastic::run(st, [&](ddp::process_group<ddp::gloo>& pg, const ddp::training_progress&) {
        ddp::sharded_data_parallel sdp(net, pg);
        ddp::optim::adam stepped(sdp, adam_opts);
        ddp::distributed_sampler<> sampler(samples, pg, {.seed = 3});
        ddp::global_batches gb(sampler, global_batch);
        local_gradients(net, gb, 0);
        sdp.synchronize();
        stepped.step();
        ok &= refused(
            "hold-after-step", [&] { st.hold(stepped); }, "has taken 1 steps");
        ddp::optim::adam fresh(sdp, adam_opts);
        st.hold(fresh);
        sdp.synchronize();
        fresh.step();
        st.commit({1, gb.epoch_of(1), gb.position_of(1)});
      });
  ok &= ran; // no joiner here: the loop ran
  ok &= refused(
      "commit-after-run",
      [&] {
        st.commit({2, 0, 0});
      },
      "no optimizer is held now");
  return ok ? 0 : 1;
}

int recover(const std::string& out, int total, int every, int step_ms, bool broken) {
  const int job_rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  // A joiner (ddprun --max-restarts started it in a dead rank's slot) starts from other values:
  // only the state the survivors send can put it on the job's trajectory.
  const char* joiner = say_pid(job_rank);
  mlp<float> net(dims, joiner ? 99u : 7u, false);
  ddp::elastic::state st(net);
  int world = 0;
  const auto pauses = pauses_from_env();
  ddp::elastic::options o;
  if (const char* l = std::getenv("ELASTIC_LAST_CALL_MS"))
    o.last_call = std::chrono::milliseconds(std::atoi(l));
  if (const char* m = std::getenv("ELASTIC_MAX_RECOVERIES")) o.max_recoveries = std::atoi(m);
  if (const char* l = std::getenv("ELASTIC_LAST_STEP")) o.last_step = std::strtoull(l, nullptr, 10);
  bool joined = false;
  const bool ran = ddp::elastic::run(
      st,
      [&](ddp::process_group<ddp::gloo>& pg, const ddp::training_progress& from) {
        world = pg.size();
        ddp::distributed_data_parallel dp(net, pg);
        ddp::distributed_sampler<> sampler(samples, pg, {.seed = 3});
        ddp::global_batches gb(sampler, global_batch);
        for (auto s = from.step; s < static_cast<std::uint64_t>(total); ++s) {
          train_step(net, gb, s, &dp);
          if (s == from.step && st.generation() > 0)
            std::printf("RECOVERED generation=%llu world=%d rank=%d from_step=%llu first_step_ns=%lld\n",
                        static_cast<unsigned long long>(st.generation()), pg.size(), pg.rank(),
                        static_cast<unsigned long long>(from.step), static_cast<long long>(wall_ns()));
          if (s == from.step && joiner && !joined) {
            joined = true;
            std::printf("JOINED id=%s generation=%llu world=%d rank=%d received_step=%llu\n", joiner,
                        static_cast<unsigned long long>(st.generation()), pg.size(), pg.rank(),
                        static_cast<unsigned long long>(from.step));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
          if ((s + 1) % static_cast<std::uint64_t>(every) == 0) {
            const std::uint64_t claimed = broken && st.generation() == 0 ? s + 2 : s + 1;
            st.commit({claimed, gb.epoch_of(claimed), gb.position_of(claimed)});
            if (pg.rank() == 0)
              std::printf("STEP %llu world=%d\n", static_cast<unsigned long long>(s + 1), pg.size());
          }
          pause_if_asked(pauses, out, job_rank, s + 1, st.generation());
          std::fflush(stdout);
        }
      },
      o);
  if (!ran) {
    std::printf("JOINER ended-without id=%s rank=%d pid=%d\n", joiner ? joiner : "-", job_rank,
                static_cast<int>(::getpid()));
    return 0;
  }
  const int code =
      finish(out, net, job_rank,
             "generation=" + std::to_string(st.generation()) + " world=" + std::to_string(world), total);
  hold_end_if_asked(out, job_rank);
  int exit_rank = -1, exit_code = 0;
  if (const char* e = std::getenv("ELASTIC_EXIT")) std::sscanf(e, "%d:%d", &exit_rank, &exit_code);
  return code == 0 && job_rank == exit_rank ? exit_code : code;
}

int restart(const std::string& out, int total, int every, int step_ms) {
  auto pg = ddp::init_process_group<ddp::gloo>();
  const std::string path = out + "/restart.ckpt";
  const char* round = std::getenv("DDP_RESTART_ROUND");
  const bool resumed = round && std::string(round) != "0";
  std::printf("PID rank=%d pid=%d\n", pg.rank(), static_cast<int>(::getpid()));
  std::fflush(stdout);
  mlp<float> net(dims, 7u, false);
  ddp::distributed_data_parallel dp(net, pg);
  ddp::training_progress from{};
  if (resumed) from = ddp::load_checkpoint(path, dp);
  ddp::distributed_sampler<> sampler(samples, pg, {.seed = 3});
  ddp::global_batches gb(sampler, global_batch);
  for (auto s = from.step; s < static_cast<std::uint64_t>(total); ++s) {
    train_step(net, gb, s, &dp);
    if (s == from.step && resumed)
      std::printf("RECOVERED round=%s world=%d rank=%d from_step=%llu first_step_ns=%lld\n", round, pg.size(),
                  pg.rank(), static_cast<unsigned long long>(from.step), static_cast<long long>(wall_ns()));
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    if ((s + 1) % static_cast<std::uint64_t>(every) == 0) {
      ddp::save_checkpoint(path, dp, {s + 1, gb.epoch_of(s + 1), gb.position_of(s + 1)});
      if (pg.rank() == 0)
        std::printf("STEP %llu world=%d\n", static_cast<unsigned long long>(s + 1), pg.size());
    }
    std::fflush(stdout);
  }
  return finish(out, net, pg.rank(), "round=" + std::string(round ? round : "-"), total);
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "compare" && argc == 4) {
      std::printf("DIFF %.3g\n", ddp_test::relative_difference(undump(argv[2]), undump(argv[3])));
      return 0;
    }
    if (mode == "misuse") return misuse();
    if ((mode == "recover" || mode == "restart") && argc >= 6) {
      const int total = std::atoi(argv[3]), every = std::atoi(argv[4]), step_ms = std::atoi(argv[5]);
      if (mode == "restart") return restart(argv[2], total, every, step_ms);
      const std::string variant = argc > 6 ? argv[6] : "";
      if (variant == "adam" || variant == "adam-unheld" || variant == "adam-held-once")
        return recover_adam(argv[2], total, every, step_ms,
                            variant == "adam"          ? held::always
                            : variant == "adam-unheld" ? held::never
                                                       : held::once);
      return recover(argv[2], total, every, step_ms, variant == "broken");
    }
  } catch (const std::exception& e) {
    std::printf("RESULT fail pid=%d %s\n", static_cast<int>(::getpid()), e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: elastic_recovery_worker recover|restart OUT TOTAL EVERY STEP_MS "
                       "[broken|adam|adam-unheld|adam-held-once] | "
                       "compare A B | misuse\n");
  return 2;
}
