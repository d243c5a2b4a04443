// Where the peer-failure watch's news goes. The watch starts before the
// communicator (so that a rank failing while the connections form stops the
// others' waits: detail/fault/connect_interrupt.hpp); until the communicator
// exists, a failure interrupts its connect and is kept; once it exists, the
// kept failure, or a later one, goes to its fail_for_peer.
#ifndef DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_RELAY_HPP
#define DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_RELAY_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/fault/connect_interrupt.hpp>
#include <ddp/store.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Communicator> class peer_failure_relay {
public:
  /// What the communicator's connect registers its stop with (rendezvous::interrupt).
  std::shared_ptr<connect_interrupt> connecting() const { return connecting_; }

  /// The watch's news (from its thread, once).
  void deliver(const lost_rank& lost) {
    std::lock_guard lock(mu_);
    if (comm_) {
      comm_->fail_for_peer(lost);
      return;
    }
    kept_ = lost;
    connecting_->interrupt(lost.rank, lost.rank >= 0
                                          ? detail::message({"the store reports rank ", lost.rank, " lost"})
                                          : lost.reason); // the reason: in the error
  }

  /// The communicator exists: a failure heard while it connected reaches it now.
  void attach(Communicator& comm) {
    std::lock_guard lock(mu_);
    comm_ = &comm;
    if (kept_) comm_->fail_for_peer(*kept_);
  }

private:
  std::mutex mu_;
  std::shared_ptr<connect_interrupt> connecting_ = std::make_shared<connect_interrupt>();
  Communicator* comm_ = nullptr;
  std::optional<lost_rank> kept_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_RELAY_HPP
