// Fashion-MNIST with an Eigen MLP, trained data-parallel with ddp.
//
//   ddprun --nproc-per-node 2 build/examples/fashion_mnist/fashion_mnist --epochs 10
//
// The training code is a template on the backend: this file builds a Gloo binary
// (fashion_mnist) and, where NCCL is found, an NCCL one (fashion_mnist_nccl).
#include "checkpoint.hpp"
#include "mlp.hpp"
#include "progress.hpp"

#include <ddp/data/idx.hpp>
#include <ddp/ddp.hpp>
#ifdef DDP_EXAMPLE_NCCL
#include <ddp/backend/nccl.hpp>
#endif

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>

namespace {

struct options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 10;
  int batch_size = 64;
  float lr = 0.05f;
  float momentum = 0.9f;
  unsigned seed = 0;
  std::uint64_t limit = 0;
  std::string checkpoint, metrics_csv, step_log;
  std::string schedule = "cosine";
  bool resume = false, json = false, quiet = false;
};

/// The learning rate at `progress` in [0, 1] of the whole run: constant, or a
/// cosine decay from lr to 0 (which settles the noise momentum 0.9 brings).
float learning_rate(const options& o, double progress) {
  if (o.schedule == "constant") return o.lr;
  return static_cast<float>(0.5 * o.lr * (1.0 + std::cos(3.14159265358979 * progress)));
}

constexpr const char* data_hint = "install Debian's dataset-fashion-mnist, or pass --data DIR";

