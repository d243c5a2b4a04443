// A Gloo store that also sets and reads many keys in one round trip. Debian's
// Gloo (2022-05) declares only set, get and wait; later Gloo adds multi_set
// and multi_get behind has_v2_support(), for the same reason: a full mesh
// exchanges a key per pair. ddp's adapter of its tcp_store is one
// (detail/gloo/communicator_impl.hpp); gloo_mesh_context uses it where the store it
// is given is one, and one key at a time where not (Gloo's own stores, in
// tests).
#ifndef DDP_DETAIL_GLOO_BATCH_STORE_HPP
#define DDP_DETAIL_GLOO_BATCH_STORE_HPP

#include <ddp/config.hpp>

#include <chrono>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_batch_store {
public:
  /// Sets `keys[i]` to `values[i]`, for every i.
  virtual void multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::vector<char>>& values) = 0;
  /// Waits up to `timeout` for every key, then returns their values in order.
  virtual std::vector<std::vector<char>> multi_get(const std::vector<std::string>& keys,
                                                   std::chrono::milliseconds timeout) = 0;

protected:
  gloo_batch_store() = default;
  gloo_batch_store(const gloo_batch_store&) = default;
  gloo_batch_store& operator=(const gloo_batch_store&) = default;
  ~gloo_batch_store() = default; // not deleted through this interface
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_BATCH_STORE_HPP
