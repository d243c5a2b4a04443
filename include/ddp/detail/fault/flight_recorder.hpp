// The flight recorder: each rank keeps its last 64 collectives (sequence
// number, kind, dtype, count, bucket when known, state, times), like PyTorch's
// NCCL flight recorder. When a collective times out or loses a peer, the
// survivors compare how far each rank got (the desync report, gloo.hpp), and
// DDP_FLIGHT_RECORDER=DIR writes each rank's record to DIR/rank_<r>.json.
#ifndef DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP
#define DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/tensor.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class flight_state : std::uint8_t { queued, running, done, failed };

constexpr std::string_view to_string(flight_state s) noexcept {
  switch (s) {
  case flight_state::queued: return "queued";
  case flight_state::running: return "running";
  case flight_state::done: return "done";
  case flight_state::failed: return "failed";
  }
  return "unknown";
}

struct flight_entry {
  std::uint64_t seq = 0;
  std::string kind; ///< "all_reduce", "broadcast", ...
  dtype dt = dtype::u8;
  std::size_t count = 0;
  int bucket = -1; ///< -1: not a DDP bucket, or not known
  flight_state state = flight_state::queued;
  /// Wall-clock microseconds since the epoch (comparable across ranks of one
  /// machine); 0 when that step has not happened.
  std::int64_t queued_us = 0, started_us = 0, finished_us = 0;
};

/// A send or recv (they run beside the collectives, in lanes: detail/gloo/p2p.hpp),
/// kept apart from the collectives' entries: it has no place in their sequence,
/// which the desync report compares across ranks.
struct flight_message {
  std::uint64_t id = 0;
  std::string what; ///< "rank 0: send #3 to rank 1 (10 x float32)", with its tag
  flight_state state = flight_state::queued;
  std::int64_t queued_us = 0, started_us = 0, finished_us = 0;
};

/// How far one rank got: the latest collective that started (or, when none
/// did, nothing). Published through the store for the desync report.
struct flight_progress {
  std::int64_t seq = -1; ///< -1: no collective started yet
  std::string kind;
  flight_state state = flight_state::queued;

  std::string encode() const {
    return detail::message({seq, " ", (kind.empty() ? "-" : kind), " ", to_string(state)});
  }
  static flight_progress decode(std::string_view s) {
    flight_progress p;
    auto a = s.find(' ');
    auto b = a == std::string_view::npos ? a : s.find(' ', a + 1);
    if (b == std::string_view::npos) return p;
    p.seq = parse_int(s.substr(0, a)).value_or(-1);
    p.kind = std::string(s.substr(a + 1, b - a - 1));
    auto st = s.substr(b + 1);
    for (auto x : {flight_state::queued, flight_state::running, flight_state::done, flight_state::failed})
      if (st == to_string(x)) p.state = x;
    return p;
  }
  std::string describe() const {
    if (seq < 0) return "no collective started yet";
    return detail::message({kind, " #", seq, " (", to_string(state), ")"});
  }
};

class flight_recorder {
public:
  static constexpr std::size_t capacity = 64;

  void queued(std::uint64_t seq, std::string_view kind, dtype dt, std::size_t count, int bucket = -1) {
    std::lock_guard lock(mu_);
    auto& e = ring_[seq % capacity];
    e = flight_entry{seq, std::string(kind), dt, count, bucket, flight_state::queued, now_us(), 0, 0};
    if (seq + 1 > total_) total_ = seq + 1;
  }
  void running(std::uint64_t seq) {
    std::lock_guard lock(mu_);
    if (auto* e = find(seq)) {
      e->state = flight_state::running;
      e->started_us = now_us();
      if (static_cast<std::int64_t>(seq) > last_started_) last_started_ = static_cast<std::int64_t>(seq);
    }
  }
  void finished(std::uint64_t seq, bool ok) {
    std::lock_guard lock(mu_);
    if (auto* e = find(seq)) {
      e->state = ok ? flight_state::done : flight_state::failed;
      e->finished_us = now_us();
    }
  }
  /// A send or recv was posted; returns its id for message_running/finished.
  std::uint64_t message_queued(std::string what) {
    std::lock_guard lock(mu_);
    const std::uint64_t id = messages_total_++;
    messages_[id % capacity] = flight_message{id, std::move(what), flight_state::queued, now_us(), 0, 0};
    return id;
  }
  void message_running(std::uint64_t id) {
    std::lock_guard lock(mu_);
    if (auto& m = messages_[id % capacity]; m.id == id) {
      m.state = flight_state::running;
      m.started_us = now_us();
    }
  }
  void message_finished(std::uint64_t id, bool ok) {
    std::lock_guard lock(mu_);
    if (auto& m = messages_[id % capacity]; m.id == id) {
      m.state = ok ? flight_state::done : flight_state::failed;
      m.finished_us = now_us();
    }
  }
  /// The retained messages, oldest first.
  std::vector<flight_message> messages() const {
    std::lock_guard lock(mu_);
    std::vector<flight_message> out;
    for (std::uint64_t s = messages_total_ > capacity ? messages_total_ - capacity : 0; s < messages_total_;
         ++s)
      out.push_back(messages_[s % capacity]);
    return out;
  }

