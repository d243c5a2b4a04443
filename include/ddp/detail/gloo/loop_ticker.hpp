// Closing a Gloo TCP pair waits for its device's event loop to go round once
// (tcp::Loop::unregisterDescriptor, "to make sure the handler for this fd is
// not called once this function returns"), and the loop goes round when an
// event arrives or when its epoll_wait gives up, after 10 ms. Pairs close one
// after another, in a context's teardown and when Gloo fails a whole context
// (a wait that timed out: process_group::abort uses that), so a rank paid up
// to 10 ms per peer, which adds up in a large group's teardown
// (docs/performance.md, Rendezvous and the Gloo mesh).
//
// A gloo_loop_ticker registers an eventfd with the device's loop. While a
// gloo_loop_ticker::burst lives, a thread writes that eventfd every 50 µs, so
// the loop goes round at least that often and each close waits microseconds.
// Outside bursts the eventfd is quiet and costs the loop nothing. Stopping the
// loop itself, when its device goes, waits for a tick too: the ticker, holding
// the device last, lets it go during a burst.
//
// Being ddp's foothold on the loop's thread, the ticker also moves that thread
// to SCHED_BATCH, once, from its first event (docs/design-notes.md,
// "Note [Gloo's loop thread]"): a batch thread's wakeups do not preempt the
// running thread. The loop spins while a thread posting a send or receive
// holds the pair's lock, and a loop thread woken by that very post's loopback
// write preempted the poster inside its write: both then waited for the next
// scheduler tick (4 ms) instead of microseconds. Only where every peer is on
// this node by default: the stall is loopback's, and across nodes a batch loop
// would wait for a tick wherever every core computes.
#ifndef DDP_DETAIL_GLOO_LOOP_TICKER_HPP
#define DDP_DETAIL_GLOO_LOOP_TICKER_HPP

#include <ddp/config.hpp>
#include <ddp/detail/common/env.hpp>

#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Whether a mesh's loop thread should run SCHED_BATCH: DDP_GLOO_LOOP_BATCH=0
/// or 1 decides; unset, only when the mesh's ranks share one node (`nnodes`).
inline bool gloo_loop_batch_wanted(int nnodes) {
  if (auto v = getenv_str("DDP_GLOO_LOOP_BATCH"); v && !v->empty()) return *v != "0";
  return nnodes == 1;
}

class gloo_loop_ticker final : ::gloo::transport::tcp::Handler {
public:
  /// How often a burst wakes the loop: a close then waits about this long
  /// instead of up to 10 ms (see the top of this file).
  static constexpr std::chrono::microseconds burst_period{50};

  /// Registers with `device`'s event loop; a device of another transport
  /// than TCP gets a ticker that does nothing. `batch_loop`: move the loop's
  /// thread to SCHED_BATCH (see the top of this file).
  explicit gloo_loop_ticker(const std::shared_ptr<::gloo::transport::Device>& device, bool batch_loop)
      : device_(std::dynamic_pointer_cast<::gloo::transport::tcp::Device>(device)), to_batch_(batch_loop) {
    if (!device_) return;
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0)
      throw std::runtime_error(std::string("cannot create an eventfd for Gloo's event loop: ") +
                               std::strerror(errno));
    try {
      std::lock_guard lock(mu_); // the loop's thread, started before fd_ was set, reads it under mu_
      device_->registerDescriptor(fd_, EPOLLIN, this);
    } catch (...) {
      ::close(fd_);
      throw;
    }
    if (batch_loop) {
      const std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one); // the first event sets the policy
    }
  }

  gloo_loop_ticker(const gloo_loop_ticker&) = delete;
  gloo_loop_ticker& operator=(const gloo_loop_ticker&) = delete;

  /// Where the ticker holds the device's last reference (a mesh context
  /// gives up its own first), the device goes with it, and so does its loop:
  /// tcp::Loop's destructor waits for the loop's thread to see it is done,
  /// after its next tick, which the burst brings at once; the eventfd leaves
  /// with the loop's epoll. Otherwise the eventfd is unregistered, which
  /// waits one plain tick: nothing wakes the loop for a descriptor it no
  /// longer watches. (Only a reference this ticker holds can become the
  /// last: another holder letting go meanwhile makes the unregistering
  /// needless, not wrong.)
  ~gloo_loop_ticker() {
    if (fd_ < 0) return;
    if (device_.use_count() > 1) {
      try {
        device_->unregisterDescriptor(fd_, this);
      } catch (const std::exception&) {} // epoll_ctl failed: the fd is closed below all the same
      device_.reset();
    } else {
      burst quick(*this);
      device_.reset();
    }
    {
      std::lock_guard lock(mu_); // after the loop's last call, which took mu_ (TSan sees the order)
      closed_ = true;
    }
    ::close(fd_);
  }

  /// While it lives, the loop goes round every burst_period. Bursts serve
  /// teardowns and failures, so one that cannot start its thread does
  /// nothing: closing is then as slow as Gloo's, not an error.
  class burst {
  public:
    explicit burst(gloo_loop_ticker& t) noexcept {
      const int fd = t.fd_;
      if (fd < 0) return;
      try {
        pump_ = std::thread([this, fd] {
          std::unique_lock lock(mu_);
          do {
            const std::uint64_t one = 1;
            [[maybe_unused]] auto n = ::write(fd, &one, sizeof one); // EAGAIN: one is pending already
          } while (!stop_cv_.wait_for(lock, burst_period, [this] { return stop_; }));
        });
      } catch (...) {} // no thread (std::system_error, std::bad_alloc): no burst
    }
    burst(const burst&) = delete;
    burst& operator=(const burst&) = delete;
    ~burst() {
      if (!pump_.joinable()) return;
      {
        std::lock_guard lock(mu_);
        stop_ = true;
      }
      stop_cv_.notify_one();
      pump_.join();
    }

  private:
    std::mutex mu_;
    std::condition_variable stop_cv_;
    bool stop_ = false;
    std::thread pump_; // last: started once the members it uses exist
  };

private:
  void handleEvents(int /*events*/) override { // on the loop's thread
    std::lock_guard lock(mu_);
    if (closed_) return;
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(fd_, &count, sizeof count); // empties it: the loop sleeps again
    if (to_batch_) {
      to_batch_ = false;
      // From the default policy only: a process run under a real-time policy
      // keeps it. Lowering needs no privilege; where it fails all the same (a
      // seccomp filter), the loop keeps Gloo's default: slower, not wrong.
      int policy = SCHED_OTHER;
      sched_param param{};
      if (::pthread_getschedparam(::pthread_self(), &policy, &param) == 0 && policy == SCHED_OTHER) {
        const sched_param normal{0};
        [[maybe_unused]] int rc = ::pthread_setschedparam(::pthread_self(), SCHED_BATCH, &normal);
      }
    }
  }

  std::shared_ptr<::gloo::transport::tcp::Device> device_;
  std::mutex mu_; ///< orders the loop's reads of fd_ after its setting, and before its closing
  int fd_ = -1;
  bool closed_ = false;
  bool to_batch_; ///< the loop's thread is still to move to SCHED_BATCH (under mu_ once registered)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_LOOP_TICKER_HPP
