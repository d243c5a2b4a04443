// What both Fashion-MNIST examples (CPU and CUDA) share: their options, every number
// checked for range and form before any rank reads data or waits for a peer, and
// the rank-0-decides-for-everyone helper for files only rank 0 writes.
#pragma once

#include <ddp/error.hpp>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace example {

struct options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 10;
  int batch_size = 64;
  float lr = 0.05f;
  float momentum = 0.9f;
  unsigned seed = 0;
  std::uint64_t limit = 0;
  std::uint64_t checkpoint_every = 0;
  std::uint64_t global_batch_size = 0; ///< 0: --batch-size per rank instead
  std::uint64_t stop_after_steps = 0;  ///< 0: train to the end
  std::string checkpoint, metrics_csv, step_log, dump_params;
  std::string schedule = "cosine";
  bool resume = false, json = false, quiet = false, sharded = false;
};

/// The learning rate at `progress` in [0, 1] of the whole run: constant, or a
/// cosine decay from lr to 0 (which settles the noise momentum 0.9 brings).
inline float learning_rate(const options& o, double progress) {
  if (o.schedule == "constant") return o.lr;
  return static_cast<float>(0.5 * o.lr * (1.0 + std::cos(3.14159265358979 * progress)));
}

inline constexpr const char* data_hint = "install Debian's dataset-fashion-mnist, or pass --data DIR";

/// "0.05", "1e+06": a bound as people write it.
inline std::string shortest(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

/// A finite float in (low, high] or [low, high]. CLI11's PositiveNumber and Range let
/// nan through (every comparison with nan is false): --lr nan once trained to a nan loss, rc 0.
/// Read as a float, as the options are: 1e39 is inf there, 1e-50 is 0.
inline CLI::Validator finite_number(float low, bool low_allowed, float high) {
  const std::string range = std::isinf(high) ? std::string(low_allowed ? ">= " : "> ") + shortest(low)
                                             : std::string("in ") + (low_allowed ? "[" : "(") +
                                                   shortest(low) + ", " + shortest(high) + "]";
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        const float v = std::strtof(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size()) return "'" + s + "' is not a number";
        if (!std::isfinite(v) || v < low || (v == low && !low_allowed) || v > high)
          return "'" + s + "' must be a finite number " + range;
        return {};
      },
      "FINITE " + range);
}

/// A whole number in [low, high], in decimal. CLI11 reads unsigned options with strtoull,
/// which takes "-1" as 2^64-1 (--limit -1 silently meant "all") and "010" as octal 8.
inline CLI::Validator whole_number(std::uint64_t low, std::uint64_t high) {
  const std::string range = high == std::numeric_limits<std::uint64_t>::max()
                                ? ">= " + std::to_string(low)
                                : "in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        std::uint64_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        const bool digits =
            !s.empty() && s[0] != '-' && ec != std::errc::invalid_argument && end == s.data() + s.size();
        if (!digits || ec == std::errc::result_out_of_range || v < low || v > high)
          return "'" + s + "' must be a whole number " + range + " (decimal digits only)";
        s = std::to_string(v); // canonical decimal for CLI11's base-detecting conversion
        return {};
      },
      "INT " + range);
}

/// What a ddp::error says after its "ddp <kind> error: " prefix.
inline std::string message_of(const std::exception& e) {
  std::string m = e.what();
  if (m.rfind("ddp ", 0) == 0)
    if (auto colon = m.find(": "); colon != std::string::npos) return m.substr(colon + 2);
  return m;
}

/// Runs `f` on rank 0 only (it alone reads and writes the checkpoint and the logs) and
/// makes every rank learn the outcome: a failure there ends every rank at once, each
/// naming what rank 0 found, instead of leaving the others to wait out the timeout.
template <class PG, class F> void on_rank0(PG& pg, const std::string& what, F&& f) {
  std::vector<std::uint8_t> outcome(1024, 0); // failed?, error kind, message (NUL-terminated)
  std::optional<ddp::error> failure;
  if (pg.rank() == 0) {
    try {
      f();
    } catch (const ddp::error& e) { failure = e; } catch (const std::exception& e) {
      failure = ddp::error(ddp::error_kind::data, e.what());
    }
    if (failure) {
      outcome[0] = 1;
      outcome[1] = static_cast<std::uint8_t>(failure->kind());
      auto m = message_of(*failure);
      std::memcpy(outcome.data() + 2, m.data(), std::min(m.size(), outcome.size() - 3));
    }
  }
  pg.broadcast(outcome, 0);
  if (!outcome[0]) return;
  // Rank 0's send can complete before a peer has received it, and an exception leaving a live
  // group tells every peer to give up its collective: so every rank first waits until all
  // hold the outcome (a barrier completes only once every rank entered it), then each throws
  // its own message. A peer that throws first may fail this barrier elsewhere: ignored.
  try {
    pg.barrier();
  } catch (const ddp::error&) {}
  if (failure) throw *failure; // rank 0: its own error, path and offset
  throw ddp::error(static_cast<ddp::error_kind>(outcome[1]),
                   "rank 0 " + what + ": " + reinterpret_cast<const char*>(outcome.data() + 2));
}

