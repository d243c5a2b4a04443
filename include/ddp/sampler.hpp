// ddp::distributed_sampler — which sample indices this rank visits each epoch.
// `shuffled` and `sequential` are index-identical to PyTorch's
// torch.utils.data.DistributedSampler (shuffle=True/False) for every
// (n, num_replicas, rank, seed, epoch, drop_last). PyTorch 2.6 changed
// torch.randperm for n >= 214,748,364; `sampler_options::randperm` says which
// PyTorch `shuffled` follows there (2.6 and later by default). Needs neither
// Gloo nor NCCL.
#ifndef DDP_SAMPLER_HPP
#define DDP_SAMPLER_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/common/mt19937.hpp>
#include <ddp/error.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

DDP_BEGIN_NAMESPACE

/// Which PyTorch's torch.randperm `sampling::shuffled` reproduces. Every version
/// gives the same permutation for n < 214,748,364 = (2^32 - 1) / 20. From there
/// on PyTorch 2.6 shuffles differently (pytorch/pytorch#143682, in the 2.6
/// release through #144735): the same seed gives another order.
enum class torch_randperm : std::uint8_t {
  since_2_6,  ///< PyTorch 2.6 and later (the default)
  before_2_6, ///< PyTorch up to 2.5, e.g. Debian 12's python3-torch 1.13
};

struct sampler_options {
  std::uint64_t seed = 0;
  bool drop_last = false;
  torch_randperm randperm = torch_randperm::since_2_6; ///< only matters for n >= 214,748,364
};

/// Everything a sampling policy needs to pick this rank's indices.
struct sampler_context {
  std::size_t n = 0; ///< data set size
  int num_replicas = 1;
  int rank = 0;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  bool drop_last = false;
  torch_randperm randperm = torch_randperm::since_2_6;
  std::size_t num_samples = 0; ///< indices per rank (PyTorch's num_samples); this rank's, once resumed
  std::size_t total_size = 0;  ///< num_samples * num_replicas; the rest of the epoch, once resumed
  /// The epoch resumes after this many samples of its global order (distributed_sampler::
  /// set_position): 0 for a whole epoch. Only interleaved policies see it non-zero.
  std::size_t start = 0;
};

/// A sampling policy writes exactly ctx.num_samples indices for ctx.rank.
template <class P>
concept sampling_policy = requires(const sampler_context& ctx, std::vector<std::int64_t>& out) {
  {P::rank_indices(ctx, out)};
};

