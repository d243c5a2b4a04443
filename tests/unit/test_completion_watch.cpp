// The NCCL backend's completion watch (ddp/detail/backend/completion_watch.hpp)
// with completions of this test's own: a flag set by the test stands in for a
// CUDA event (ready, not yet, or a device error), the health hook for
// ncclCommGetAsyncError. The watch's thread, deadlines, group failure and
// shutdown are the real ones; tests/gpu/test_nccl.cpp runs it on NCCL.
#include <ddp/detail/backend/completion_watch.hpp>
#include <ddp/error.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using ddp::detail::work_state;

namespace {
enum : int { pending = 0, complete = 1, device_error = 2 };

struct flag_completion {
  std::shared_ptr<std::atomic<int>> flag = std::make_shared<std::atomic<int>>(pending);
  bool ready() const {
    if (*flag == device_error)
      throw ddp::error(ddp::error_kind::backend, "rank 0: an illegal memory access", 0);
    return *flag == complete;
  }
};
using watch = ddp::detail::completion_watch<flag_completion>;
using clock_type = watch::clock;

/// What the hooks saw, and the communicator's health the test sets.
struct group {
  std::mutex mu;
  std::vector<std::string> failures; ///< the group's error, once poisoned (as the queue keeps the first)
  std::exception_ptr poisoned;
  std::atomic<bool> aborted{false};
  std::atomic<bool> started{false};
  std::atomic<int> aborts{0};
  std::vector<ddp::work> watched; ///< set by a test: how many were done when poison and abort ran
  std::atomic<int> done_at_poison{-1}, done_at_abort{-1};

  int done_count() {
    int n = 0;
    for (auto& w : watched)
      n += w.done() ? 1 : 0;
    return n;
  }

  watch::hooks hooks() {
    return {.on_start = [this] { started = true; },
            .health = [this](const std::string& what) -> std::exception_ptr {
              if (!aborted) return nullptr;
              return std::make_exception_ptr(
                  ddp::error(ddp::error_kind::peer_lost, what + " failed: remote process exited", -1));
            },
            .poison =
                [this](std::exception_ptr why) {
                  std::lock_guard lock(mu);
                  if (done_at_poison < 0) done_at_poison = done_count();
                  if (!poisoned) {
                    poisoned = why;
                    try {
                      std::rethrow_exception(why);
                    } catch (const std::exception& e) { failures.emplace_back(e.what()); }
                  }
                  return poisoned;
                },
            .abort =
                [this] {
                  std::lock_guard lock(mu);
                  done_at_abort = done_count();
                  ++aborts;
                },
            // Health only at completions: the test of that path must not pass
            // through a periodic check.
            .health_every = std::chrono::hours(1)};
  }
  std::size_t failed_times() {
    std::lock_guard lock(mu);
    return failures.size();
  }
};

/// Waits (bounded: 2 s) until `pred` holds: hooks run on the watcher's thread.
template <class P> bool eventually_true(P pred) {
  for (int i = 0; i < 2000 && !pred(); ++i)
    std::this_thread::sleep_for(1ms);
  return pred();
}

std::shared_ptr<work_state> deferred_state(std::string what) {
  auto st = std::make_shared<work_state>();
  st->what = std::move(what);
  st->timeout = 5s;
  st->queued_on_device([](CUstream_st*) {});
  return st;
}

std::string failure_of(const std::shared_ptr<work_state>& st) {
  try {
    ddp::work(st).wait();
  } catch (const std::exception& e) { return e.what(); }
  return "";
}
} // namespace

TEST_CASE("works finish in order as their completions become ready; drain waits for all") {
  group g;
  watch w(0, 5s, g.hooks());
  std::vector<std::shared_ptr<work_state>> states;
  std::vector<flag_completion> done(3);
  for (int i = 0; i < 3; ++i) {
    states.push_back(deferred_state("rank 0: all_reduce #" + std::to_string(i) + " (4 x float32, NCCL)"));
    w.watch(states.back(), done[static_cast<std::size_t>(i)], clock_type::now() + 5s, states.back()->what);
  }
  // In order: the second completing first finishes nothing until the first does.
  *done[1].flag = complete;
  std::this_thread::sleep_for(20ms);
  for (auto& st : states)
    CHECK_FALSE(ddp::work(st).done());
  *done[0].flag = complete;
  ddp::work(states[0]).wait();
  ddp::work(states[1]).wait();
  CHECK_FALSE(ddp::work(states[2]).done());
  *done[2].flag = complete;
  w.drain();
  CHECK(g.started.load());
  for (auto& st : states)
    CHECK(failure_of(st).empty());
  CHECK(g.failed_times() == 0);
}

