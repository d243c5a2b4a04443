// The definitions behind store.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_STORE_INL_HPP
#define DDP_STORE_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/store/handshake.hpp>
#include <ddp/detail/store/server.hpp>
#include <ddp/store.hpp>

DDP_BEGIN_NAMESPACE

DDP_INLINE tcp_store::tcp_store(const tcp_store_options& o) : opts_(o) {
  if (o.port < 0 || o.port > 65535 || (!o.serve && o.port == 0))
    detail::throw_error(error_kind::config,
                        {"tcp_store: port ", o.port, " is not a valid port to connect to (1..65535)"});
  auto deadline = detail::clock::now() + o.timeout;
  if (o.serve) {
    server_ =
        std::make_unique<detail::store_server>(o.host, o.port, o.token, deadline, peer_timeout(o.timeout));
    opts_.port = server_->port();
    server_->set_linger(o.linger.value_or(default_linger(o.timeout)));
  }
  open_connection(deadline);
}

DDP_INLINE void tcp_store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (!try_wait(keys, timeout)) {
    // The keys still missing say which rank did not arrive: the first few
    // are named (a mesh waits for a key per peer), the rest left unchecked.
    std::vector<std::string> missing;
    std::size_t looked = 0;
    for (; looked < keys.size() && missing.size() < keys_named; ++looked) {
      bool present = false;
      try {
        present = keys.size() > 1 && check({keys[looked]});
      } catch (const ddp::error&) {}
      if (!present) missing.push_back(keys[looked]);
    }
    std::string names = name_keys(missing);
    if (looked < keys.size())
      detail::append_message(names, {" (and maybe some of the ", keys.size() - looked, " after)"});
    detail::throw_error(error_kind::timeout,
                        {"waited ", timeout.count(), " ms for store key(s) ", names, " at ", where(),
                         ": a rank did not arrive (crashed, stuck, or started with other "
                         "arguments). Raise DDP_TIMEOUT if startup is just slow."});
  }
}

DDP_INLINE tcp_store::~tcp_store() {
  if (fd_ && !broken_) {
    auto f = detail::frame_writer(detail::store_op::bye).finish();
    detail::send_all(fd_.get(), f.data(), f.size(), detail::clock::now() + std::chrono::seconds(1));
  }
}

DDP_INLINE void tcp_store::set(const std::string& key, std::string_view value,
                               std::optional<std::chrono::milliseconds> io_timeout) {
  request(detail::frame_writer(detail::store_op::set).bytes(scoped(key)).bytes(value),
          detail::message({"set '", key, "'"}), io_timeout);
}

DDP_INLINE std::string tcp_store::get(const std::string& key) {
  wait({key});
  auto v = try_get(key);
  if (!v) detail::throw_error(error_kind::backend, {"store key '", key, "' vanished"});
  return *v;
}

DDP_INLINE std::optional<std::string>
tcp_store::try_get(const std::string& key, std::optional<std::chrono::milliseconds> io_timeout) {
  auto r = request(detail::frame_writer(detail::store_op::get).bytes(scoped(key)),
                   detail::message({"get '", key, "'"}), io_timeout);
  if (static_cast<detail::store_status>(r[0]) == detail::store_status::missing) return std::nullopt;
  detail::frame_reader fr(std::string_view(r).substr(1));
  auto v = fr.bytes();
  if (!fr.ok()) throw protocol_error("get");
  return v;
}

DDP_INLINE std::vector<std::string> tcp_store::multi_get(const std::vector<std::string>& keys,
                                                         std::chrono::milliseconds timeout) {
  wait(keys, timeout);
  std::vector<std::vector<char>> frames;
  frames.reserve(keys.size());
  for (auto& k : keys)
    frames.push_back(detail::frame_writer(detail::store_op::get).bytes(scoped(k)).finish());
  std::vector<std::string> values;
  values.reserve(keys.size());
  const auto replies = pipelined(frames, "get " + name_keys(keys));
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (static_cast<detail::store_status>(replies[i][0]) == detail::store_status::missing)
      detail::throw_error(error_kind::backend, {"store key '", keys[i], "' vanished"});
    detail::frame_reader fr(std::string_view(replies[i]).substr(1));
    values.push_back(fr.bytes());
    if (!fr.ok()) throw protocol_error("get");
  }
  return values;
}