/// "0.05", "1e+06": a bound as people write it.
std::string shortest(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

/// A finite float in (low, high] or [low, high]. CLI11's PositiveNumber and Range let
/// nan through (every comparison with nan is false): --lr nan once trained to a nan loss, rc 0.
/// Read as a float, as the options are: 1e39 is inf there, 1e-50 is 0.
CLI::Validator finite_number(float low, bool low_allowed, float high) {
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
CLI::Validator whole_number(std::uint64_t low, std::uint64_t high) {
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
std::string message_of(const std::exception& e) {
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
  if (failure) throw *failure; // rank 0: its own error, path and offset
  if (outcome[0])
    throw ddp::error(static_cast<ddp::error_kind>(outcome[1]),
                     "rank 0 " + what + ": " + reinterpret_cast<const char*>(outcome.data() + 2));
}

void open_or_throw(std::ofstream& f, const std::string& path, std::ios::openmode mode, const char* option) {
  f.open(path, mode);
  if (!f.is_open())
    throw ddp::error(ddp::error_kind::config, std::string(option) + " " + path +
                                                  ": cannot open it for writing (" + std::strerror(errno) +
                                                  "); choose a writable path");
}

/// Columns of x for the given sample indices (images are stored one sample per row).
void gather(const ddp::data::labeled_images& d, std::span<const std::int64_t> idx, example::matrix& x,
            std::vector<int>& y) {
  x.resize(d.images.cols(), static_cast<Eigen::Index>(idx.size()));
  y.resize(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    x.col(static_cast<Eigen::Index>(j)) = d.images.row(idx[j]).transpose();
    y[j] = d.labels[static_cast<std::size_t>(idx[j])];
  }
}

std::vector<example::named_tensor> state_of(example::mlp& m, example::sgd_momentum& opt) {
  std::vector<example::named_tensor> t;
  for (int l = 0; l < example::mlp::layers; ++l) {
    auto name = "fc" + std::to_string(l + 1);
    t.push_back({name + ".weight", {m.w[l].data(), static_cast<std::size_t>(m.w[l].size())}});
    t.push_back({name + ".bias", {m.b[l].data(), static_cast<std::size_t>(m.b[l].size())}});
  }
  for (std::size_t k = 0; k < opt.velocity.size(); ++k)
    t.push_back({t[k].name + ".momentum",
                 {opt.velocity[k].data(), static_cast<std::size_t>(opt.velocity[k].size())}});
  return t;
}

/// Rank 0 loads and verifies; every rank learns whether that worked, then receives the state.
template <class PG>
std::uint64_t resume(PG& pg, const std::string& path, std::vector<example::named_tensor> state,
                     std::uint64_t max_epoch) {
  std::vector<std::int64_t> epoch{0};
  on_rank0(pg, "could not load the checkpoint",
           [&] { epoch[0] = static_cast<std::int64_t>(example::load_checkpoint(path, state, max_epoch)); });
  pg.broadcast(epoch, 0);
  for (auto& t : state)
    pg.broadcast(t.data, 0);
  return static_cast<std::uint64_t>(epoch[0]);
}

/// Test accuracy: each rank scores every size()-th test sample, then one all-reduce.
template <class PG> double evaluate(PG& pg, example::mlp& m, const ddp::data::labeled_images& test) {
  std::vector<std::int64_t> idx;
  for (auto i = static_cast<std::size_t>(pg.rank()); i < test.size();
       i += static_cast<std::size_t>(pg.size()))
    idx.push_back(static_cast<std::int64_t>(i));
  std::vector<double> counts{0, static_cast<double>(idx.size())};
  example::matrix x;
  std::vector<int> y;
  for (std::size_t start = 0; start < idx.size(); start += 1000) {
    std::span<const std::int64_t> part(idx.data() + start, std::min<std::size_t>(1000, idx.size() - start));
    gather(test, part, x, y);
    const auto& logits = m.forward(x);
    for (Eigen::Index c = 0; c < logits.cols(); ++c) {
      Eigen::Index best;
      logits.col(c).maxCoeff(&best);
      counts[0] += best == y[static_cast<std::size_t>(c)];
    }
  }
  pg.all_reduce(counts);
  return counts[0] / counts[1];
}

template <class Backend> int train(const options& o) {
  // Data first: a missing file fails on every rank before anyone waits for a peer.
  // Every label must index one of the model's outputs: the reader refuses others, naming the byte.
  auto train_set =
      ddp::data::read_idx(o.data + "/train-images-idx3-ubyte.gz", o.data + "/train-labels-idx1-ubyte.gz",
                          example::mlp::classes, data_hint);
  auto test_set =
      ddp::data::read_idx(o.data + "/t10k-images-idx3-ubyte.gz", o.data + "/t10k-labels-idx1-ubyte.gz",
                          example::mlp::classes, data_hint);
  const std::size_t n = o.limit ? static_cast<std::size_t>(std::min<std::uint64_t>(o.limit, train_set.size()))
                                : train_set.size();

  auto pg = ddp::init_process_group<Backend>();
  const bool lead = pg.rank() == 0;
  // Rank 0 writes the checkpoint and the logs: prove it can before anyone trains. A read-only
  // checkpoint directory once failed only after a whole epoch, and then after the others' timeout.
  std::ofstream csv, steps;
  on_rank0(pg, "cannot write its output files", [&] {
    if (!o.checkpoint.empty()) example::check_writable(o.checkpoint);
    if (!o.metrics_csv.empty()) {
      open_or_throw(csv, o.metrics_csv, o.resume ? std::ios::app : std::ios::trunc, "--metrics-csv");
      if (!o.resume) csv << "epoch,train_loss,test_acc,epoch_s\n";
    }
    if (!o.step_log.empty()) open_or_throw(steps, o.step_log, std::ios::trunc, "--step-log");
  });
  example::mlp model(o.seed);
  ddp::distributed_data_parallel dp(model, pg); // checks the model on every rank, copies rank 0's weights
  example::sgd_momentum opt{o.lr, o.momentum, {}};
  std::uint64_t first_epoch = 0;
  if (o.resume) {
    opt.step(model); // allocates the momentum buffers (gradients are zero: no change)
    first_epoch = resume(pg, o.checkpoint, state_of(model, opt), static_cast<std::uint64_t>(o.epochs));
    if (lead && !o.quiet)
      std::printf("resumed from %s at epoch %llu\n", o.checkpoint.c_str(),
                  static_cast<unsigned long long>(first_epoch));
  }

  ddp::distributed_sampler<ddp::sampling::shuffled> sampler(n, pg, {.seed = o.seed});

  example::matrix x;
  std::vector<int> y;
  for (auto epoch = static_cast<int>(first_epoch); epoch < o.epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    auto batches = ddp::batches(sampler, static_cast<std::size_t>(o.batch_size));
    example::progress bar(epoch + 1, o.epochs, batches.size(), lead && !o.quiet && !o.json);
    double loss_sum = 0;
    std::size_t step = 0, seen = 0;
    for (auto batch : batches) {
      gather(train_set, batch, x, y);
      model.forward(x);
      // Backward, last layer first; each layer's gradients start their all-reduce at once.
      float loss = model.backward(y, [&](int l) {
        dp.mark_grad_ready(model.dw[l]);
        dp.mark_grad_ready(model.db[l]);
      });
      dp.synchronize();
      opt.lr = learning_rate(o, (epoch + static_cast<double>(step) / static_cast<double>(batches.size())) /
                                    o.epochs);
      opt.step(model);
      loss_sum += loss;
      seen += batch.size() * static_cast<std::size_t>(pg.size());
      ++step;
      if (!o.step_log.empty()) { // global loss of this step (costs one small all-reduce)
        std::vector<double> l{loss};
        pg.all_reduce(l, ddp::op::avg);
        if (lead) steps << l[0] << "\n";
      }
      bar.update(step, seen, loss_sum / static_cast<double>(step));
    }
    bar.finish();
    std::vector<double> totals{loss_sum, static_cast<double>(step)};
    pg.all_reduce(totals);
    const double train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
    const double acc = evaluate(pg, model, test_set);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (lead) {
      if (o.json)
        std::printf("{\"epoch\":%d,\"train_loss\":%.6f,\"test_acc\":%.6f,\"epoch_s\":%.4f}\n", epoch + 1,
                    train_loss, acc, secs);
      else if (!o.quiet)
        std::printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.2f s\n", epoch + 1, o.epochs,
                    train_loss, 100 * acc, secs);
      std::fflush(stdout);
      if (csv.is_open()) csv << epoch + 1 << "," << train_loss << "," << acc << "," << secs << std::endl;
      if (!o.checkpoint.empty())
        example::save_checkpoint(o.checkpoint, static_cast<std::uint64_t>(epoch + 1), state_of(model, opt));
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  // torch.distributed.launch without --use_env adds --local_rank=N: check it against LOCAL_RANK, drop it.
  try {
    ddp::consume_local_rank_arg(argc, argv);
  } catch (const ddp::error& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 2;
  }
  CLI::App app{"Fashion-MNIST MLP (784-256-128-10) trained with ddp"};
  app.footer(
      "Also accepted: --local_rank N, --local_rank=N, --local-rank=N (from torch.distributed.launch),\n"
      "checked against LOCAL_RANK.\n");
  options o;
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
  app.add_flag("--resume", o.resume, "continue from --checkpoint")->needs(checkpoint);
  app.add_option("--metrics-csv", o.metrics_csv, "append per-epoch metrics to this CSV file");
  app.add_option("--step-log", o.step_log, "write the global loss of every step to this file (rank 0)");
  app.add_flag("--json", o.json, "one JSON line per epoch instead of the progress display");
  app.add_flag("--quiet", o.quiet, "no progress display");
  CLI11_PARSE(app, argc, argv);
  try {
#ifdef DDP_EXAMPLE_NCCL
    return train<ddp::nccl>(o);
#else
    return train<ddp::gloo>(o);
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
