// ddp::work on the queue every backend runs its collectives on
// (ddp/work.hpp, ddp/detail/backend/{ordered,collective}_queue.hpp): wait(),
// done(), and stream_wait(stream), the stream-ordered wait, with deferred
// completion. A collective that completes on a device stream (NCCL) publishes
// how a stream waits for it and hands its work to something that finishes it
// when the device is done (NCCL's completion watch), so the queue moves on at
// once. Here a thread stands in for the device: it finishes what it was handed
// when the test releases it. What is checked is the contract (when stream_wait
// returns, what it calls, what it throws, what the flight recorder says), with
// real threads; tests/gpu/test_nccl.cpp checks the device side on a GPU.
#include <ddp/detail/backend/collective_queue.hpp>
#include <ddp/detail/data_parallel/unchecked_works.hpp>
#include <ddp/error.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace std::chrono_literals;
using ddp::detail::collective_queue;
using ddp::detail::flight_state;
using ddp::detail::work_state;

namespace {
/// A stand-in for a cudaStream_t: stream_wait passes the pointer through untouched.
CUstream_st* fake_stream(int k) {
  return reinterpret_cast<CUstream_st*>(static_cast<std::uintptr_t>(0x1000 + k));
}

/// Finishes the works handed to it, in order, each once released (or, with
/// fail(), fails them and the group, as NCCL's watch does). Declared after the
/// queue, as NCCL's watch is (a finish records into the queue's flight
/// recorder). Finishes everything left when it goes.
class stand_in_device {
public:
  explicit stand_in_device(collective_queue* group) : group_(group) {}
  ~stand_in_device() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    t_.join();
  }
  /// In a task: publishes the collective as queued on the device (calls to
  /// the published function record their stream in `ordered`) and hands it over.
  void take(work_state& self, std::atomic<CUstream_st*>* ordered) {
    auto st = self.shared_from_this();
    self.queued_on_device([ordered](CUstream_st* s) {
      if (ordered) *ordered = s;
    });
    std::lock_guard lock(mu_);
    q_.push_back(std::move(st));
    cv_.notify_all();
  }
  void release_one() { signal(+1, nullptr); }
  void fail(std::exception_ptr why) { signal(0, std::move(why)); }

private:
  void signal(int n, std::exception_ptr why) {
    std::lock_guard lock(mu_);
    releases_ += n;
    if (why) failure_ = std::move(why);
    cv_.notify_all();
  }
  void run() {
    for (;;) {
      std::shared_ptr<work_state> st;
      std::exception_ptr why;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (!q_.empty() && (releases_ > 0 || failure_)); });
        if (q_.empty()) return;
        st = std::move(q_.front());
        q_.pop_front();
        if (failure_ && !stop_)
          why = failure_;
        else if (releases_ > 0)
          --releases_;
      }
      if (why && group_) group_->abort(why);
      st->finish(why);
    }
  }
  collective_queue* group_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<work_state>> q_;
  int releases_ = 0;
  std::exception_ptr failure_;
  bool stop_ = false;
  std::thread t_{[this] { run(); }};
};

flight_state state_of(collective_queue& q, std::uint64_t seq) {
  for (auto& e : q.recorder().snapshot())
    if (e.seq == seq) return e.state;
  FAIL("no flight entry " << seq);
  return flight_state::queued;
}

/// Waits (bounded) until `pred` holds: the stand-in finishes on its own thread.
template <class P> bool eventually(P pred) {
  for (int i = 0; i < 2000 && !pred(); ++i)
    std::this_thread::sleep_for(1ms);
  return pred();
}
} // namespace

