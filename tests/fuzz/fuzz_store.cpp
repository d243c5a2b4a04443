// libFuzzer target for the rendezvous store's wire handling. Byte 0 of an
// input picks what the rest feeds:
//   0: the frame decoder (frame_reader) reading fields the input chooses;
//   1: a real store_server, over a socketpair it adopts, as an unauthenticated
//      client's byte stream;
//   2: the same after a real handshake (client_handshake), so the stream
//      reaches set/get/add/compare_set/check/wait/bye;
//   3: client_handshake reading the input as a hostile server's answers.
// The server is the production one (its poll loop, handshake and handlers on
// its own thread); nothing is mocked. Besides crashes and sanitizer reports,
// each mode checks an invariant and traps when it breaks:
//   0: a read that fails leaves the reader failed; fields read re-encode to
//      the bytes consumed;
//   1: an unauthenticated stream gets at most a challenge and a refusal,
//      never an operation served;
//   2: every reply is a well-formed frame with a known status;
//   3: no input passes for a server that knows the token.
// Build: -DDDP_BUILD_FUZZERS=ON with clang (tests/CMakeLists.txt); the corpus
// in tests/fuzz/corpus/store is replayed as an ordinary test (replay_main.cpp).
#include <ddp/detail/store/handshake.hpp>
#include <ddp/detail/store/server.hpp>
#include <ddp/store.hpp>

#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace d = ddp::detail;

const std::string token = "fuzz-token";

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_store: invariant broken: %s\n", what);
  std::abort();
}

void fuzz_decoder(std::string_view in) {
  if (in.empty()) return;
  std::size_t nops = static_cast<unsigned char>(in[0]) % 16;
  in.remove_prefix(1);
  std::string_view ops = in.substr(0, nops), body = in.substr(std::min(nops, in.size()));
  d::frame_reader r(body);
  d::frame_writer w(d::store_status::ok); // re-encodes what was read
  bool failed = false;
  for (char op : ops) {
    switch (static_cast<unsigned char>(op) % 6) {
    case 0: w.u8(r.u8()); break;
    case 1: w.u32(r.u32()); break;
    case 2: w.i32(r.i32()); break;
    case 3: w.u64(r.u64()); break;
    case 4: w.i64(r.i64()); break;
    default: w.bytes(r.bytes()); break;
    }
    if (failed && r.ok()) broken("frame_reader recovered after a failed read");
    failed = !r.ok();
  }
  if (r.ok()) {
    auto f = w.finish();
    std::string_view again(f.data() + 5, f.size() - 5);
    if (body.substr(0, again.size()) != again) broken("fields read do not re-encode to the bytes consumed");
    if (r.at_end() != (again.size() == body.size())) broken("at_end disagrees with the bytes consumed");
  }
}

/// Writes `out` to `fd` while reading what comes back, then half-closes and
/// reads to the end. Returns what came back.
std::string exchange(int fd, std::string_view out) {
  std::string got;
  auto deadline = d::clock::now() + 20s;
  bool shut = false;
  char buf[65536];
  for (;;) {
    if (out.empty() && !shut) {
      ::shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (out.empty() ? 0 : POLLOUT)), 0};
    if (::poll(&p, 1, 1000) < 0 && errno != EINTR) broken("poll failed");
    if (d::clock::now() > deadline) broken("the server neither answered nor closed within 20 s");
    if (p.revents & POLLOUT) {
      ssize_t k = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0)
        out.remove_prefix(static_cast<std::size_t>(k));
      else if (k < 0 && errno != EAGAIN && errno != EINTR)
        out = {}; // the server closed: what it read so far is what it judged
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k > 0)
        got.append(buf, static_cast<std::size_t>(k));
      else if (k == 0 || (errno != EAGAIN && errno != EINTR))
        return got;
    }
  }
}

/// Splits a server's replies into frames; traps on a malformed one.
std::vector<std::string> replies(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    std::uint32_t n = 0;
    if (s.size() < 4) broken("a reply frame is cut short");
    std::memcpy(&n, s.data(), 4);
    if (n == 0 || n > d::store_max_frame || s.size() < 4 + std::size_t{n})
      broken("a reply frame is malformed");
    auto status = static_cast<unsigned char>(s[4]);
    // The last status of store_status: a new one goes there, and here.
    if (status > static_cast<unsigned char>(d::store_status::unknown_request))
      broken("a reply has an unknown status");
    out.emplace_back(s.substr(4, n));
    s.remove_prefix(4 + std::size_t{n});
  }
  return out;
}

void fuzz_server(std::string_view in, bool authenticate) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) broken("socketpair failed");
  d::unique_fd mine(sv[0]);
  d::store_server server("127.0.0.1", 0, token);
  server.adopt(d::unique_fd(sv[1]));
  if (authenticate &&
      d::client_handshake(mine.get(), token, 1, d::clock::now() + 20s) != d::handshake_result::ok)
    broken("the right token did not authenticate");
  auto got = replies(exchange(mine.get(), in));
  if (authenticate) return;
  // Unauthenticated: a challenge (status ok, a nonce and a proof), then at
  // most a refusal; nothing else.
  if (got.size() > 2) broken("an unauthenticated stream got more than a challenge and a refusal");
  if (!got.empty()) {
    d::frame_reader r(std::string_view(got[0]).substr(1));
    auto nonce = r.bytes(), proof = r.bytes();
    if (got[0][0] != 0 || !r.ok() || !r.at_end() || nonce.size() != d::auth_nonce_size ||
        proof.size() != d::auth_mac_size)
      broken("the first reply to an unauthenticated stream is not a challenge");
  }
  if (got.size() == 2 && got[1] != std::string(1, static_cast<char>(d::store_status::refused)))
    broken("an unauthenticated stream was answered other than with a refusal");
}

void fuzz_hostile_server(std::string_view in) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) broken("socketpair failed");
  d::unique_fd client(sv[0]), server(sv[1]);
  // The whole answer is queued up front (inputs are far below the socket
  // buffer), then the end: the client reads it as the server's side.
  if (d::send_all(server.get(), in.data(), in.size(), d::clock::now() + 5s) != d::io_status::ok)
    broken("could not queue the hostile server's bytes");
  ::shutdown(server.get(), SHUT_WR);
  if (d::client_handshake(client.get(), token, 1, d::clock::now() + 5s) == d::handshake_result::ok)
    broken("a server that cannot know the client's nonce passed the handshake");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
  case 0: fuzz_decoder(in); break;
  case 1: fuzz_server(in, false); break;
  case 2: fuzz_server(in, true); break;
  default: fuzz_hostile_server(in); break;
  }
  return 0;
}
