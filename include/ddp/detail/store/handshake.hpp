// The client's side of the rendezvous store's handshake (the exchange and why
// it is safe: auth.hpp), and the deadline the server gives it.
#ifndef DDP_DETAIL_STORE_HANDSHAKE_HPP
#define DDP_DETAIL_STORE_HANDSHAKE_HPP

#include <ddp/detail/store/auth.hpp>
#include <ddp/detail/store/protocol.hpp>
#include <ddp/detail/store/socket.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// How long the server lets a connection take to authenticate, from accept to
/// proof. A rank sends its hello as soon as it connects and needs one round
/// trip more, so a few seconds is ample even on a loaded machine; a silent
/// connection holds a descriptor no longer than this (docs/design-notes.md,
/// "Note [store under descriptor pressure]").
inline constexpr std::chrono::seconds store_handshake_timeout{5};

/// Handshake frames are small; a larger one during the handshake is malformed.
inline constexpr std::uint32_t store_max_handshake_frame = 4096;

enum class handshake_result {
  ok,              ///< both sides proved they hold the token
  refused,         ///< the server did not accept this client's proof
  server_unproven, ///< the server's proof is wrong: it does not hold this job's token
  malformed,       ///< the peer does not speak this protocol
  closed,          ///< the peer closed before the end (a server shedding load does this)
  timeout,         ///< no answer before the deadline
};

/// Reads one frame of at most `max` bytes.
inline handshake_result recv_handshake_frame(int fd, std::string& body, clock::time_point deadline) {
  std::uint32_t n = 0;
  auto st = recv_all(fd, &n, 4, deadline);
  if (st == io_status::ok) {
    if (n == 0 || n > store_max_handshake_frame) return handshake_result::malformed;
    body.assign(n, '\0');
    st = recv_all(fd, body.data(), n, deadline);
  }
  if (st == io_status::ok) return handshake_result::ok;
  return st == io_status::timeout ? handshake_result::timeout : handshake_result::closed;
}

inline handshake_result send_handshake_frame(int fd, const std::vector<char>& f, clock::time_point deadline) {
  auto st = send_all(fd, f.data(), f.size(), deadline);
  if (st == io_status::ok) return handshake_result::ok;
  return st == io_status::timeout ? handshake_result::timeout : handshake_result::closed;
}

/// Runs the client's side on a connected socket: hello, check the server's
/// proof, send ours, read the verdict. Sends nothing derived from the token
/// unless the server has proven it holds the token.
inline handshake_result client_handshake(int fd, std::string_view token, std::int32_t rank,
                                         clock::time_point deadline) {
  const auth_nonce client_nonce = auth_random_nonce();
  auto res = send_handshake_frame(
      fd, frame_writer(store_op::hello).i32(rank).bytes(as_view(client_nonce)).finish(), deadline);
  if (res != handshake_result::ok) return res;
  std::string body;
  if ((res = recv_handshake_frame(fd, body, deadline)) != handshake_result::ok) return res;
  frame_reader r(std::string_view(body).substr(1));
  auth_nonce server_nonce{};
  std::string nonce = r.bytes(), server_proof = r.bytes();
  if (static_cast<store_status>(body[0]) != store_status::ok || !r.ok() || !r.at_end() ||
      !to_nonce(nonce, server_nonce))
    return handshake_result::malformed;
  if (!auth_proof_matches(auth_proof(token, auth_role::server, client_nonce, server_nonce, rank),
                          server_proof)) {
    // A bye, nothing derived from the token: the store tells a token that differs from a client
    // that gave up for another reason, and its peers stop waiting for this rank.
    send_handshake_frame(fd, frame_writer(store_op::bye).finish(),
                         std::min(deadline, clock::now() + std::chrono::milliseconds(100)));
    return handshake_result::server_unproven;
  }
  auto proof = auth_proof(token, auth_role::client, client_nonce, server_nonce, rank);
  if ((res = send_handshake_frame(fd, frame_writer(store_op::proof).bytes(as_view(proof)).finish(),
                                  deadline)) != handshake_result::ok)
    return res;
  if ((res = recv_handshake_frame(fd, body, deadline)) != handshake_result::ok) return res;
  if (body.size() != 1) return handshake_result::malformed;
  switch (static_cast<store_status>(body[0])) {
  case store_status::ok: return handshake_result::ok;
  case store_status::refused: return handshake_result::refused;
  default: return handshake_result::malformed;
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_HANDSHAKE_HPP