TEST_CASE("stream_wait returns once the collective is queued on the device; its work finishes later") {
  collective_queue q(0, 5s, ", NCCL");
  stand_in_device device(&q);
  std::atomic<CUstream_st*> ordered{nullptr};
  auto w = q.submit("all_reduce", 4, ddp::dtype::f32, false,
                    [&](const std::string&, work_state& self) { device.take(self, &ordered); });
  w.stream_wait(fake_stream(7));
  CHECK(ordered.load() == fake_stream(7));
  CHECK_FALSE(w.done()); // the device has not finished it: nothing waited for that
  q.drain();             // the task returned, and still the work is not done
  CHECK_FALSE(w.done());
  CHECK(state_of(q, 0) == flight_state::running);
  device.release_one();
  w.wait();
  CHECK(w.done());
  CHECK(eventually([&] { return state_of(q, 0) == flight_state::done; }));
  w.stream_wait(fake_stream(8)); // after the end nothing is ordered: the backend may reuse its event
  CHECK(ordered.load() == fake_stream(7));
}

TEST_CASE("collectives on the device are queued back to back: the second's stream_wait does not wait for the "
          "first to finish") {
  collective_queue q(0, 5s, ", NCCL");
  stand_in_device device(&q);
  auto on_device = [&](const std::string&, work_state& self) { device.take(self, nullptr); };
  auto first = q.submit("all_reduce", 4, ddp::dtype::f32, false, on_device);
  auto second = q.submit("all_reduce", 4, ddp::dtype::f32, false, on_device);
  second.stream_wait(fake_stream(1)); // with a host wait per collective in the queue, this would hang
  CHECK_FALSE(first.done());
  CHECK_FALSE(second.done());
  device.release_one();
  device.release_one();
  first.wait();
  second.wait();
}

TEST_CASE("stream_wait of a collective that completes on the host is wait()") {
  collective_queue q(0, 5s);
  std::atomic<bool> ran{false};
  auto w = q.submit("all_reduce", 4, ddp::dtype::f32, false, [&](const std::string&, work_state&) {
    std::this_thread::sleep_for(50ms);
    ran = true;
  });
  w.stream_wait(nullptr);
  CHECK(ran.load());
  CHECK(w.done());
  CHECK(state_of(q, 0) == flight_state::done);
}

TEST_CASE("a failure before the collective was queued: stream_wait rethrows it, the group refuses the next") {
  collective_queue q(0, 5s, ", NCCL");
  bool called = false;
  auto w = q.submit("all_reduce", 4, ddp::dtype::f32, false, [&](const std::string& what, work_state&) {
    throw ddp::error(ddp::error_kind::backend, what + ": ncclAllReduce failed: unhandled cuda error", 0);
  });
  CHECK_THROWS_WITH_AS(w.stream_wait(fake_stream(1)), doctest::Contains("ncclAllReduce failed"), ddp::error);
  CHECK(state_of(q, 0) == flight_state::failed);
  auto later = q.submit("all_reduce", 4, ddp::dtype::f32, false,
                        [&](const std::string&, work_state&) { called = true; });
  CHECK_THROWS_WITH_AS(later.stream_wait(fake_stream(2)), doctest::Contains("ncclAllReduce failed"),
                       ddp::error);
  CHECK_FALSE(called);
}

TEST_CASE("a failure after the collective was queued: stream_wait returned, wait() reports it, the group "
          "refuses the next, the recorder says failed") {
  collective_queue q(0, 5s, ", NCCL");
  stand_in_device device(&q);
  auto w = q.submit("all_reduce", 4, ddp::dtype::f32, false,
                    [&](const std::string&, work_state& self) { device.take(self, nullptr); });
  w.stream_wait(fake_stream(3)); // returns: the failure is not known yet
  device.fail(std::make_exception_ptr(
      ddp::error(ddp::error_kind::timeout, "rank 0: all_reduce #0 timed out after 100 ms", 0)));
  CHECK_THROWS_WITH_AS(w.wait(), doctest::Contains("timed out"), ddp::error);
  CHECK(eventually([&] { return state_of(q, 0) == flight_state::failed; }));
  auto next = q.submit("all_reduce", 4, ddp::dtype::f32, false, [](const std::string&, work_state&) {});
  CHECK_THROWS_WITH_AS(next.stream_wait(fake_stream(4)), doctest::Contains("all_reduce #0 timed out"),
                       ddp::error);
}

