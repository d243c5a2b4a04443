// tcp_store in one process: a serving instance plus clients on threads, and
// raw sockets that misbehave on purpose.
#include <ddp/store.hpp>

#include <doctest/doctest.h>

#include <thread>

using namespace std::chrono_literals;

namespace {
ddp::tcp_store_options server_opts(std::string token = "secret") {
  ddp::tcp_store_options o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.serve = true;
  o.timeout = 5s;
  o.token = std::move(token);
  o.rank = 0;
  return o;
}
ddp::tcp_store_options client_opts(int port, std::string token = "secret", int rank = 1) {
  ddp::tcp_store_options o;
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout = 5s;
  o.token = std::move(token);
  o.rank = rank;
  return o;
}
/// A raw connection that sends `bytes` and reports whether the server closed it.
bool server_closes_after(int port, const std::string& bytes) {
  auto fd = ddp::detail::connect_tcp("127.0.0.1", port, ddp::detail::clock::now() + 2s);
  ddp::detail::send_all(fd.get(), bytes.data(), bytes.size(), ddp::detail::clock::now() + 2s);
  char buf[64];
  for (;;) {
    auto st = ddp::detail::recv_all(fd.get(), buf, 1, ddp::detail::clock::now() + 3s);
    if (st == ddp::detail::io_status::closed) return true;
    if (st == ddp::detail::io_status::timeout) return false;
  }
}
std::string frame(const std::string& body) {
  auto n = static_cast<std::uint32_t>(body.size());
  return std::string(reinterpret_cast<const char*>(&n), 4) + body;
}
} // namespace

TEST_CASE("set, get, add, check and wait") {
  ddp::tcp_store server(server_opts());
  ddp::tcp_store client(client_opts(server.port()));
  server.set("a", "1");
  CHECK(client.get("a") == "1");
  CHECK(client.try_get("missing") == std::nullopt);
  CHECK(client.add("n", 5) == 5);
  CHECK(server.add("n", -2) == 3);
  CHECK(client.check({"a", "n"}));
  CHECK_FALSE(client.check({"a", "zzz"}));
  std::string big(3 << 20, 'x');
  client.set("big", big);
  CHECK(server.get("big") == big);
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    server.set("late", "here");
  });
  client.wait({"late"}, 3s);
  CHECK(client.get("late") == "here");
  t.join();
}

TEST_CASE("wait times out with a message naming the keys") {
  ddp::tcp_store server(server_opts());
  auto t0 = ddp::detail::clock::now();
  try {
    server.wait({"never"}, 300ms);
    FAIL("expected a timeout");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::timeout);
    CHECK(std::string(e.what()).find("'never'") != std::string::npos);
  }
  CHECK(ddp::detail::clock::now() - t0 >= 300ms);
  CHECK(ddp::detail::clock::now() - t0 < 3s);
}

TEST_CASE("add is atomic across concurrent clients") {
  ddp::tcp_store server(server_opts());
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      ddp::tcp_store c(client_opts(server.port(), "secret", i + 1));
      for (int k = 0; k < 100; ++k)
        c.add("counter", 1);
    });
  for (auto& t : threads)
    t.join();
  CHECK(server.add("counter", 0) == 400);
}

TEST_CASE("a wrong token is refused and the store keeps serving") {
  ddp::tcp_store server(server_opts());
  try {
    ddp::tcp_store intruder(client_opts(server.port(), "wrong"));
    FAIL("expected refusal");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::config);
    CHECK(std::string(e.what()).find("token") != std::string::npos);
  }
  ddp::tcp_store good(client_opts(server.port()));
  good.set("k", "v");
  CHECK(server.get("k") == "v");
}

TEST_CASE("malformed and oversized frames close that connection only") {
  ddp::tcp_store server(server_opts());
  ddp::tcp_store good(client_opts(server.port()));
  CHECK(server_closes_after(server.port(), std::string("\xff\xff\xff\x7f", 4))); // 2 GiB frame
  CHECK(server_closes_after(server.port(), frame(std::string(1, '\x02'))));      // set before hello
  CHECK(server_closes_after(server.port(), frame("\x01garbage")));               // short hello
  CHECK(server_closes_after(server.port(), std::string(4, '\0')));               // empty frame
  good.set("still", "alive");
  CHECK(good.get("still") == "alive");
}

TEST_CASE("a client that drops without goodbye is recorded as lost") {
  ddp::tcp_store server(server_opts());
  {
    ddp::tcp_store orderly(client_opts(server.port(), "secret", 1)); // says bye
  }
  {
    auto fd = ddp::detail::connect_tcp("127.0.0.1", server.port(), ddp::detail::clock::now() + 2s);
    ddp::detail::frame_writer w(ddp::detail::store_op::hello);
    w.bytes("secret").i32(3);
    auto f = w.finish();
    ddp::detail::send_all(fd.get(), f.data(), f.size(), ddp::detail::clock::now() + 2s);
    char reply[5];
    REQUIRE(ddp::detail::recv_all(fd.get(), reply, 5, ddp::detail::clock::now() + 2s) ==
            ddp::detail::io_status::ok);
  } // closed without bye: like a crash
  server.wait({ddp::detail::store_lost_key}, 2s);
  CHECK(server.lost_ranks() == std::vector<int>{3});
}

TEST_CASE("connecting to nothing times out naming the address") {
  auto o = client_opts(1); // port 1: nothing listens there
  o.timeout = 300ms;
  try {
    ddp::tcp_store c(o);
    FAIL("expected a timeout");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::timeout);
    CHECK(std::string(e.what()).find("127.0.0.1:1") != std::string::npos);
  }
}

TEST_CASE("a port in use is a clear config error") {
  ddp::tcp_store first(server_opts());
  auto o = server_opts();
  o.port = first.port();
  try {
    ddp::tcp_store second(o);
    FAIL("expected an error");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::config);
    CHECK(std::string(e.what()).find("already in use") != std::string::npos);
  }
}