namespace detail {

/// From this n on, PyTorch 2.6+ uses the inside-out shuffle below:
/// `n < std::numeric_limits<uint32_t>::max() / 20` in randperm_cpu
/// (aten/src/ATen/native/TensorFactories.cpp), integer division: 214,748,364.
inline constexpr std::size_t randperm_inside_out_from = std::size_t{0xffffffffu} / 20;

inline void prefetch_for_write([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 1);
#endif
}

/// Allocator for the permutation buffer: from 2 MiB up, memory on a 2 MiB
/// boundary that Linux is asked to back with transparent huge pages
/// (madvise; the kernel may decline). A shuffle reads and writes all over the
/// buffer, and with 4 KiB pages nearly every step also misses the TLB
/// (docs/performance.md, Sampler). Elsewhere, or for small buffers, plain
/// operator new.
template <class T> struct shuffle_buffer_allocator {
  using value_type = T;
  static constexpr std::size_t huge_page = std::size_t{2} << 20;

  shuffle_buffer_allocator() = default;
  template <class U> shuffle_buffer_allocator(const shuffle_buffer_allocator<U>&) noexcept {}

  T* allocate(std::size_t count) {
    if (count > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = count * sizeof(T);
    if (bytes < huge_page) return static_cast<T*>(::operator new(bytes));
    void* p = ::operator new (bytes, std::align_val_t{huge_page});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    ::madvise(p, bytes / huge_page * huge_page, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t count) noexcept {
    if (count * sizeof(T) < huge_page)
      ::operator delete(p);
    else
      ::operator delete (p, std::align_val_t{huge_page});
  }
  template <class U> bool operator==(const shuffle_buffer_allocator<U>&) const noexcept { return true; }
};
template <class Index> using shuffle_buffer = std::vector<Index, shuffle_buffer_allocator<Index>>;

/// Runs step(i, z_i) for i in [0, steps), where z_i = draw(i) is drawn in order
/// of i. The draws do not depend on the array being shuffled, so each z is
/// drawn `Ahead` steps early and the element it names prefetched
/// (target(k, z_k)): a shuffle of a large array is otherwise one cache miss per
/// step (docs/performance.md, Sampler). The order of draws, and so the result,
/// is unchanged.
template <std::size_t Ahead, class Draw, class Target, class Step>
void shuffle_with_lookahead(std::size_t steps, Draw&& draw, Target&& target, Step&& step) {
  using z_type = decltype(draw(std::size_t{0}));
  std::array<z_type, Ahead> ring{};
  for (std::size_t k = 0; k < std::min(Ahead, steps); ++k) {
    ring[k] = draw(k);
    prefetch_for_write(target(k, ring[k]));
  }
  for (std::size_t i = 0; i < steps; ++i) {
    const z_type z = ring[i % Ahead];
    if (i + Ahead < steps) {
      const std::size_t k = i + Ahead;
      ring[i % Ahead] = draw(k);
      prefetch_for_write(target(k, ring[i % Ahead]));
    }
    step(i, z);
  }
}

/// Forward Fisher–Yates with one 32-bit draw per step, as PyTorch's randperm_cpu
/// (aten/src/ATen/native/TensorFactories.cpp) for every n up to 2.5 and below
/// randperm_inside_out_from since 2.6:
///   for i in [0, n-1): z = random() % (n-i); swap(r[i], r[i+z])
/// The modulo of a 32-bit draw is biased for large n, and for n > 2^32 never
/// reaches past i + 2^32 - 1; reproduced as is. Checked against PyTorch 1.13 by
/// tests/reference/compare_live_large.sh below the switch.
template <class Index, class Alloc, class Generator>
void randperm_forward(std::vector<Index, Alloc>& r, std::size_t n, Generator& gen) {
  r.resize(n);
  std::iota(r.begin(), r.end(), Index{0});
  if (n < 2) return;
  auto swap_step = [&](std::size_t i, std::size_t z) { std::swap(r[i], r[i + z]); };
  auto target = [&](std::size_t k, std::size_t z) { return r.data() + k + z; };
  if (n <= 0xffffffffu) {
    // n - k fits in 32 bits: a 32-bit modulo, same result, faster.
    const auto n32 = static_cast<std::uint32_t>(n);
    shuffle_with_lookahead<64>(
        n - 1,
        [&](std::size_t k) {
          return std::size_t{static_cast<std::uint32_t>(gen()) % (n32 - static_cast<std::uint32_t>(k))};
        },
        target, swap_step);
  } else {
    shuffle_with_lookahead<64>(
        n - 1,
        [&](std::size_t k) {
          return static_cast<std::size_t>(std::uint64_t{static_cast<std::uint32_t>(gen())} % (n - k));
        },
        target, swap_step);
  }
}

/// "Inside-out" Fisher–Yates with one 64-bit draw per element, as PyTorch 2.6+'s
/// randperm_cpu from randperm_inside_out_from on:
///   for i in [0, n): z = random64() % (i+1); r[i] = r[z]; r[z] = i
/// random64() = (first 32-bit draw << 32) | second draw (CPUGeneratorImpl::random64
/// in aten/src/ATen/CPUGeneratorImpl.cpp); i = 0 draws too. Debian 12's PyTorch
/// is 1.13, so unit tests check it against a Python model of the source
/// (tests/reference/randperm_model.py); tests/reference/compare_live_large.sh
/// checks it against a PyTorch 2.6 or later where one is installed (scripts/dev/gpu-check
/// runs it with the GPU machine's, up to n = 250,000,000: docs/gpu.md).
template <class Index, class Alloc, class Generator>
void randperm_inside_out(std::vector<Index, Alloc>& r, std::size_t n, Generator& gen) {
  r.assign(n, Index{0}); // every entry is written before it is read; r[0] = 0 stands for i = 0
  shuffle_with_lookahead<32>(
      n,
      [&](std::size_t k) {
        const std::uint64_t hi = static_cast<std::uint32_t>(gen());
        const std::uint64_t x = (hi << 32) | static_cast<std::uint32_t>(gen());
        return static_cast<std::size_t>(x % (std::uint64_t{k} + 1));
      },
      [&](std::size_t, std::size_t z) { return r.data() + z; },
      [&](std::size_t i, std::size_t z) {
        r[i] = r[z];
        r[z] = static_cast<Index>(i);
      });
}

/// PyTorch's torch.randperm(n, generator) on the CPU, with the generator seeded
/// by `seed`: MT19937 (detail::mt19937, which gives std::mt19937's numbers), seeded with the
/// low 32 bits of the seed, then one of the two shuffles above (which cast each draw to 32
/// bits, since a Generator's result_type may be wider). Index must hold n - 1 (32 bits are
/// enough below 2^32: half the memory).
template <class Index, class Alloc>
void randperm(std::vector<Index, Alloc>& r, std::size_t n, std::uint64_t seed,
              torch_randperm version = torch_randperm::since_2_6) {
  mt19937 gen(static_cast<std::uint32_t>(seed));
  if (version == torch_randperm::since_2_6 && n >= randperm_inside_out_from)
    randperm_inside_out(r, n, gen);
  else
    randperm_forward(r, n, gen);
}

/// Rank r's share of a global order, PyTorch style: the order padded with its
/// own head (repeated as needed) or truncated to total_size, then every
/// num_replicas-th element starting at rank (from c.start on, for a resumed
/// epoch). `order(j)` gives element j < n.
template <class Order>
void strided_share(const sampler_context& c, std::vector<std::int64_t>& out, Order&& order) {
  out.resize(c.num_samples);
  for (std::size_t k = 0; k < c.num_samples; ++k) {
    std::size_t j = c.start + static_cast<std::size_t>(c.rank) + k * static_cast<std::size_t>(c.num_replicas);
    if (j >= c.n) j %= c.n; // only when padding: repeats the head
    out[k] = static_cast<std::int64_t>(order(j));
  }
}

/// Whether a sampling policy declares `interleaved = true` (a missing member is false).
template <class P> constexpr bool interleaved_policy() {
  if constexpr (requires { P::interleaved; })
    return static_cast<bool>(P::interleaved);
  else
    return false;
}

} // namespace detail

namespace sampling {

/// PyTorch's DistributedSampler(shuffle=True): a fresh permutation per
/// (seed + epoch), interleaved over ranks.
struct shuffled {
  /// Rank r takes global positions r, r + R, ...: after every rank has taken m, the job has
  /// consumed the first m·R, so a position is one number (distributed_sampler::set_position).
  static constexpr bool interleaved = true;
  DDP_INLINE static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out);
};

/// PyTorch's DistributedSampler(shuffle=False): 0..n-1 interleaved over ranks.
struct sequential {
  static constexpr bool interleaved = true;
  DDP_INLINE static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out);
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
      detail::randperm(perm, static_cast<std::size_t>(c.num_replicas), c.seed + c.epoch);
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
      detail::throw_error(error_kind::config,
                          {"distributed_sampler: num_replicas=", num_replicas, " must be at least 1"});
    if (rank < 0 || rank >= num_replicas)
      detail::throw_error(error_kind::config, {"distributed_sampler: rank=", rank,
                                               " must be in [0, num_replicas=", num_replicas, ")"});
    ctx_.n = n;
    ctx_.num_replicas = num_replicas;
    ctx_.rank = rank;
    ctx_.seed = o.seed;
    ctx_.drop_last = o.drop_last;
    ctx_.randperm = o.randperm;
    whole_epoch();
  }