TEST_CASE("a deferred work finished before its task returned: the bookkeeping still runs") {
  collective_queue q(0, 5s, ", NCCL");
  auto w = q.submit("broadcast", 4, ddp::dtype::f32, false, [&](const std::string&, work_state& self) {
    self.queued_on_device([](CUstream_st*) {});
    self.finish(nullptr); // the device was quicker than this thread
  });
  w.wait();
  CHECK(eventually([&] { return state_of(q, 0) == flight_state::done; }));
}

TEST_CASE("a deferred work finished twice keeps the first outcome") {
  auto st = std::make_shared<work_state>();
  st->queued_on_device([](CUstream_st*) {});
  st->finish(nullptr);
  st->finish(std::make_exception_ptr(ddp::error(ddp::error_kind::backend, "late failure", 0)));
  ddp::work w(st);
  w.wait(); // no throw: the completion came first
}

TEST_CASE("stream_wait gives up at the work's deadline, naming the collective") {
  // Nothing ever queues this one. Its timeout plus the 30 s margin wait() and
  // stream_wait() add comes to 100 ms (a real one is at least 30 s).
  auto st = std::make_shared<work_state>();
  st->what = "rank 0: broadcast #5 (1 x int32, NCCL)";
  st->timeout = std::chrono::milliseconds(-29'900);
  ddp::work w(st);
  CHECK_THROWS_WITH_AS(
      w.stream_wait(fake_stream(5)),
      doctest::Contains("rank 0: broadcast #5 (1 x int32, NCCL) was not queued within 100 ms"), ddp::error);
}

TEST_CASE("after stop() a submission fails at once, and the poison is still readable") {
  collective_queue q(0, 5s);
  q.stop();
  bool ran = false;
  auto w =
      q.submit("barrier", 1, ddp::dtype::i32, false, [&](const std::string&, work_state&) { ran = true; });
  CHECK_THROWS_WITH_AS(w.wait(), doctest::Contains("shutting down"), ddp::error);
  CHECK_FALSE(ran);
  CHECK(q.poisoned() == nullptr);
  q.abort(std::make_exception_ptr(ddp::error(ddp::error_kind::timeout, "late", 0)));
  CHECK(q.poisoned() != nullptr);
}

TEST_CASE("a default-constructed work is complete") {
  ddp::work w;
  CHECK(w.done());
  w.wait();
  w.stream_wait(fake_stream(0));
}

TEST_CASE("unchecked works: check() throws a known failure once; teardown logs each distinct failure once") {
  auto failed_with = [](std::exception_ptr why) {
    auto st = std::make_shared<work_state>();
    st->finish(why);
    return ddp::work(st);
  };
  auto group_error =
      std::make_exception_ptr(ddp::error(ddp::error_kind::timeout, "rank 1: all_reduce #4 timed out", 1));
  {
    ddp::detail::unchecked_works u(1);
    u.add(failed_with(group_error));
    CHECK_THROWS_WITH_AS(u.check(), doctest::Contains("all_reduce #4 timed out"), ddp::error);
    u.check(); // forgotten once thrown
    // stream_wait on a work that already failed throws it and keeps nothing to report again.
    CHECK_THROWS_WITH_AS(u.stream_wait(failed_with(group_error), fake_stream(9)),
                         doctest::Contains("all_reduce #4 timed out"), ddp::error);
    u.check();
  }
  // Teardown: stderr goes to a file while the works go.
  char path[] = "/tmp/ddp-unit-work-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  {
    ddp::detail::unchecked_works u(1);
    u.add(failed_with(group_error));
    u.add(failed_with(group_error));
    u.add(failed_with(std::make_exception_ptr(ddp::error(ddp::error_kind::backend, "another failure", 1))));
    u.add(ddp::work()); // fine
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  const std::string log = text.str();
  CHECK(log.find("[ddp rank 1] 2 collectives whose results a stream waited for failed") != std::string::npos);
  CHECK(log.find("all_reduce #4 timed out") != std::string::npos);
  CHECK(log.find("[ddp rank 1] a collective whose results") != std::string::npos);
  CHECK(log.find("another failure") != std::string::npos);
  std::size_t lines = 0;
  for (char c : log)
    lines += c == '\n' ? 1 : 0;
  CHECK(lines == 2);
}