TEST_CASE("a collective past its deadline fails the group once, naming it, and every work outstanding") {
  group g;
  watch w(0, 100ms, g.hooks());
  auto first = deferred_state("rank 0: all_reduce #7 (4 x float32, NCCL)");
  auto second = deferred_state("rank 0: broadcast #8 (2 x int32, NCCL)");
  {
    std::lock_guard lock(g.mu);
    g.watched = {ddp::work(first), ddp::work(second)};
  }
  w.watch(first, flag_completion{}, clock_type::now() + 100ms, first->what);
  w.watch(second, flag_completion{}, clock_type::now() + 100ms, second->what);
  CHECK(failure_of(first).find("all_reduce #7 (4 x float32, NCCL) timed out after 100 ms") !=
        std::string::npos);
  CHECK(failure_of(second).find("all_reduce #7") != std::string::npos); // the group's error, first one's name
  CHECK(g.failed_times() == 1);
  CHECK(eventually_true([&] { return g.aborts == 1; }));
  CHECK(g.done_at_poison == 0); // refuse first, then fail the works, and only then abort
  CHECK(g.done_at_abort == 2);  // (an abort may block: waiters must not wait for it)
  // Later ones fail at once with the same error.
  auto later = deferred_state("rank 0: all_reduce #9 (4 x float32, NCCL)");
  w.watch(later, flag_completion{}, clock_type::now() + 5s, later->what);
  CHECK(ddp::work(later).done());
  CHECK(failure_of(later).find("all_reduce #7") != std::string::npos);
  CHECK(g.failed_times() == 1);
}

TEST_CASE("a completion after the communicator was aborted is a failure, not a result") {
  group g;
  watch w(0, 5s, g.hooks());
  auto st = deferred_state("rank 0: all_reduce #3 (4 x float32, NCCL)");
  flag_completion done;
  w.watch(st, done, clock_type::now() + 5s, st->what);
  std::this_thread::sleep_for(5ms); // the watcher polls it (health is checked only at completions here)
  g.aborted = true;                 // then, e.g., the worker aborts the communicator: the kernels exit ...
  *done.flag = complete;            // ... and the event completes
  CHECK(failure_of(st).find("all_reduce #3 (4 x float32, NCCL) failed: remote process exited") !=
        std::string::npos);
  CHECK(g.failed_times() == 1);
}

TEST_CASE("the communicator's asynchronous error fails an outstanding collective before its deadline") {
  group g;
  auto h = g.hooks();
  h.health_every = std::chrono::microseconds(1000);
  watch w(0, 5s, std::move(h));
  auto st = deferred_state("rank 0: reduce_scatter #4 (8 x float32, NCCL)");
  w.watch(st, flag_completion{}, clock_type::now() + 5s, st->what);
  std::this_thread::sleep_for(10ms);
  CHECK_FALSE(ddp::work(st).done());
  const auto t0 = clock_type::now();
  g.aborted = true;
  CHECK(failure_of(st).find("reduce_scatter #4") != std::string::npos);
  CHECK(clock_type::now() - t0 < 4s); // long before the 5 s deadline
}

TEST_CASE("a device error while polling fails the group") {
  group g;
  watch w(0, 5s, g.hooks());
  auto st = deferred_state("rank 0: all_gather #2 (4 x float32, NCCL)");
  flag_completion done;
  w.watch(st, done, clock_type::now() + 5s, st->what);
  *done.flag = device_error;
  CHECK(failure_of(st).find("illegal memory access") != std::string::npos);
  CHECK(g.failed_times() == 1);
}