DDP_INLINE void tcp_store::multi_set(const std::vector<std::string>& keys,
                                     const std::vector<std::string>& values) {
  if (keys.size() != values.size())
    detail::throw_error(error_kind::config,
                        {"tcp_store::multi_set: ", keys.size(), " keys but ", values.size(), " values"});
  std::vector<std::vector<char>> frames;
  frames.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    frames.push_back(
        detail::frame_writer(detail::store_op::set).bytes(scoped(keys[i])).bytes(values[i]).finish());
  const auto replies = pipelined(frames, "set " + name_keys(keys));
  for (std::size_t i = 0; i < replies.size(); ++i)
    if (static_cast<detail::store_status>(replies[i][0]) != detail::store_status::ok)
      throw protocol_error((detail::message({"set '", keys[i], "'"})).c_str());
}

DDP_INLINE std::int64_t tcp_store::add(const std::string& key, std::int64_t delta) {
  auto r = request(detail::frame_writer(detail::store_op::add).bytes(scoped(key)).i64(delta),
                   detail::message({"add '", key, "'"}));
  detail::frame_reader fr(std::string_view(r).substr(1));
  auto v = fr.i64();
  if (!fr.ok()) throw protocol_error("add");
  return v;
}

DDP_INLINE std::optional<std::string>
tcp_store::compare_set(const std::string& key, std::string_view expected, std::string_view desired) {
  if (expected.empty() && desired.empty())
    throw error(error_kind::config, "compare_set '" + key +
                                        "': set-if-absent (expected \"\") of an empty value cannot be told "
                                        "from an absent key, so a later writer would replace it: give a "
                                        "non-empty desired value");
  const std::string version_hint =
      "the store at " + where() +
      " does not know compare_set: ddprun and this program must come from the same ddp version";
  std::string r;
  try {
    r = request(
        detail::frame_writer(detail::store_op::compare_set).bytes(scoped(key)).bytes(expected).bytes(desired),
        "compare_set '" + key + "'");
  } catch (const error& e) {
    // A store of an older version closes the connection on a request it does not know.
    throw error(e.kind(), std::string(e.what()) + " (if " + version_hint + ")", e.rank());
  }
  if (static_cast<detail::store_status>(r[0]) == detail::store_status::unknown_request)
    throw error(error_kind::config, version_hint);
  if (static_cast<detail::store_status>(r[0]) == detail::store_status::missing) return std::nullopt;
  detail::frame_reader fr(std::string_view(r).substr(1));
  auto v = fr.bytes();
  if (!fr.ok()) throw protocol_error("compare_set");
  return v;
}

DDP_INLINE bool tcp_store::check(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  return every_frame_part(keys, [&](std::span<const std::string> part) {
    detail::frame_writer w(detail::store_op::check);
    w.u32(static_cast<std::uint32_t>(part.size()));
    for (auto& k : part)
      w.bytes(scoped(k));
    auto r = request(w, "check", timeout);
    return r.size() >= 2 && r[1] == 1;
  });
}

DDP_INLINE bool tcp_store::try_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                                    std::chrono::milliseconds slack) {
  if (keys.size() <= detail::store_max_keys_per_frame) return try_wait_frame(keys, keys, timeout, slack);
  // More keys than a frame holds: one wait per part, the whole within `timeout`
  // (clamped as the store clamps it, so that the deadline cannot overflow).
  const auto deadline = detail::clock::now() + std::min(timeout, std::chrono::milliseconds(1LL << 40));
  return every_frame_part(keys, [&](std::span<const std::string> part) {
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::ceil<std::chrono::milliseconds>(deadline - detail::clock::now()));
    return try_wait_frame(part, keys, left, slack);
  });
}