/// Whether this run resumes from `o.checkpoint`: --resume, or a restart by ddprun
/// --max-restarts (DDP_RESTART_ROUND > 0) when rank 0 has a checkpoint (a failure
/// before the first save starts afresh). Rank 0 looks; every rank gets its answer.
template <class PG> bool resumes(PG& pg, const options& o) {
  const int round = pg.topology().restart_round.value_or(0);
  if (o.resume || round == 0 || o.checkpoint.empty()) return o.resume;
  std::vector<std::uint8_t> exists{0};
  if (pg.rank() == 0) exists[0] = std::filesystem::is_regular_file(o.checkpoint) ? 1 : 0;
  pg.broadcast(exists, 0);
  if (pg.rank() == 0 && !o.quiet && exists[0] == 0)
    std::printf("restart round %d: no checkpoint at %s yet, starting afresh\n", round, o.checkpoint.c_str());
  return exists[0] != 0;
}

inline void open_or_throw(std::ofstream& f, const std::string& path, std::ios::openmode mode,
                          const char* option) {
  f.open(path, mode);
  if (!f.is_open())
    throw ddp::error(ddp::error_kind::config, std::string(option) + " " + path +
                                                  ": cannot open it for writing (" + std::strerror(errno) +
                                                  "); choose a writable path");
}

/// The options both examples take, with their checks.
inline void add_common_options(CLI::App& app, options& o) {
  app.add_option("--data", o.data, "directory with the Fashion-MNIST .gz files")->capture_default_str();
  // Every number is checked for range and form here, before any rank reads data or waits for a peer
  // (whole numbers as a transform: it hands CLI11 the canonical decimal, check() would drop that).
  app.add_option("--epochs", o.epochs, "epochs to train")
      ->transform(whole_number(0, 100000))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "samples per rank per step")
      ->transform(whole_number(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "initial learning rate")
      ->check(finite_number(0, false, std::numeric_limits<float>::infinity()))
      ->capture_default_str();
  app.add_option("--lr-schedule", o.schedule, "cosine (decays to 0 over --epochs) or constant")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--momentum", o.momentum, "SGD momentum")
      ->check(finite_number(0, true, 1))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial weights and of the shuffling")
      ->transform(whole_number(0, std::numeric_limits<unsigned>::max()))
      ->capture_default_str();
  app.add_option("--limit", o.limit, "train on the first N samples only (0: all)")
      ->transform(whole_number(0, std::numeric_limits<std::uint64_t>::max()));
  auto* checkpoint = app.add_option("--checkpoint", o.checkpoint,
                                    "save parameters and optimizer state here after every epoch");
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "also save every N steps, with the position in the epoch (0: at epochs' ends only)")
      ->transform(whole_number(0, std::numeric_limits<std::uint64_t>::max()))
      ->needs(checkpoint);
  app.add_flag("--resume", o.resume,
               "continue from --checkpoint (after a ddprun restart, DDP_RESTART_ROUND > 0, it does so "
               "whenever the checkpoint exists)")
      ->needs(checkpoint);
  app.add_option("--metrics-csv", o.metrics_csv, "append per-epoch metrics to this CSV file");
  app.add_option("--step-log", o.step_log, "write the global loss of every step to this file (rank 0)");
  app.add_flag(
      "--sharded", o.sharded,
      "ZeRO-1: each rank keeps and updates 1/W of the optimizer's state (ddp::sharded_data_parallel)");
  app.add_flag("--json", o.json, "one JSON line per epoch instead of the progress display");
  app.add_flag("--quiet", o.quiet, "no progress display");
}

} // namespace example
