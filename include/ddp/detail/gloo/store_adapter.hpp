// Lets Gloo's rendezvous use ddp's token-gated tcp_store, under a key prefix:
// the communicator's mesh and, across nodes, the leaders' mesh connect through it.
#ifndef DDP_DETAIL_GLOO_STORE_ADAPTER_HPP
#define DDP_DETAIL_GLOO_STORE_ADAPTER_HPP

#include <ddp/detail/gloo/batch_store.hpp>
#include <ddp/store.hpp>

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Lets Gloo's rendezvous use our token-gated tcp_store, under a key prefix.
class gloo_store_adapter final : public ::gloo::rendezvous::Store, public gloo_batch_store {
public:
  gloo_store_adapter(tcp_store& s, std::string prefix) : s_(s), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    s_.set(prefix_ + key, std::string_view(data.data(), data.size()));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = s_.get(prefix_ + key);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, s_.timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    s_.wait(prefixed(keys), timeout);
  }
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::vector<char>>& values) override {
    std::vector<std::string> text;
    for (auto& v : values)
      text.emplace_back(v.begin(), v.end());
    s_.multi_set(prefixed(keys), text);
  }
  std::vector<std::vector<char>> multi_get(const std::vector<std::string>& keys,
                                           std::chrono::milliseconds timeout) override {
    std::vector<std::vector<char>> values;
    for (auto& v : s_.multi_get(prefixed(keys), timeout))
      values.emplace_back(v.begin(), v.end());
    return values;
  }

private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> full;
    for (auto& k : keys)
      full.push_back(prefix_ + k);
    return full;
  }

  tcp_store& s_;
  std::string prefix_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_STORE_ADAPTER_HPP
