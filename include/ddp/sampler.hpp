// ddp::distributed_sampler — which sample indices this rank visits each epoch.
// `shuffled` and `sequential` are index-identical to PyTorch's
// torch.utils.data.DistributedSampler (shuffle=True/False) for every
// (n, num_replicas, rank, seed, epoch, drop_last). Needs neither Gloo nor NCCL.
#ifndef DDP_SAMPLER_HPP
#define DDP_SAMPLER_HPP

#include <ddp/error.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <random>
#include <ranges>
#include <span>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE

struct sampler_options {
  std::uint64_t seed = 0;
  bool drop_last = false;
};

/// Everything a sampling policy needs to pick this rank's indices.
struct sampler_context {
  std::size_t n = 0; ///< data set size
  int num_replicas = 1;
  int rank = 0;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  bool drop_last = false;
  std::size_t num_samples = 0; ///< indices per rank (PyTorch's num_samples)
  std::size_t total_size = 0;  ///< num_samples * num_replicas
};

/// A sampling policy writes exactly ctx.num_samples indices for ctx.rank.
template <class P>
concept sampling_policy = requires(const sampler_context& ctx, std::vector<std::int64_t>& out) {
  {P::rank_indices(ctx, out)};
};

namespace detail {

/// PyTorch's torch.randperm(n, generator) on the CPU, with the generator
/// seeded by `seed`: a Fisher–Yates pass driven by MT19937, which PyTorch
/// seeds with the low 32 bits of the seed. Large n draws 64-bit numbers, as
/// PyTorch does from n >= 2^32 / 20.
template <class Index> void torch_randperm(std::vector<Index>& r, std::size_t n, std::uint64_t seed) {
  r.resize(n);
  std::iota(r.begin(), r.end(), Index{0});
  if (n < 2) return;
  std::mt19937 gen(static_cast<std::uint32_t>(seed));
  const bool wide = n >= std::size_t{0xffffffffu} / 20;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    std::uint64_t x = gen();
    if (wide) x = (x << 32) | gen();
    std::size_t z = static_cast<std::size_t>(x % (n - i));
    std::swap(r[i], r[z + i]);
  }
}

/// Rank r's share of a global order, PyTorch style: the order padded with its
/// own head (repeated as needed) or truncated to total_size, then every
/// num_replicas-th element starting at rank. `order(j)` gives element j < n.
template <class Order>
void strided_share(const sampler_context& c, std::vector<std::int64_t>& out, Order&& order) {
  out.resize(c.num_samples);
  for (std::size_t k = 0; k < c.num_samples; ++k) {
    std::size_t j = static_cast<std::size_t>(c.rank) + k * static_cast<std::size_t>(c.num_replicas);
    out[k] = static_cast<std::int64_t>(order(j % c.n)); // j >= n only when padding: repeats the head
  }
}

} // namespace detail

namespace sampling {

/// PyTorch's DistributedSampler(shuffle=True): a fresh permutation per
/// (seed + epoch), interleaved over ranks.
struct shuffled {
  static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
    if (c.n == 0) {
      out.clear();
      return;
    }
    // The permutation is the one O(n) buffer; 32-bit entries when they fit.
    if (c.n <= 0xffffffffu) {
      std::vector<std::uint32_t> perm;
      detail::torch_randperm(perm, c.n, c.seed + c.epoch);
      detail::strided_share(c, out, [&](std::size_t j) { return perm[j]; });
    } else {
      std::vector<std::uint64_t> perm;
      detail::torch_randperm(perm, c.n, c.seed + c.epoch);
      detail::strided_share(c, out, [&](std::size_t j) { return perm[j]; });
    }
  }
};

/// PyTorch's DistributedSampler(shuffle=False): 0..n-1 interleaved over ranks.
struct sequential {
  static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
    if (c.n == 0) {
      out.clear();
      return;
    }
    detail::strided_share(c, out, [](std::size_t j) { return j; });
  }
};

/// Each rank reads one contiguous block of the (padded or truncated) index
/// range: rank r gets [r * num_samples, (r + 1) * num_samples). Prefer it for
/// streamed or memory-mapped data, where sequential reads matter more than
/// mixing; same sizes and padding as `shuffled`. With ShuffleBlocks, which
/// rank reads which block changes every epoch (a permutation of the ranks
/// seeded by seed + epoch); the order inside a block stays sequential.
template <bool ShuffleBlocks = false> struct basic_contiguous {
  static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
    out.resize(c.num_samples);
    if (c.n == 0) return;
    std::size_t block = static_cast<std::size_t>(c.rank);
    if constexpr (ShuffleBlocks) {
      std::vector<std::uint32_t> perm;
      detail::torch_randperm(perm, static_cast<std::size_t>(c.num_replicas), c.seed + c.epoch);
      block = perm[block];
    }
    for (std::size_t k = 0; k < c.num_samples; ++k)
      out[k] = static_cast<std::int64_t>((block * c.num_samples + k) % c.n);
  }
};
using contiguous = basic_contiguous<false>;
using contiguous_shuffled_blocks = basic_contiguous<true>;

} // namespace sampling

