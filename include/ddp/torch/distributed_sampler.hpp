// ddp::torch::distributed_sampler — ddp's sampler as a torch::data sampler,
// for torch::data::make_data_loader: each rank's indices equal Python's
// DistributedSampler (LibTorch's own DistributedRandomSampler shuffles
// differently). Copies share one state, so the copy you keep steers the one
// the data loader holds: set_epoch() before each epoch, resume_at() to pick
// up mid-epoch after a restart.
#ifndef DDP_TORCH_DISTRIBUTED_SAMPLER_HPP
#define DDP_TORCH_DISTRIBUTED_SAMPLER_HPP

#include <ddp/error.hpp>
#include <ddp/sampler.hpp>

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace torch {

template <class Policy = sampling::shuffled>
class distributed_sampler : public ::torch::data::samplers::Sampler<std::vector<std::size_t>> {
public:
  distributed_sampler(std::size_t size, int num_replicas, int rank, sampler_options o = {})
      : state_(std::make_shared<state>(ddp::distributed_sampler<Policy>(size, num_replicas, rank, o), o,
                                       num_replicas, rank)) {}

  /// From a process group (anything with rank() and size()).
  template <class Group>
  requires requires(const Group& g) {
    { g.rank() } -> std::convertible_to<int>;
    { g.size() } -> std::convertible_to<int>;
  }
  distributed_sampler(std::size_t size, const Group& group, sampler_options o = {})
      : distributed_sampler(size, group.size(), group.rank(), o) {}

  /// Like PyTorch: call before each epoch so every epoch is shuffled
  /// differently. Forgets a resume position.
  void set_epoch(std::uint64_t epoch) {
    state_->sampler.set_epoch(epoch);
    state_->resume = 0;
    state_->cursor = 0;
  }
  std::uint64_t epoch() const noexcept { return state_->sampler.epoch(); }

  /// The data loader's next pass over this epoch starts after `samples_done`
  /// of this rank's indices (batches done × batch size), as an uninterrupted
  /// epoch would continue.
  void resume_at(std::size_t samples_done) {
    if (samples_done > state_->sampler.size())
      throw error(error_kind::config, "distributed_sampler: resume position " + std::to_string(samples_done) +
                                          " is past this rank's " + std::to_string(state_->sampler.size()) +
                                          " indices per epoch");
    state_->resume = samples_done;
    state_->cursor = samples_done;
  }
  /// Indices of this epoch handed out so far (what resume_at takes back).
  std::size_t position() const noexcept { return state_->cursor; }

  /// Indices this rank visits per epoch (len(sampler) in Python).
  std::size_t size() const noexcept { return state_->sampler.size(); }

  /// The data loader calls this at each begin(): back to the start of the
  /// epoch, or to the resume position. A new size rebuilds the shares.
  void reset(c10::optional<std::size_t> new_size = c10::nullopt) override {
    if (new_size && *new_size != state_->sampler.context().n) {
      const auto epoch = state_->sampler.epoch();
      state_->sampler =
          ddp::distributed_sampler<Policy>(*new_size, state_->replicas, state_->rank, state_->options);
      state_->sampler.set_epoch(epoch);
      state_->resume = 0;
    }
    state_->cursor = state_->resume;
  }

  c10::optional<std::vector<std::size_t>> next(std::size_t batch_size) override {
    auto all = state_->sampler.indices();
    if (state_->cursor >= all.size()) return c10::nullopt;
    const auto end = std::min(all.size(), state_->cursor + batch_size);
    std::vector<std::size_t> out(all.begin() + static_cast<std::ptrdiff_t>(state_->cursor),
                                 all.begin() + static_cast<std::ptrdiff_t>(end));
    state_->cursor = end;
    return out;
  }

  void save(::torch::serialize::OutputArchive& archive) const override {
    archive.write("ddp_sampler_epoch", ::torch::tensor(static_cast<std::int64_t>(epoch())),
                  /*is_buffer=*/true);
    archive.write("ddp_sampler_position", ::torch::tensor(static_cast<std::int64_t>(position())), true);
  }
  void load(::torch::serialize::InputArchive& archive) override {
    ::torch::Tensor epoch, position;
    archive.read("ddp_sampler_epoch", epoch, /*is_buffer=*/true);
    archive.read("ddp_sampler_position", position, true);
    set_epoch(static_cast<std::uint64_t>(epoch.item<std::int64_t>()));
    resume_at(static_cast<std::size_t>(position.item<std::int64_t>()));
  }

private:
  struct state {
    ddp::distributed_sampler<Policy> sampler;
    sampler_options options;
    int replicas, rank;
    std::size_t resume = 0, cursor = 0;
  };
  std::shared_ptr<state> state_;
};

} // namespace torch
DDP_END_NAMESPACE

#endif // DDP_TORCH_DISTRIBUTED_SAMPLER_HPP