TEST_CASE("fail_all from another thread (the worker found an error) fails what is outstanding, once") {
  group g;
  watch w(0, 5s, g.hooks());
  auto st = deferred_state("rank 0: all_reduce #5 (4 x float32, NCCL)");
  w.watch(st, flag_completion{}, clock_type::now() + 5s, st->what);
  std::thread worker([&] {
    w.fail_all(std::make_exception_ptr(
        ddp::error(ddp::error_kind::backend, "rank 0: ncclAllReduce failed: unhandled system error", 0)));
  });
  worker.join();
  CHECK(failure_of(st).find("unhandled system error") != std::string::npos);
  // A second failure (e.g. the worker's own timeout racing the watcher's) gets the group's error.
  auto other = deferred_state("rank 0: all_reduce #6 (4 x float32, NCCL)");
  w.fail_all(std::make_exception_ptr(ddp::error(ddp::error_kind::backend, "a second one", 0)));
  w.watch(other, flag_completion{}, clock_type::now() + 5s, other->what);
  CHECK(failure_of(other).find("unhandled system error") != std::string::npos);
  CHECK(g.failed_times() == 1);
  CHECK(g.failures.front().find("unhandled system error") != std::string::npos);
  CHECK(g.aborts == 1); // fail_all ran the hooks on this thread
}

TEST_CASE("stop() waits for what is outstanding, then a watch() fails at once") {
  group g;
  auto w = std::make_unique<watch>(0, 5s, g.hooks());
  auto st = deferred_state("rank 0: all_reduce #6 (4 x float32, NCCL)");
  flag_completion done;
  w->watch(st, done, clock_type::now() + 5s, st->what);
  std::thread device([flag = done.flag] {
    std::this_thread::sleep_for(100ms);
    *flag = complete;
  });
  w->stop();
  CHECK(ddp::work(st).done());
  CHECK(failure_of(st).empty());
  auto after = deferred_state("rank 0: barrier #7 (1 x int32, NCCL)");
  w->watch(after, flag_completion{}, clock_type::now() + 5s, after->what);
  CHECK(failure_of(after).find("shutting down") != std::string::npos);
  device.join();
  w.reset();
}

namespace {
/// Move-only, as NCCL's pooled event is: counts whether its work had finished
/// when the watch dropped it (NCCL gives the event back to its pool then).
struct owned_completion {
  owned_completion(std::shared_ptr<work_state> of, std::shared_ptr<std::atomic<int>> flag,
                   std::shared_ptr<std::atomic<int>> early, std::shared_ptr<std::atomic<int>> late)
      : of_(std::move(of)), flag_(std::move(flag)), early_(std::move(early)), late_(std::move(late)) {}
  owned_completion(owned_completion&&) noexcept = default;
  owned_completion& operator=(owned_completion&&) = delete;
  ~owned_completion() {
    if (of_) ++*(ddp::work(of_).done() ? late_ : early_);
  }
  bool ready() const { return *flag_ == complete; }

private:
  std::shared_ptr<work_state> of_;
  std::shared_ptr<std::atomic<int>> flag_, early_, late_;
};
} // namespace

TEST_CASE("a move-only completion is dropped only after its work finished: completed, failed or refused") {
  group g;
  auto early = std::make_shared<std::atomic<int>>(0), late = std::make_shared<std::atomic<int>>(0);
  auto flag = [] { return std::make_shared<std::atomic<int>>(pending); };
  using owned_watch = ddp::detail::completion_watch<owned_completion>;
  auto h = g.hooks();
  owned_watch w(0, 5s, owned_watch::hooks{h.on_start, h.health, h.poison, h.abort, h.health_every});
  auto ok = deferred_state("rank 0: all_reduce #0 (4 x float32, NCCL)");
  auto ok_flag = flag();
  w.watch(ok, owned_completion(ok, ok_flag, early, late), clock_type::now() + 5s, ok->what);
  *ok_flag = complete;
  CHECK(eventually_true([&] { return *late == 1; }));
  auto failed = deferred_state("rank 0: all_reduce #1 (4 x float32, NCCL)");
  w.watch(failed, owned_completion(failed, flag(), early, late), clock_type::now() + 5s, failed->what);
  w.fail_all(std::make_exception_ptr(ddp::error(ddp::error_kind::backend, "rank 0: a failure", 0)));
  CHECK(eventually_true([&] { return *late == 2; }));
  auto refused = deferred_state("rank 0: all_reduce #2 (4 x float32, NCCL)");
  w.watch(refused, owned_completion(refused, flag(), early, late), clock_type::now() + 5s, refused->what);
  CHECK(*late == 3);
  CHECK(*early == 0);
}