  /// From a process group (anything with rank() and size()).
  template <class Group>
  requires requires(const Group& g) {
    { g.rank() } -> std::convertible_to<int>;
    { g.size() } -> std::convertible_to<int>;
  }
  distributed_sampler(std::size_t n, const Group& group, sampler_options o = {})
      : distributed_sampler(n, group.size(), group.rank(), o) {}

  /// Like PyTorch: call before each epoch so every epoch is shuffled differently. A new
  /// epoch starts whole (position 0).
  void set_epoch(std::uint64_t epoch) {
    if (epoch != ctx_.epoch) {
      ctx_.epoch = epoch;
      if (ctx_.start != 0) whole_epoch();
      valid_ = false;
    }
  }
  std::uint64_t epoch() const noexcept { return ctx_.epoch; }

  /// Resumes the current epoch after `consumed` samples of its global order, counted over the
  /// whole job (training_progress::samples), whatever world size consumed them: this rank's
  /// indices become its share of the rest — global positions consumed + rank + k·num_replicas
  /// — so the rest is split among this job's ranks and, with the part already consumed, every
  /// sample of the epoch is visited exactly once. The rest is not padded: shares differ by at
  /// most one (size() is this rank's; ranks with one fewer batch call join(), or use
  /// drop_last batches). With drop_last, the rest is cut to a multiple of num_replicas.
  /// Only for interleaved policies (shuffled, sequential): after every rank of a job has taken
  /// m indices, the job has consumed the first m·R positions. set_position(0) is the whole,
  /// PyTorch-identical epoch again.
  /// The end of an epoch: without drop_last a whole epoch pads to ceil(n/R)·R positions, more
  /// than n, so any position >= n is an empty rest (size() 0 on every rank), not an error. With
  /// drop_last a whole epoch ends at floor(n/R)·R, which at another world size would reopen the
  /// dropped tail: a checkpoint taken at the end of an epoch must record the next epoch at
  /// position 0 (epoch + 1, samples 0), as docs/checkpoints.md's loop does.
  /// (A member template so that explicitly instantiating a sampler of another policy compiles.)
  template <class P = Policy> void set_position(std::uint64_t consumed) {
    static_assert(detail::interleaved_policy<P>(),
                  "ddp: set_position needs an interleaved sampling policy (shuffled, sequential): in "
                  "another, a count of consumed samples does not say which were consumed");
    const auto r = static_cast<std::size_t>(ctx_.num_replicas);
    if (consumed == 0) {
      whole_epoch();
    } else {
      ctx_.start = consumed >= ctx_.n ? ctx_.n : static_cast<std::size_t>(consumed);
      std::size_t rest = ctx_.n - ctx_.start;
      if (ctx_.drop_last) rest = rest / r * r;
      const auto rank = static_cast<std::size_t>(ctx_.rank);
      ctx_.num_samples = rest > rank ? (rest - rank + r - 1) / r : 0;
      ctx_.total_size = rest;
    }
    valid_ = false;
  }
  /// The global position the current epoch resumed at (0: a whole epoch).
  std::uint64_t position() const noexcept { return ctx_.start; }

