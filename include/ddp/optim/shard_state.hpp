// Per-element optimizer state for this rank's shard (Adam's two moments,
// SGD's momentum), one array per bucket in the bucket's dtype, and its
// checkpoint: each rank saves and loads its own file, `<path>.rank<r>`.
#ifndef DDP_OPTIM_SHARD_STATE_HPP
#define DDP_OPTIM_SHARD_STATE_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/op.hpp>
#include <ddp/tensor.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace optim {

class shard_state {
public:
  /// `slots` arrays per bucket, sized as the sharded model's shard of it.
  template <class Sharded>
  shard_state(Sharded& s, std::size_t slots)
      : rank_(s.group().rank()), world_(s.group().size()), data_(slots) {
    for (std::size_t b = 0; b < s.num_buckets(); ++b) {
      types_.push_back(s.bucket_type(b));
      sizes_.push_back(s.shard_size(b));
    }
    for (auto& slot : data_)
      for (std::size_t b = 0; b < types_.size(); ++b)
        slot.emplace_back(sizes_[b] * size_of(types_[b]), std::byte{0});
  }

  /// Slot `k`'s elements for a range of bucket `bucket` starting at `offset`.
  template <class T> T* at(std::size_t k, std::size_t bucket, std::size_t offset) {
    return reinterpret_cast<T*>(data_[k][bucket].data()) + offset;
  }

  template <class T> const T* at(std::size_t k, std::size_t bucket, std::size_t offset) const {
    return reinterpret_cast<const T*>(data_[k][bucket].data()) + offset;
  }

  /// State arrays per element (Adam: 2, SGD: 1 with momentum, else 0).
  std::size_t slots() const noexcept { return data_.size(); }

  std::size_t bytes() const {
    std::size_t n = 0;
    for (auto& slot : data_)
      for (auto& b : slot)
        n += b.size();
    return n;
  }

  /// Writes `<path>.rank<r>` (through a temporary file, renamed when complete).
  void save(const std::string& path, std::uint64_t step, const std::string& kind) const {
    const std::string file = detail::message({path, ".rank", rank_}), tmp = file + ".tmp";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io_error(tmp, "cannot open it for writing");
    std::string head = header(step, kind);
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    for (auto& slot : data_)
      for (auto& b : slot)
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    out.close();
    if (!out) throw io_error(tmp, "could not write it completely");
    if (std::rename(tmp.c_str(), file.c_str()) != 0)
      throw io_error(file, detail::message({"could not rename ", tmp, " to it"}));
  }

  /// Reads `<path>.rank<r>`; the job must have the world size, buckets and
  /// optimizer it was saved with. Returns the saved step count.
  std::uint64_t load(const std::string& path, const std::string& kind) {
    const std::string file = detail::message({path, ".rank", rank_});
    std::ifstream in(file, std::ios::binary);
    if (!in) throw io_error(file, "cannot open it");
    std::string magic(8, '\0');
    std::uint32_t world = 0;
    in.read(magic.data(), 8);
    in.read(reinterpret_cast<char*>(&world), sizeof world);
    if (!in || magic != "DDPOPTV1")
      detail::throw_error(error_kind::data, {"optimizer checkpoint ", file, " is not one ddp::optim wrote"});
    if (world != static_cast<std::uint32_t>(world_))
      detail::throw_error(error_kind::config,
                          {"optimizer checkpoint ", file, " was saved by a job of ", world,
                           " ranks; this job has ", world_,
                           ": each rank's file holds its 1/W of the state, so resume with ", world,
                           " ranks (or start the optimizer afresh)"},
                          rank_);
    std::string rest_expected = header(0, kind).substr(12);
    std::string rest(rest_expected.size(), '\0');
    in.read(rest.data(), static_cast<std::streamsize>(rest.size()));
    std::uint64_t step = 0;
    std::memcpy(&step, rest.data(), sizeof step);
    std::memcpy(rest.data(), rest_expected.data(), sizeof step); // compare all but the step
    if (!in || rest != rest_expected)
      detail::throw_error(error_kind::config,
                          {"optimizer checkpoint ", file,
                           " does not match this job (another optimizer, rank, "
                           "model, bucketing or dtype): load it with the job that saved it"},
                          rank_);
    auto loaded = data_; // read aside: a bad file leaves the state as it was
    for (auto& slot : loaded)
      for (auto& b : slot)
        in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!in || in.peek() != std::char_traits<char>::eof())
      detail::throw_error(error_kind::data, {"optimizer checkpoint ", file, " is truncated or too long"},
                          rank_);
    data_ = std::move(loaded);
    return step;
  }

  /// Every rank must have loaded the same step: files from different saves are refused.
  template <class Group>
  static void require_same_step(Group& group, std::uint64_t step, const std::string& path) {
    std::vector<std::int64_t> lo{static_cast<std::int64_t>(step)}, hi{static_cast<std::int64_t>(step)};
    group.all_reduce(lo, op::min);
    group.all_reduce(hi, op::max);
    if (lo[0] != hi[0])
      detail::throw_error(error_kind::mismatch,
                          {"the ranks loaded optimizer checkpoints of different steps (", lo[0], " to ",
                           hi[0], "): the files ", path,
                           ".rank* come from different saves; load one save's files on every rank"},
                          group.rank());
  }

private:
  /// magic, world, step, rank, optimizer, slots, then each bucket's dtype and size.
  std::string header(std::uint64_t step, const std::string& kind) const {
    std::string h = "DDPOPTV1";
    auto put = [&](auto v) { h.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(static_cast<std::uint32_t>(world_));
    put(step);
    put(static_cast<std::uint32_t>(rank_));
    put(static_cast<std::uint32_t>(kind.size()));
    h += kind;
    put(static_cast<std::uint32_t>(data_.size()));
    put(static_cast<std::uint32_t>(types_.size()));
    for (std::size_t b = 0; b < types_.size(); ++b) {
      put(static_cast<std::uint8_t>(types_[b]));
      put(static_cast<std::uint64_t>(sizes_[b]));
    }
    return h;
  }

  error io_error(const std::string& file, const std::string& what) const {
    return error(
        error_kind::data,
        detail::message({"optimizer checkpoint ", file, ": ", what, " (", std::strerror(errno), ")"}), rank_);
  }

  int rank_, world_;
  std::vector<dtype> types_;
  std::vector<std::size_t> sizes_;
  std::vector<std::vector<std::vector<std::byte>>> data_; ///< [slot][bucket] bytes
};

} // namespace optim
DDP_END_NAMESPACE

#endif // DDP_OPTIM_SHARD_STATE_HPP
