// Mutual challenge-response authentication between a rank and the rendezvous
// store, keyed by the job token (DDP_TOKEN), with HMAC-SHA256 from OpenSSL's
// libcrypto. The token itself never crosses the wire.
//
// The handshake (K: the token; Nc, Ns: 32 bytes each from RAND_bytes, drawn
// afresh for every connection; r: the rank the client claims; || joins):
//
//   client -> server  hello      r, Nc
//   server -> client  challenge  Ns, Ps = HMAC(K, "ddp store auth v1: server" || Nc || Ns || r)
//   client            checks Ps; on a mismatch it sends bye (no content) and closes
//   client -> server  proof      Pc = HMAC(K, "ddp store auth v1: client" || Nc || Ns || r)
//   server -> client  ok | refused
//
// Why this is safe:
// - The token never travels: only nonces, the rank and MACs do, and a MAC does
//   not give up its key. A process squatting on MASTER_PORT receives a hello
//   (a rank and a random nonce) and a content-free bye, because the client checks the
//   server's proof before it sends its own.
// - Replay: each proof covers the nonce the *other* side has just drawn, so a
//   proof recorded on one connection verifies on no other (a nonce repeats with
//   probability 2^-256).
// - Reflection: the two proofs carry different labels. The server only ever
//   computes server-labelled MACs, so connecting to it (with any Nc one likes)
//   never yields a valid client proof; clients compute client-labelled MACs
//   only for a server that has already proven it holds K.
// - Fields are fixed-width (labels of equal length, 32-byte nonces, a 4-byte
//   rank), so no two different tuples hash the same message.
// - Comparisons are constant-time (CRYPTO_memcmp).
// Limits: the frames after the handshake are neither encrypted nor
// integrity-protected, so a party that can relay or rewrite traffic between a
// rank and the store (on-path) is out of scope. Anyone who can reach the store
// can obtain a server proof for a nonce of their choice and test guesses of
// the token offline: the token must be unguessable (ddprun draws 128 random
// bits; by hand, DDP_TOKEN=$(openssl rand -hex 16)). An empty token is
// accepted, and then authenticates nothing.
#ifndef DDP_DETAIL_STORE_AUTH_HPP
#define DDP_DETAIL_STORE_AUTH_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t auth_nonce_size = 32;
inline constexpr std::size_t auth_mac_size = 32; // SHA-256
using auth_nonce = std::array<unsigned char, auth_nonce_size>;
using auth_mac = std::array<unsigned char, auth_mac_size>; // the same type as auth_nonce

enum class auth_role { server, client };

inline std::string openssl_error_text() {
  char buf[256] = "unknown error";
  if (unsigned long e = ::ERR_get_error()) ::ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

/// A fresh nonce from OpenSSL's CSPRNG.
inline auth_nonce auth_random_nonce() {
  auth_nonce n{};
  if (::RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    detail::throw_error(error_kind::backend,
                        {"OpenSSL RAND_bytes failed to draw a nonce for the rendezvous store handshake: ",
                         openssl_error_text()});
  return n;
}

/// The proof `who` sends: HMAC-SHA256 keyed by the token over a label naming
/// the direction, both nonces and the rank.
inline auth_mac auth_proof(std::string_view token, auth_role who, const auth_nonce& client_nonce,
                           const auth_nonce& server_nonce, std::int32_t rank) {
  // Equal lengths, so the message layout is fixed.
  static constexpr char server_label[] = "ddp store auth v1: server";
  static constexpr char client_label[] = "ddp store auth v1: client";
  static_assert(sizeof server_label == sizeof client_label);
  std::array<unsigned char, sizeof server_label + 2 * auth_nonce_size + 4> msg{};
  unsigned char* p = msg.data();
  std::memcpy(p, who == auth_role::server ? server_label : client_label, sizeof server_label);
  p += sizeof server_label;
  std::memcpy(p, client_nonce.data(), auth_nonce_size);
  p += auth_nonce_size;
  std::memcpy(p, server_nonce.data(), auth_nonce_size);
  p += auth_nonce_size;
  auto r = static_cast<std::uint32_t>(rank);
  for (int i = 0; i < 4; ++i) // little-endian, as every integer on the wire
    *p++ = static_cast<unsigned char>(r >> (8 * i));
  if (token.size() > INT_MAX)
    detail::throw_error(error_kind::config, {"DDP_TOKEN is too long (", token.size(), " bytes)"});
  static const unsigned char no_key = 0; // OpenSSL wants a non-null key pointer even for an empty key
  auth_mac out{};
  unsigned int len = 0;
  const void* key = token.empty() ? static_cast<const void*>(&no_key) : token.data();
  if (!::HMAC(::EVP_sha256(), key, static_cast<int>(token.size()), msg.data(), msg.size(), out.data(),
              &len) ||
      len != out.size())
    detail::throw_error(
        error_kind::backend,
        {"OpenSSL HMAC-SHA256 failed in the rendezvous store handshake: ", openssl_error_text()});
  return out;
}

/// Whether `got` (as received) equals `expected`, in time independent of the contents.
inline bool auth_proof_matches(const auth_mac& expected, std::string_view got) {
  return got.size() == expected.size() && ::CRYPTO_memcmp(expected.data(), got.data(), expected.size()) == 0;
}

/// A nonce or a MAC (the same type) as the bytes that go on the wire.
inline std::string_view as_view(const auth_nonce& n) {
  return {reinterpret_cast<const char*>(n.data()), n.size()};
}

/// Reads a nonce received as bytes; false when the size is wrong.
inline bool to_nonce(std::string_view s, auth_nonce& out) {
  if (s.size() != out.size()) return false;
  std::memcpy(out.data(), s.data(), out.size());
  return true;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_AUTH_HPP