  /// A line about the failure (the desync report) for the JSON record.
  void note(std::string text) {
    std::lock_guard lock(mu_);
    note_ = std::move(text);
  }

  /// A subgroup's recorder: its name goes into the JSON record, and `file_tag`
  /// into the file's name, so that it does not overwrite the job's group's.
  void set_group(std::string name, std::string file_tag) {
    std::lock_guard lock(mu_);
    group_ = std::move(name);
    file_tag_ = std::move(file_tag);
  }

  /// The retained entries, oldest first.
  std::vector<flight_entry> snapshot() const {
    std::lock_guard lock(mu_);
    std::vector<flight_entry> out;
    std::uint64_t first = total_ > capacity ? total_ - capacity : 0;
    for (std::uint64_t s = first; s < total_; ++s)
      out.push_back(ring_[s % capacity]);
    return out;
  }

  flight_progress progress() const {
    std::lock_guard lock(mu_);
    flight_progress p;
    if (last_started_ < 0) return p;
    const auto& e = ring_[static_cast<std::uint64_t>(last_started_) % capacity];
    p.seq = last_started_;
    p.kind = e.kind;
    p.state = e.state;
    return p;
  }

  std::string to_json(int rank) const {
    auto entries = snapshot();
    std::string note, group;
    {
      std::lock_guard lock(mu_);
      note = note_;
      group = group_;
    }
    std::string j = detail::message(
        {"{\n  \"rank\": ", rank,
         (group.empty() ? std::string() : detail::message({",\n  \"group\": \"", json_escape(group), "\""})),
         ",\n  \"capacity\": ", capacity, ",\n  \"note\": \"", json_escape(note), "\",\n  \"entries\": ["});
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      detail::append_message(j, {i ? "," : "",
                                 "\n    {\"seq\": ",
                                 e.seq,
                                 ", \"kind\": \"",
                                 json_escape(e.kind),
                                 "\", \"dtype\": \"",
                                 to_string(e.dt),
                                 "\", \"count\": ",
                                 e.count,
                                 ", \"bucket\": ",
                                 (e.bucket < 0 ? std::string("null") : std::to_string(e.bucket)),
                                 ", \"state\": \"",
                                 to_string(e.state),
                                 "\", \"queued_us\": ",
                                 e.queued_us,
                                 ", \"started_us\": ",
                                 e.started_us,
                                 ", \"finished_us\": ",
                                 e.finished_us,
                                 "}"});
    }
    j += "\n  ],\n  \"messages\": [";
    const auto msgs = messages();
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      const auto& m = msgs[i];
      detail::append_message(j,
                             {i ? "," : "", "\n    {\"id\": ", m.id, ", \"what\": \"", json_escape(m.what),
                              "\", \"state\": \"", to_string(m.state), "\", \"queued_us\": ", m.queued_us,
                              ", \"started_us\": ", m.started_us, ", \"finished_us\": ", m.finished_us, "}"});
    }
    j += "\n  ]\n}\n";
    return j;
  }

  /// With DDP_FLIGHT_RECORDER=DIR, writes DIR/rank_<rank>.json (once per
  /// process: the first failure is the one worth reading). Returns the path, or
  /// "" when not asked or not written (a warning says why).
  std::string dump_if_asked(int rank) {
    auto dir = getenv_str("DDP_FLIGHT_RECORDER");
    if (!dir || dir->empty()) return {};
    {
      std::lock_guard lock(mu_);
      if (dumped_) return {};
      dumped_ = true;
    }
    std::string tag;
    {
      std::lock_guard lock(mu_);
      tag = file_tag_;
    }
    std::string path = detail::message({*dir, "/rank_", rank, tag, ".json"});
    std::string body = to_json(rank);
    std::FILE* f = std::fopen(path.c_str(), "w");
    bool ok = f && std::fwrite(body.data(), 1, body.size(), f) == body.size();
    if (f) ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
      std::string line = detail::message({"[ddp rank ", rank, "] DDP_FLIGHT_RECORDER: could not write ", path,
                                          " (does the directory exist and is it writable?)\n"});
      std::fwrite(line.data(), 1, line.size(), stderr);
      return {};
    }
    return path;
  }

private:
  static std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  flight_entry* find(std::uint64_t seq) {
    auto& e = ring_[seq % capacity];
    return e.seq == seq ? &e : nullptr;
  }
  static std::string json_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += buf;
      } else {
        out += c;
      }
    }
    return out;
  }

  mutable std::mutex mu_;
  std::array<flight_entry, capacity> ring_{};
  std::uint64_t total_ = 0;
  std::int64_t last_started_ = -1;
  std::array<flight_message, capacity> messages_{}; ///< send/recv, apart from the collectives
  std::uint64_t messages_total_ = 0;
  std::string note_;
  std::string group_, file_tag_; ///< set_group
  bool dumped_ = false;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP
