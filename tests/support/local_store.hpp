// Test helper: the options of a store served in this process on a free loopback port, for the
// unit tests that run ddprun's or the meeting's protocol over a real store.
#pragma once

#include <ddp/store.hpp>

#include <chrono>

namespace ddp_test {

inline ddp::tcp_store_options local_server_options() {
  ddp::tcp_store_options o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.serve = true;
  o.timeout = std::chrono::seconds(5);
  o.token = "secret";
  return o;
}

// A store served in this process, reporting RANK to its own server.
inline ddp::tcp_store local_server(int rank) {
  auto o = local_server_options();
  o.rank = rank;
  return ddp::tcp_store(o);
}

} // namespace ddp_test