DDP_INLINE bool tcp_store::try_wait_frame(std::span<const std::string> keys,
                                          const std::vector<std::string>& all_keys,
                                          std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds slack) {
  detail::frame_writer w(detail::store_op::wait);
  w.u32(static_cast<std::uint32_t>(keys.size()));
  for (auto& k : keys)
    w.bytes(scoped(k));
  w.u64(static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count())));
  auto r = request(w, "wait for " + name_keys(keys), timeout + slack);
  auto st = static_cast<detail::store_status>(r[0]);
  if (st == detail::store_status::lost) {
    detail::frame_reader fr(std::string_view(r).substr(1));
    int lost = fr.i32();
    if (!fr.ok()) throw protocol_error("wait");
    detail::throw_error(error_kind::peer_lost,
                        {"rank ", lost, " ", describe_lost(lost), " while rank ", opts_.rank,
                         " waited for store key(s) ", name_keys(all_keys), " at ", where(),
                         ": it will never set them. Look at rank ", lost, "'s output first."},
                        lost);
  }
  return st == detail::store_status::ok;
}

DDP_INLINE std::vector<int> tcp_store::lost_ranks() {
  std::vector<int> out;
  auto v = try_get(detail::store_lost_key, fault_slack);
  if (!v) return out;
  std::string_view s = *v;
  while (!s.empty()) {
    auto comma = s.find(',');
    if (auto r = detail::parse_int(s.substr(0, comma))) out.push_back(static_cast<int>(*r));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

DDP_INLINE lost_rank tcp_store::wait_for_lost_rank(std::chrono::milliseconds grace) {
  try {
    if (!try_wait({detail::store_lost_key}, grace, fault_slack)) return {};
    auto lost = lost_ranks();
    if (lost.empty()) return {};
    return {lost.front(), describe_lost(lost.front())};
  } catch (const ddp::error& e) {
    if (unreachable_) // our own connection timed out: the store's host is cut off, not just slow
      return {0,
              detail::message({"is unreachable: its host acknowledged nothing on the connection to the "
                               "rendezvous store ",
                               (opts_.served_by_launcher ? "its node's ddprun serves" : "it serves"), " for ",
                               peer_timeout(opts_.timeout).count(), " ms (network cut or host down)"})};
    if (opts_.served_by_launcher) // the launcher died, not a rank: no rank to name, but news
      return e.kind() == error_kind::peer_lost ? lost_rank{-1, launcher_gone(), false} : lost_rank{};
    if (e.kind() == error_kind::timeout)
      return {0,
              detail::message({"does not answer: the rendezvous store it serves did not reply within ",
                               (grace + fault_slack).count(), " ms (rank 0 is stopped or hung)"}),
              true};
    return {0, "exited: the rendezvous store it serves is gone"};
  }
}

DDP_INLINE std::string tcp_store::launcher_gone() const {
  return detail::message(
      {"the rendezvous store at ", where(),
       ", which ddprun serves on the master node, closed its connection: the launcher is gone (killed by "
       "SIGKILL, the OOM killer or the job's time limit), so no rank of this job can go on. Look at how "
       "ddprun ended"});
}

DDP_INLINE bool tcp_store::report_failure(std::string_view reason) noexcept {
  try {
    auto frame = [&] {
      return detail::frame_writer(detail::store_op::set)
          .bytes(scoped(std::string(detail::store_failed_prefix) + std::to_string(opts_.rank)))
          .bytes(reason);
    };
    {
      // Polled with try_lock, not a timed_mutex: GCC 12's TSan does not see
      // timed_mutex's lock (pthread_mutex_clocklock) and reports its unlock.
      std::unique_lock lock(mu_, std::defer_lock);
      const auto give_up = detail::clock::now() + report_patience;
      while (!lock.try_lock() && detail::clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (lock.owns_lock()) {
        auto w = frame();
        request_holding_lock(w, "report failure", fault_slack);
        return true;
      }
    }
    tcp_store_options o = opts_;
    o.serve = false;
    o.linger.reset();
    o.timeout = fault_slack;
    tcp_store alone(o);
    auto w = frame();
    alone.request(w, "report failure", fault_slack);
    return true;
  } catch (...) { return false; }
}

DDP_INLINE void tcp_store::serve_late_arrivals(int world_size) {
  if (server_) server_->serve_late_arrivals(world_size, late_arrival_linger);
}

DDP_INLINE void tcp_store::stop_serving_at_once() {
  if (server_) server_->set_linger(std::chrono::milliseconds(0));
}

DDP_INLINE void tcp_store::linger_briefly() {
  if (server_) server_->set_linger(own_failure_linger);
}

DDP_INLINE std::unique_ptr<tcp_store> tcp_store::connect_again(std::chrono::milliseconds timeout) const {
  tcp_store_options o = opts_;
  o.serve = false;
  o.rank = -1;
  o.linger.reset();
  o.timeout = timeout;
  auto again = std::make_unique<tcp_store>(o);
  // Only rank 0's store lingers; a launcher's, maybe of another ddp version, is not asked.
  if (opts_.rank >= 0 && !opts_.served_by_launcher) again->declare_owner(opts_.rank);
  return again;
}

DDP_INLINE void tcp_store::shutdown_connection() noexcept {
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

DDP_INLINE std::string tcp_store::request(detail::frame_writer& w, const std::string& what,
                                          std::optional<std::chrono::milliseconds> io_timeout) {
  std::lock_guard lock(mu_);
  return request_holding_lock(w, what, io_timeout);
}

DDP_INLINE std::string tcp_store::request_holding_lock(detail::frame_writer& w, const std::string& what,
                                                       std::optional<std::chrono::milliseconds> io_timeout) {
  throw_if_broken();
  auto deadline = detail::clock::now() + io_timeout.value_or(opts_.timeout);
  send_frame(w.finish(), deadline);
  return recv_frame(deadline, what);
}

DDP_INLINE std::string tcp_store::name_keys(std::span<const std::string> keys) {
  std::string names;
  for (std::size_t i = 0; i < keys.size() && i < keys_named; ++i)
    names += (names.empty() ? "'" : ", '") + keys[i] + "'";
  if (keys.size() > keys_named) detail::append_message(names, {" and ", keys.size() - keys_named, " more"});
  return names;
}

DDP_INLINE std::string tcp_store::describe_lost(int rank) {
  try {
    auto cut = try_get(std::string(detail::store_unreachable_prefix) + std::to_string(rank), fault_slack);
    if (cut) return *cut;
    auto why = try_get(std::string(detail::store_failed_prefix) + std::to_string(rank), fault_slack);
    if (why) return "failed: " + *why;
  } catch (const ddp::error&) {}
  return "exited or lost its connection";
}

DDP_INLINE std::chrono::milliseconds tcp_store::default_linger(std::chrono::milliseconds timeout) {
  return timeout + std::chrono::seconds(10);
}

DDP_INLINE std::chrono::milliseconds tcp_store::peer_timeout(std::chrono::milliseconds timeout) {
  return std::max(timeout / 2, std::chrono::milliseconds(1000));
}

DDP_INLINE void tcp_store::open_connection(detail::clock::time_point deadline) {
  using detail::handshake_result;
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    fd_ = detail::connect_tcp(opts_.host, opts_.port, deadline);
    detail::set_keepalive(fd_.get(), peer_timeout(opts_.timeout));
    // Twice the server's own deadline: a store that takes longer is not going to answer.
    auto attempt = std::min(deadline, detail::clock::now() + 2 * detail::store_handshake_timeout);
    auto res = detail::client_handshake(fd_.get(), opts_.token, opts_.rank, attempt);
    if (res == handshake_result::ok) return declare_scope(deadline);
    fd_.reset();
    if (res == handshake_result::refused)
      detail::throw_error(error_kind::config, {"the rendezvous store at ", where(),
                                               " refused this process: its job token differs (set the same "
                                               "DDP_TOKEN on every rank, or let the launcher set it)"});
    if (res == handshake_result::server_unproven || res == handshake_result::malformed)
      detail::throw_error(error_kind::config,
                          {"the process listening on ", where(), " is not this job's rendezvous store: it ",
                           (res == handshake_result::malformed ? "does not speak ddp's store protocol"
                                                               : "could not prove it knows the job token"),
                           ". DDP_TOKEN differs between this rank and rank 0, or another program holds the "
                           "port (check MASTER_ADDR/MASTER_PORT; the token was not sent)"});
    if (detail::clock::now() + backoff > deadline)
      detail::throw_error(error_kind::timeout,
                          {"the rendezvous store at ", where(), " accepted the connection but ",
                           (res == handshake_result::closed ? "closed it" : "did not answer"),
                           " during the handshake, until the timeout. Is that rank 0's store (check "
                           "MASTER_ADDR/MASTER_PORT), and is rank 0 alive and not out of file descriptors?"});
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

DDP_INLINE void tcp_store::declare_scope(detail::clock::time_point deadline) {
  if (opts_.scope.empty()) return;
  send_frame(detail::frame_writer(detail::store_op::scope).bytes(opts_.scope).finish(), deadline);
  auto r = recv_frame(deadline, "scope");
  if (static_cast<detail::store_status>(r[0]) != detail::store_status::ok) throw protocol_error("scope");
}

DDP_INLINE void tcp_store::declare_owner(int rank) {
  detail::frame_writer w(detail::store_op::owner);
  auto r = request(w.i32(rank), "declare its owner");
  if (static_cast<detail::store_status>(r[0]) != detail::store_status::ok) throw protocol_error("owner");
}

DDP_INLINE std::string tcp_store::server_name() const {
  return opts_.served_by_launcher ? "ddprun on the master node, which serves it,"
                                  : "rank 0, which serves it,";
}

DDP_INLINE error tcp_store::protocol_error(const char* what) const {
  return error(error_kind::backend, std::string("malformed reply from the rendezvous store to ") + what);
}

DDP_INLINE std::vector<std::string> tcp_store::pipelined(const std::vector<std::vector<char>>& frames,
                                                         const std::string& what) {
  std::lock_guard lock(mu_);
  throw_if_broken();
  const auto deadline = detail::clock::now() + opts_.timeout;
  std::vector<std::string> replies;
  replies.reserve(frames.size());
  std::vector<char> piece;
  for (std::size_t next = 0; next < frames.size();) {
    piece.clear();
    const std::size_t first = next;
    while (next < frames.size() &&
           (piece.empty() || piece.size() + frames[next].size() <= pipeline_piece_bytes)) {
      piece.insert(piece.end(), frames[next].begin(), frames[next].end());
      ++next;
    }
    send_frame(piece, deadline);
    for (std::size_t i = first; i < next; ++i)
      replies.push_back(recv_frame(deadline, what));
  }
  return replies;
}

DDP_INLINE void tcp_store::throw_if_broken() const {
  if (broken_)
    detail::throw_error(
        broken_kind_,
        {"the rendezvous store at ", where(), " is gone or silent (", server_name(), " exited or stopped)"},
        opts_.served_by_launcher ? -1 : 0);
}

DDP_INLINE void tcp_store::send_frame(const std::vector<char>& f, detail::clock::time_point deadline) {
  auto st = detail::send_all(fd_.get(), f.data(), f.size(), deadline);
  if (st != detail::io_status::ok) fail(st, "sending");
}

DDP_INLINE std::string tcp_store::recv_frame(detail::clock::time_point deadline, const std::string& what) {
  std::uint32_t n = 0;
  auto st = detail::recv_all(fd_.get(), &n, 4, deadline);
  if (st != detail::io_status::ok) fail(st, what);
  if (n == 0 || n > detail::store_max_frame) {
    broken_ = true;
    throw protocol_error(what.c_str());
  }
  std::string body(n, '\0');
  st = detail::recv_all(fd_.get(), body.data(), n, deadline);
  if (st != detail::io_status::ok) fail(st, what);
  return body;
}

DDP_INLINE void tcp_store::fail(detail::io_status st, const std::string& what) {
  broken_ = true;
  if (st == detail::io_status::unreachable) {
    unreachable_ = true;
    detail::throw_error(error_kind::peer_lost,
                        {"lost the connection to the rendezvous store at ", where(), " (", what,
                         "): the host of rank 0, which serves it, acknowledged nothing for ",
                         peer_timeout(opts_.timeout).count(),
                         " ms (network cut or host down; check the link and GLOO_SOCKET_IFNAME)"},
                        0);
  }
  broken_kind_ = st == detail::io_status::timeout ? error_kind::timeout : error_kind::peer_lost;
  if (st == detail::io_status::timeout)
    detail::throw_error(error_kind::timeout, {"the rendezvous store at ", where(), " did not answer (", what,
                                              ") within the timeout"});
  detail::throw_error(error_kind::peer_lost,
                      {"lost the connection to the rendezvous store at ", where(), " (", what,
                       "): ", server_name(), " has probably exited"},
                      opts_.served_by_launcher ? -1 : 0);
}

DDP_END_NAMESPACE

#endif // DDP_STORE_INL_HPP
