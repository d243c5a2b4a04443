// ddp::work on the ordered queue every backend runs its collectives on
// (ddp/work.hpp, ddp/detail/backend/ordered_queue.hpp): wait(), done(), and
// wait_on(stream), the stream-ordered wait. A collective that completes on a
// device stream (NCCL) publishes how a stream waits for it; here the task
// publishes a function that records the stream it was given, so what is
// checked is the handle's contract (when wait_on returns, what it calls, what
// it throws), with real threads. tests/gpu/test_nccl.cpp checks the device side.
#include <ddp/detail/backend/ordered_queue.hpp>
#include <ddp/error.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using ddp::detail::ordered_queue;
using ddp::detail::work_state;

namespace {
/// A stand-in for a cudaStream_t: wait_on passes the pointer through untouched.
CUstream_st* fake_stream(int k) {
  return reinterpret_cast<CUstream_st*>(static_cast<std::uintptr_t>(0x1000 + k));
}
} // namespace

/// Lets a "running" collective end 2 s from now, from its own thread; declared
/// before the queue, so it outlives the worker whatever a failed check leaves.
struct release_later {
  std::promise<void> p;
  std::shared_future<void> released = p.get_future().share();
  std::atomic<bool> fired{false};
  std::jthread t{[this] {
    std::this_thread::sleep_for(2s);
    fired = true;
    p.set_value();
  }};
};

TEST_CASE("wait_on returns once the collective is queued on the device, before it finishes") {
  release_later end;
  std::atomic<CUstream_st*> ordered{nullptr};
  ordered_queue q;
  auto w = q.submit(
      [&](work_state& self) {
        self.queued_on_device([&](CUstream_st* s) { ordered = s; });
        end.released.wait(); // the collective is still "running" on the device
      },
      "rank 0: all_reduce #0 (4 x float32, NCCL)", 5s);
  w.wait_on(fake_stream(7));
  CHECK_FALSE(end.fired.load()); // it did not wait for the end (2 s away)
  CHECK(ordered.load() == fake_stream(7));
  CHECK_FALSE(w.done());
  w.wait();
  CHECK(w.done());
  // After the end it still orders the stream (the event has completed: a no-op on the device).
  w.wait_on(fake_stream(8));
  CHECK(ordered.load() == fake_stream(8));
}

TEST_CASE("wait_on of a collective that completes on the host is wait()") {
  ordered_queue q;
  std::atomic<bool> ran{false};
  auto w = q.submit(
      [&](work_state&) {
        std::this_thread::sleep_for(50ms);
        ran = true;
      },
      "rank 0: all_reduce #0 (4 x float32)", 5s);
  w.wait_on(nullptr);
  CHECK(ran.load());
  CHECK(w.done());
}

TEST_CASE("wait_on rethrows a failure before the collective was queued, and calls nothing") {
  ordered_queue q;
  bool called = false;
  auto w = q.submit(
      [&](work_state&) {
        throw ddp::error(ddp::error_kind::backend, "rank 0: ncclAllReduce failed: unhandled cuda error", 0);
      },
      "rank 0: all_reduce #0 (4 x float32, NCCL)", 5s);
  CHECK_THROWS_WITH_AS(w.wait_on(fake_stream(1)), doctest::Contains("ncclAllReduce failed"), ddp::error);
  CHECK_FALSE(called);
  // The queue is poisoned: a later collective fails with the same error, stream-ordered or not.
  auto later = q.submit([&](work_state&) { called = true; }, "rank 0: all_reduce #1 (4 x float32, NCCL)", 5s);
  CHECK_THROWS_WITH_AS(later.wait_on(fake_stream(2)), doctest::Contains("ncclAllReduce failed"), ddp::error);
  CHECK_FALSE(called);
}

TEST_CASE("a failure after the collective was queued: wait_on returned, wait() reports it, the group refuses "
          "the next one") {
  release_later end;
  ordered_queue q;
  auto w = q.submit(
      [&](work_state& self) {
        self.queued_on_device([](CUstream_st*) {});
        end.released.wait();
        throw ddp::error(ddp::error_kind::timeout, "rank 0: all_reduce #0 timed out after 100 ms", 0);
      },
      "rank 0: all_reduce #0 (4 x float32, NCCL)", 5s);
  w.wait_on(fake_stream(3)); // returns: the failure is not known yet
  CHECK_FALSE(end.fired.load());
  CHECK_THROWS_WITH_AS(w.wait(), doctest::Contains("timed out"), ddp::error);
  auto next = q.submit([](work_state&) {}, "rank 0: all_reduce #1 (4 x float32, NCCL)", 5s);
  CHECK_THROWS_WITH_AS(next.wait_on(fake_stream(4)), doctest::Contains("all_reduce #0 timed out"),
                       ddp::error);
}

TEST_CASE("wait_on gives up at the work's deadline, naming the collective") {
  // Nothing ever queues this one. Its timeout plus the 30 s margin wait() and
  // wait_on() add comes to 100 ms (a real one is at least 30 s).
  auto st = std::make_shared<work_state>();
  st->what = "rank 0: broadcast #5 (1 x int32, NCCL)";
  st->timeout = std::chrono::milliseconds(-29'900); // limit: 100 ms
  ddp::work w(st);
  CHECK_THROWS_WITH_AS(
      w.wait_on(fake_stream(5)),
      doctest::Contains("rank 0: broadcast #5 (1 x int32, NCCL) was not queued within 100 ms"), ddp::error);
}

TEST_CASE("a default-constructed work is complete") {
  ddp::work w;
  CHECK(w.done());
  w.wait();
  w.wait_on(fake_stream(0));
}