  /// Indices this rank visits per epoch (PyTorch's len(sampler)); in a resumed epoch, this
  /// rank's share of the rest.
  std::size_t size() const noexcept { return ctx_.num_samples; }
  std::size_t total_size() const noexcept { return ctx_.total_size; }
  const sampler_context& context() const noexcept { return ctx_; }

  /// This rank's indices for the current epoch; computed once per epoch.
  std::span<const std::int64_t> indices() const {
    if (!valid_) {
      Policy::rank_indices(ctx_, cache_);
      if (cache_.size() != ctx_.num_samples)
        detail::throw_error(error_kind::config,
                            {"sampling policy produced ", cache_.size(), " indices for rank ", ctx_.rank,
                             ", expected ", ctx_.num_samples});
      valid_ = true;
    }
    return cache_;
  }

  auto begin() const { return indices().begin(); }
  auto end() const { return indices().end(); }

private:
  /// PyTorch's sizes: every rank num_samples, padded or cut to total_size.
  void whole_epoch() {
    const auto r = static_cast<std::size_t>(ctx_.num_replicas);
    ctx_.start = 0;
    ctx_.num_samples = ctx_.drop_last ? ctx_.n / r : (ctx_.n + r - 1) / r;
    ctx_.total_size = ctx_.num_samples * r;
    valid_ = false;
  }

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
    if (batch_size == 0) detail::throw_error(error_kind::config, {"batches: batch_size must be at least 1"});
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

  /// Number of batches this range yields (those of the epoch from first() on).
  std::size_t size() const { return epoch_batches() - first_; }
  /// Number of batches in the whole epoch.
  std::size_t epoch_batches() const {
    return drop_last_ ? all_.size() / batch_ : (all_.size() + batch_ - 1) / batch_;
  }
  /// Index within the epoch of the first batch this range yields.
  std::size_t first() const { return first_; }
  iterator begin() const { return {all_, batch_, first_ * batch_}; }
  iterator end() const { return {all_, batch_, epoch_batches() * batch_}; }

  /// The same epoch's batches from batch `first` on: resuming mid-epoch, the
  /// sampler's position is (epoch, batches done), and the batches that follow
  /// are exactly those an uninterrupted epoch would have seen.
  batch_range from(std::size_t first) const {
    if (first > epoch_batches())
      detail::throw_error(error_kind::config,
                          {"batches: cannot start at batch ", first, " of an epoch of ", epoch_batches(),
                           " batches (was the position saved with another batch size, "
                           "data set size or world size?)"});
    batch_range r = *this;
    r.first_ = first;
    return r;
  }

private:
  std::span<const std::int64_t> all_;
  std::size_t batch_;
  bool drop_last_;
  std::size_t first_ = 0;
};

template <sampling_policy Policy>
batch_range batches(const distributed_sampler<Policy>& s, std::size_t batch_size, bool drop_last = false) {
  return batch_range(s.indices(), batch_size, drop_last);
}

// Separately compiled, ddp's own policies' samplers are compiled once, in the
// runtime (detail/common/linkage.hpp).
#if defined(DDP_SEPARATE_COMPILATION)
#if defined(DDP_IMPLEMENTATION)
#define DDP_DETAIL_SAMPLER_INSTANCE template
#else
#define DDP_DETAIL_SAMPLER_INSTANCE extern template
#endif
DDP_DETAIL_SAMPLER_INSTANCE struct sampling::basic_contiguous<false>;
DDP_DETAIL_SAMPLER_INSTANCE struct sampling::basic_contiguous<true>;
DDP_DETAIL_SAMPLER_INSTANCE class distributed_sampler<sampling::shuffled>;
DDP_DETAIL_SAMPLER_INSTANCE class distributed_sampler<sampling::sequential>;
DDP_DETAIL_SAMPLER_INSTANCE class distributed_sampler<sampling::contiguous>;
DDP_DETAIL_SAMPLER_INSTANCE class distributed_sampler<sampling::contiguous_shuffled_blocks>;
#undef DDP_DETAIL_SAMPLER_INSTANCE
#endif

DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/sampler-inl.hpp>
#endif

#endif // DDP_SAMPLER_HPP
