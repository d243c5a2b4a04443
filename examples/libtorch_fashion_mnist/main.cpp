// Fashion-MNIST with a LibTorch CNN, trained data-parallel with ddp over Gloo.
// The same options, JSON lines and checkpoints as the Eigen example; the
// training loop is LibTorch's own: autograd marks the gradients for ddp.
//
//   ddprun --nproc-per-node 2 build/examples/libtorch_fashion_mnist/libtorch_fashion_mnist --epochs 2
#include "../fashion_mnist/checkpoint.hpp"
#include "../fashion_mnist/cli.hpp"
#include "../fashion_mnist/json_number.hpp"
#include "../fashion_mnist/progress.hpp"
#include "cnn.hpp"

#include <ddp/data/idx.hpp>
#include <ddp/ddp.hpp>
#include <ddp/torch.hpp>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>

namespace {

using example::options;

/// The images as an N x 1 x 28 x 28 float tensor, the labels as int64; a
/// batch is the rows the sampler names.
struct data_set : torch::data::datasets::BatchDataset<data_set, torch::data::Example<>> {
  data_set(torch::Tensor x, torch::Tensor y) : images(std::move(x)), labels(std::move(y)) {}
  torch::data::Example<> get_batch(c10::ArrayRef<std::size_t> rows) override {
    auto idx = torch::tensor(std::vector<std::int64_t>(rows.begin(), rows.end()));
    return {images.index_select(0, idx), labels.index_select(0, idx)};
  }
  c10::optional<std::size_t> size() const override { return static_cast<std::size_t>(labels.size(0)); }
  torch::Tensor images, labels;
};

data_set load(const options& o, const std::string& images, const std::string& labels) {
  auto d = ddp::data::read_idx(o.data + "/" + images, o.data + "/" + labels, example::CnnImpl::classes,
                               example::data_hint);
  const auto n = static_cast<std::int64_t>(d.size());
  auto x = torch::from_blob(d.images.data(), {n, 1, 28, 28}).clone();
  auto y = torch::from_blob(d.labels.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return data_set(x, y);
}

/// Parameters, then each parameter's momentum buffer: what a checkpoint holds.
std::vector<example::named_tensor> state_of(example::Cnn& net, torch::optim::SGD& opt) {
  std::vector<example::named_tensor> t;
  auto span_of = [](torch::Tensor& x) {
    return std::span<float>(x.data_ptr<float>(), static_cast<std::size_t>(x.numel()));
  };
  for (auto& item : net->named_parameters())
    t.push_back({item.key(), span_of(item.value())});
  for (auto& item : net->named_parameters()) {
    auto& st = opt.state().at(c10::guts::to_string(item.value().unsafeGetTensorImpl()));
    t.push_back({item.key() + ".momentum",
                 span_of(static_cast<torch::optim::SGDParamState&>(*st).momentum_buffer())});
  }
  return t;
}

template <class PG>
example::position resume(PG& pg, const options& o, const std::vector<example::named_tensor>& state) {
  example::position pos;
  example::on_rank0(pg, "could not load the checkpoint", [&] {
    pos = example::load_checkpoint(o.checkpoint, state, static_cast<std::uint64_t>(o.epochs));
  });
  std::vector<std::int64_t> head{static_cast<std::int64_t>(pos.epoch), static_cast<std::int64_t>(pos.batch),
                                 pos.batch_size, static_cast<std::int64_t>(pos.loss_sums.size())};
  pg.broadcast(head, 0);
  pos = {static_cast<std::uint64_t>(head[0]), static_cast<std::uint64_t>(head[1]),
         static_cast<std::uint32_t>(head[2]), std::vector<double>(static_cast<std::size_t>(head[3]))};
  if (!pos.loss_sums.empty()) pg.broadcast(pos.loss_sums, 0);
  for (auto t : state)
    pg.broadcast(t.data, 0);
  return pos;
}

template <class PG> double evaluate(PG& pg, example::Cnn& net, const data_set& test) {
  torch::NoGradGuard no_grad;
  std::vector<double> counts{0, 0};
  for (auto i = static_cast<std::int64_t>(pg.rank()) * 1000; i < static_cast<std::int64_t>(*test.size());
       i += static_cast<std::int64_t>(pg.size()) * 1000) {
    const auto n = std::min<std::int64_t>(1000, static_cast<std::int64_t>(*test.size()) - i);
    auto pred = net->forward(test.images.narrow(0, i, n)).argmax(1);
    counts[0] +=
        static_cast<double>(pred.eq(test.labels.narrow(0, i, n)).sum().template item<std::int64_t>());
    counts[1] += static_cast<double>(n);
  }
  pg.all_reduce(counts);
  return counts[0] / counts[1];
}

int train(const options& o) {
  auto train_set = load(o, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz");
  auto test_set = load(o, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz");
  const std::size_t n = o.limit ? std::min<std::size_t>(o.limit, *train_set.size()) : *train_set.size();

  auto pg = ddp::init_process_group<ddp::gloo>();
  const bool lead = pg.rank() == 0;
  const bool resuming = example::resumes(pg, o);
  std::ofstream csv, steps;
  example::on_rank0(pg, "cannot write its output files", [&] {
    if (!o.step_log.empty()) example::open_or_throw(steps, o.step_log, std::ios::trunc, "--step-log");
    if (!o.checkpoint.empty()) example::check_writable(o.checkpoint);
    if (!o.metrics_csv.empty()) {
      example::open_or_throw(csv, o.metrics_csv, resuming ? std::ios::app : std::ios::trunc, "--metrics-csv");
      if (!resuming) csv << "epoch,train_loss,test_acc,epoch_s\n";
    }
  });

  torch::manual_seed(o.seed);
  example::Cnn net;
  ddp::distributed_data_parallel dp(*net, pg); // checks the model on every rank, copies rank 0's weights
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  example::position start;
  if (resuming) {
    opt.step(); // creates the momentum buffers (the gradients are zero: nothing moves)
    start = resume(pg, o, state_of(net, opt));
    if (start.batch > 0 && (start.loss_sums.size() != static_cast<std::size_t>(pg.size()) ||
                            start.batch_size != static_cast<std::uint32_t>(o.batch_size)))
      throw ddp::error(ddp::error_kind::config, "checkpoint " + o.checkpoint +
                                                    " was saved mid-epoch with another world size or "
                                                    "--batch-size: resume with those");
    if (lead && !o.quiet)
      std::printf("resumed from %s at epoch %llu, batch %llu\n", o.checkpoint.c_str(),
                  static_cast<unsigned long long>(start.epoch), static_cast<unsigned long long>(start.batch));
  }
  ddp::torch::distributed_sampler<> sampler(n, pg, {.seed = o.seed});
  auto loader = torch::data::make_data_loader(
      train_set, sampler, torch::data::DataLoaderOptions(static_cast<std::size_t>(o.batch_size)));
  auto save = [&](std::uint64_t epoch, std::uint64_t batch, double loss_sum) {
    std::vector<double> sums(static_cast<std::size_t>(pg.size()), 0.0);
    if (batch > 0) pg.all_gather(std::vector<double>{loss_sum}, sums);
    if (lead)
      example::save_checkpoint(o.checkpoint, {epoch, batch, static_cast<std::uint32_t>(o.batch_size), sums},
                               state_of(net, opt));
  };
  const std::size_t per_epoch =
      (sampler.size() + static_cast<std::size_t>(o.batch_size) - 1) / static_cast<std::size_t>(o.batch_size);
  for (auto epoch = static_cast<int>(start.epoch); epoch < o.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    const bool mid = static_cast<std::uint64_t>(epoch) == start.epoch && start.batch > 0;
    std::size_t step = mid ? start.batch : 0;
    if (mid) sampler.resume_at(step * static_cast<std::size_t>(o.batch_size));
    double loss_sum = mid ? start.loss_sums[static_cast<std::size_t>(pg.rank())] : 0.0;
    example::progress bar(epoch + 1, o.epochs, per_epoch, lead && !o.quiet && !o.json);
    for (auto& batch : *loader) {
      auto& x = batch.data;
      auto& y = batch.target;
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      loss.backward(); // each gradient's bucket starts its all-reduce as autograd finishes it
      dp.synchronize();
      for (auto& g : opt.param_groups())
        static_cast<torch::optim::SGDOptions&>(g.options())
            .lr(example::learning_rate(
                o, (epoch + static_cast<double>(step) / static_cast<double>(per_epoch)) / o.epochs));
      opt.step();
      loss_sum += loss.item<double>();
      ++step;
      if (!o.step_log.empty()) { // global loss of this step (costs one small all-reduce)
        std::vector<double> l{loss.item<double>()};
        pg.all_reduce(l, ddp::op::avg);
        if (lead) steps << l[0] << "\n";
      }
      bar.update(step, step * static_cast<std::size_t>(o.batch_size * pg.size()),
                 loss_sum / static_cast<double>(step));
      const auto global_step = static_cast<std::uint64_t>(epoch) * per_epoch + step;
      if (o.checkpoint_every && global_step % o.checkpoint_every == 0 && step < per_epoch)
        save(static_cast<std::uint64_t>(epoch), step, loss_sum);
    }
    bar.finish();
    const double train_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> totals{loss_sum, static_cast<double>(step)};
    pg.all_reduce(totals);
    const double train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
    const double acc = evaluate(pg, net, test_set);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (lead) {
      if (o.json)
        std::printf("{\"epoch\":%d,\"train_loss\":%s,\"test_acc\":%s,\"epoch_s\":%.4f,\"train_s\":%.4f}\n",
                    epoch + 1, json_number(train_loss).c_str(), json_number(acc).c_str(), secs, train_secs);
      else if (!o.quiet)
        std::printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.2f s\n", epoch + 1, o.epochs,
                    train_loss, 100 * acc, secs);
      std::fflush(stdout);
      if (csv.is_open()) csv << epoch + 1 << "," << train_loss << "," << acc << "," << secs << std::endl;
    }
    if (!o.checkpoint.empty()) save(static_cast<std::uint64_t>(epoch + 1), 0, 0.0);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    ddp::consume_local_rank_arg(argc, argv);
  } catch (const ddp::error& e) {
    std::fprintf(stderr, "libtorch_fashion_mnist: %s\n", e.what());
    return 2;
  }
  CLI::App app{"Fashion-MNIST CNN (two conv+pool, two linear) in LibTorch, trained with ddp"};
  options o;
  example::add_common_options(app, o);
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1); // one thread per rank: ranks share the machine's cores
  try {
    return train(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libtorch_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