/// The primary template only diagnoses a policy that is not one, once.
template <class Policy = sampling::shuffled> class distributed_sampler {
  static_assert(sampling_policy<Policy>,
                "ddp: distributed_sampler<P> needs a sampling policy: a type with "
                "`static void rank_indices(const ddp::sampler_context&, std::vector<std::int64_t>& out)` "
                "(see ddp::sampling::shuffled, sequential, contiguous).");

public:
  template <class... Args> explicit distributed_sampler(Args&&...) {}
};

template <sampling_policy Policy> class distributed_sampler<Policy> {
public:
  using policy_type = Policy;

  distributed_sampler(std::size_t n, int num_replicas, int rank, sampler_options o = {}) {
    if (num_replicas < 1)
      throw error(error_kind::config, "distributed_sampler: num_replicas=" + std::to_string(num_replicas) +
                                          " must be at least 1");
    if (rank < 0 || rank >= num_replicas)
      throw error(error_kind::config, "distributed_sampler: rank=" + std::to_string(rank) +
                                          " must be in [0, num_replicas=" + std::to_string(num_replicas) +
                                          ")");
    ctx_.n = n;
    ctx_.num_replicas = num_replicas;
    ctx_.rank = rank;
    ctx_.seed = o.seed;
    ctx_.drop_last = o.drop_last;
    const auto r = static_cast<std::size_t>(num_replicas);
    ctx_.num_samples = o.drop_last ? n / r : (n + r - 1) / r;
    ctx_.total_size = ctx_.num_samples * r;
  }

  /// From a process group (anything with rank() and size()).
  template <class Group>
  requires requires(const Group& g) {
    { g.rank() } -> std::convertible_to<int>;
    { g.size() } -> std::convertible_to<int>;
  }
  distributed_sampler(std::size_t n, const Group& group, sampler_options o = {})
      : distributed_sampler(n, group.size(), group.rank(), o) {}

  /// Like PyTorch: call before each epoch so every epoch is shuffled differently.
  void set_epoch(std::uint64_t epoch) {
    if (epoch != ctx_.epoch) {
      ctx_.epoch = epoch;
      valid_ = false;
    }
  }
  std::uint64_t epoch() const noexcept { return ctx_.epoch; }

  /// Indices this rank visits per epoch (PyTorch's len(sampler)).
  std::size_t size() const noexcept { return ctx_.num_samples; }
  std::size_t total_size() const noexcept { return ctx_.total_size; }
  const sampler_context& context() const noexcept { return ctx_; }

  /// This rank's indices for the current epoch; computed once per epoch.
  std::span<const std::int64_t> indices() const {
    if (!valid_) {
      Policy::rank_indices(ctx_, cache_);
      if (cache_.size() != ctx_.num_samples)
        throw error(error_kind::config, "sampling policy produced " + std::to_string(cache_.size()) +
                                            " indices for rank " + std::to_string(ctx_.rank) + ", expected " +
                                            std::to_string(ctx_.num_samples));
      valid_ = true;
    }
    return cache_;
  }

  auto begin() const { return indices().begin(); }
  auto end() const { return indices().end(); }

private:
  sampler_context ctx_;
  mutable std::vector<std::int64_t> cache_;
  mutable bool valid_ = false;
};

/// Consecutive batches of a sampler's indices, as spans into its index list:
/// no allocation per batch. The last batch is short unless drop_last.
class batch_range {
public:
  batch_range(std::span<const std::int64_t> all, std::size_t batch_size, bool drop_last)
      : all_(all), batch_(batch_size), drop_last_(drop_last) {
    if (batch_size == 0) throw error(error_kind::config, "batches: batch_size must be at least 1");
  }

  class iterator {
  public:
    using value_type = std::span<const std::int64_t>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(std::span<const std::int64_t> all, std::size_t batch, std::size_t pos)
        : all_(all), batch_(batch), pos_(pos) {}
    value_type operator*() const { return all_.subspan(pos_, std::min(batch_, all_.size() - pos_)); }
    iterator& operator++() {
      pos_ += batch_;
      return *this;
    }
    iterator operator++(int) {
      auto t = *this;
      ++*this;
      return t;
    }
    bool operator==(const iterator& o) const { return pos_ == o.pos_; }

  private:
    std::span<const std::int64_t> all_;
    std::size_t batch_ = 1, pos_ = 0;
  };

  /// Number of batches.
  std::size_t size() const { return drop_last_ ? all_.size() / batch_ : (all_.size() + batch_ - 1) / batch_; }
  iterator begin() const { return {all_, batch_, 0}; }
  iterator end() const { return {all_, batch_, size() * batch_}; }

private:
  std::span<const std::int64_t> all_;
  std::size_t batch_;
  bool drop_last_;
};

template <sampling_policy Policy>
batch_range batches(const distributed_sampler<Policy>& s, std::size_t batch_size, bool drop_last = false) {
  return batch_range(s.indices(), batch_size, drop_last);
}

DDP_END_NAMESPACE

#endif // DDP_SAMPLER_HPP
