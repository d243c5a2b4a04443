// ddp::save_checkpoint / ddp::load_checkpoint — a job's training state in one file that a job
// of any world size loads: the model's parameters and buffers, a ddp::optim optimizer's state
// (gathered whole from the ranks' shards, cut again into the loading job's shards), the step
// and the sampler's position (epoch, samples of it the whole job has consumed). Rank 0 writes
// the file atomically and seals it with SHA-256; rank 0 reads and checks it and broadcasts it,
// so only rank 0's node needs the file. Format and choices: docs/checkpoints.md.
#ifndef DDP_CHECKPOINT_HPP
#define DDP_CHECKPOINT_HPP

#include <ddp/detail/checkpoint/file.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>
#include <ddp/error.hpp>
#include <ddp/op.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

DDP_BEGIN_NAMESPACE

/// Where training stands, saved beside the tensors.
struct training_progress {
  std::uint64_t step = 0;    ///< optimizer steps done
  std::uint64_t epoch = 0;   ///< the epoch under way
  std::uint64_t samples = 0; ///< samples of that epoch consumed by the whole job (all ranks together)
};

struct checkpoint_options {
  /// save: the file replaced becomes `path.prev`.
  bool keep_previous = true;
  /// load: when `path` is refused (missing, truncated, damaged, foreign), load `path.prev`
  /// instead, and say so on rank 0's stderr; without it, the refusal is the error.
  bool fall_back_to_previous = true;
};

namespace detail {

/// A type that ddp::optim's optimizers are: its sharded state, restorable for any world size.
template <class O>
concept sharded_optimizer = requires(O& o, const O& c) {
  {O::name()};
  o.state();
  o.model();
  { c.steps() } -> std::convertible_to<std::uint64_t>;
  o.set_steps(std::uint64_t{});
};

/// The optimizer must step `dp` itself: its shards index dp's parameters, and those of another
/// model would be read and written out of bounds.
template <class Parallel, class Optimizer>
void check_optimizer_of(const Parallel& dp, Optimizer& opt, const std::string& call, int rank) {
  const void* mine = &dp;
  const void* its = &opt.model();
  if (mine != its)
    detail::throw_error(
        error_kind::config,
        {"rank ", rank, ": ", call, ": the optimizer (", Optimizer::name(),
         ") was built on another data-parallel object than the one passed: pass the model's own "
         "optimizer (ddp::optim::",
         Optimizer::name(), "(dp, ...) with this dp)"},
        rank);
}

/// A shard's range inside its parameter's record, checked (an internal error, never a write
/// past the end).
inline void check_shard_range(std::size_t offset, std::size_t count, std::size_t parameter_count,
                              const std::string& name) {
  if (offset > parameter_count || count > parameter_count - offset)
    detail::throw_error(error_kind::mismatch,
                        {"checkpoint: a shard of '", name, "' (elements ", offset, "..", offset + count,
                         ") runs past its ", parameter_count, " elements"});
}

/// The checkpoint's records of the model's parameters and buffers (no optimizer state); without
/// `copy_values`, their names, types and counts only (what gathering and restoring an
/// optimizer's state needs).
template <class Model> checkpoint_contents checkpoint_of_model(Model& m, int rank, bool copy_values = true) {
  checkpoint_contents c;
  auto add = [&](const std::vector<tensor_slot>& slots, checkpoint_role role) {
    for (auto& s : slots) {
      if (s.on_device)
        detail::throw_error(
            error_kind::config,
            {"rank ", rank, ": checkpoint: '", s.name,
             "' lives in device memory; checkpoints hold host tensors for now (copy the model "
             "to the host to save it)"},
            rank);
      checkpoint_tensor t{role, s.name, s.type, s.count, {}, {}};
      const auto* p = static_cast<const std::byte*>(s.value);
      if (s.count > 0 && copy_values) t.values.assign(p, p + s.count * size_of(s.type));
      c.tensors.push_back(std::move(t));
    }
  };
  add(collect_parameters(m), checkpoint_role::parameter);
  add(collect_buffers(m), checkpoint_role::buffer);
  return c;
}

/// The optimizer's whole state, per parameter: every rank fills the bit patterns of the elements
/// it owns into zeros, and an integer sum over the ranks completes it. Each element has one
/// owner, so the sum is that owner's bits exactly, whatever the value (-0.0, a denormal under
/// FTZ/DAZ, a signalling NaN) and whatever the world size and bucketing: a float sum would
/// change those. Optimizer state is float32 or float64; any other dtype is refused.
template <class Optimizer> void gather_optimizer_state(Optimizer& opt, checkpoint_contents& c) {
  auto& sharded = opt.model();
  auto& st = opt.state();
  const std::size_t slots = st.slots();
  c.optimizer = Optimizer::name();
  c.optimizer_steps = opt.steps();
  c.slots = static_cast<std::uint32_t>(slots);
  // Parameters in registration order come first among the tensors; their offsets in one
  // flat array per dtype.
  std::vector<std::size_t> offset(c.tensors.size(), 0);
  std::size_t n32 = 0, n64 = 0;
  for (std::size_t p = 0; p < c.tensors.size() && c.tensors[p].role == checkpoint_role::parameter; ++p) {
    const auto& t = c.tensors[p];
    if (t.type != dtype::f32 && t.type != dtype::f64) {
      const int rank = sharded.group().rank();
      detail::throw_error(error_kind::config,
                          {"rank ", rank, ": ", Optimizer::name(), "'s state of parameter '", t.name, "' (",
                           to_string(t.type),
                           ") cannot be gathered: optimizer state is kept for float32 and float64 parameters "
                           "only; keep such a parameter out of the optimizer or make it float32"},
                          rank);
    }
    auto& n = t.type == dtype::f32 ? n32 : n64;
    offset[p] = n;
    n += t.count;
  }
  std::vector<std::int32_t> bits32(slots * n32, 0);
  std::vector<std::int64_t> bits64(slots * n64, 0);
  sharded.for_each_shard([&](auto& r) {
    using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
    static_assert(sizeof(float) == sizeof(std::int32_t) && sizeof(double) == sizeof(std::int64_t));
    auto& flat = [&]() -> auto& {
      if constexpr (std::is_same_v<T, float>)
        return bits32;
      else
        return bits64;
    }
    ();
    const std::size_t total = std::is_same_v<T, float> ? n32 : n64;
    if (r.parameter >= c.tensors.size() || c.tensors[r.parameter].role != checkpoint_role::parameter)
      detail::throw_error(error_kind::mismatch, {"checkpoint: a shard names parameter ", r.parameter,
                                                 ", which the model does not have"});
    check_shard_range(r.offset, r.value.size(), c.tensors[r.parameter].count, c.tensors[r.parameter].name);
    for (std::size_t k = 0; k < slots && !r.value.empty(); ++k) {
      const T* src = st.template at<T>(k, r.bucket, r.state_offset);
      std::memcpy(flat.data() + k * total + offset[r.parameter] + r.offset, src, r.value.size() * sizeof(T));
    }
  });
  // Over the shard group: under hybrid sharding each replica holds the same
  // shards, and one copy of each element makes the whole.
  auto& shard_group = sharded.shard_group();
  if (!bits32.empty()) shard_group.all_reduce(bits32, op::sum);
  if (!bits64.empty()) shard_group.all_reduce(bits64, op::sum);
  for (std::size_t p = 0; p < c.tensors.size() && c.tensors[p].role == checkpoint_role::parameter; ++p) {
    auto& t = c.tensors[p];
    const bool single = t.type == dtype::f32;
    const std::size_t total = single ? n32 : n64, bytes = t.count * size_of(t.type);
    for (std::size_t k = 0; k < slots; ++k) {
      const auto* src = single ? reinterpret_cast<const std::byte*>(bits32.data() + k * total + offset[p])
                               : reinterpret_cast<const std::byte*>(bits64.data() + k * total + offset[p]);
      t.state.emplace_back(src, src + bytes);
    }
  }
}

/// Rank 0's outcome, broadcast: every rank fails alike, with rank 0's message.
template <class Group> void agree_on_rank0(Group& pg, const std::string& failure, const std::string& what) {
  std::vector<std::int64_t> status{failure.empty() ? 0 : 1, static_cast<std::int64_t>(failure.size())};
  pg.broadcast(status, 0);
  if (status[0] == 0) return;
  std::vector<std::uint8_t> text(failure.begin(), failure.end());
  text.resize(static_cast<std::size_t>(status[1]));
  pg.broadcast(text, 0);
  if (pg.rank() == 0) detail::throw_error(error_kind::data, {"rank 0: ", failure}, 0);
  detail::throw_error(
      error_kind::data,
      {"rank ", pg.rank(), ": ", what, " failed on rank 0: ", std::string(text.begin(), text.end())}, 0);
}

template <class Parallel, class Optimizer>
void save_checkpoint(const std::string& path, Parallel& dp, Optimizer* opt, const training_progress& p,
                     const checkpoint_options& o) {
  auto& pg = dp.group();
  // Every rank must mean the same step: a rank a step behind would save another state.
  std::vector<std::int64_t> lo{static_cast<std::int64_t>(p.step)}, hi = lo;
  pg.all_reduce(lo, op::min);
  pg.all_reduce(hi, op::max);
  if (lo[0] != hi[0])
    detail::throw_error(error_kind::mismatch,
                        {"rank ", pg.rank(), ": save_checkpoint(", path, ") called at steps ", lo[0], " to ",
                         hi[0], " on different ranks: call it at the same step on every rank"},
                        pg.rank());
  if constexpr (!std::is_same_v<Optimizer, void>)
    check_optimizer_of(dp, *opt, detail::message({"save_checkpoint(", path, ")"}), pg.rank());
  auto c = checkpoint_of_model(dp.module(), pg.rank());
  if constexpr (!std::is_same_v<Optimizer, void>) gather_optimizer_state(*opt, c);
  c.step = p.step;
  c.epoch = p.epoch;
  c.samples = p.samples;
  c.saved_world_size = static_cast<std::uint32_t>(pg.size());
  std::string failure;
  if (pg.rank() == 0) {
    try {
      write_checkpoint_file(path, encode_checkpoint(c), o.keep_previous);
    } catch (const std::exception& e) { failure = e.what(); }
  }
  agree_on_rank0(pg, failure, detail::message({"save_checkpoint(", path, ")"}));
}

/// Rank 0's bytes of `path` (or of `path.prev`), checked, on every rank.
template <class Group>
checkpoint_contents read_on_rank0(Group& pg, const std::string& path, const checkpoint_options& o) {
  std::vector<std::uint8_t> bytes;
  std::string failure;
  checkpoint_contents c;
  if (pg.rank() == 0) {
    // Whatever fails here (bad_alloc too) is relayed: the other ranks wait in the broadcast.
    try {
      bytes = read_checkpoint_file(path);
      c = decode_checkpoint(bytes, path);
    } catch (const checkpoint_unreadable& e) {
      failure = e.what(); // whole, of another format: an older checkpoint is no answer
    } catch (const error& first) {
      failure = first.what();
      if (o.fall_back_to_previous) {
        const std::string prev = path + ".prev";
        try {
          bytes = read_checkpoint_file(prev);
          c = decode_checkpoint(bytes, prev);
          log_line("rank 0", detail::message({first.what(), "; loading the previous checkpoint, ", prev,
                                              " (step ", c.step, "), instead"}));
          failure.clear();
        } catch (const std::exception& second) {
          failure += "; and the previous one: " + std::string(second.what());
        }
      }
    } catch (const std::exception& e) {
      failure = detail::message({"checkpoint ", path, " cannot be loaded: ", e.what()});
    }
  }
  agree_on_rank0(pg, failure, detail::message({"load_checkpoint(", path, ")"}));
  std::vector<std::int64_t> size{static_cast<std::int64_t>(bytes.size())};
  pg.broadcast(size, 0);
  bytes.resize(static_cast<std::size_t>(size[0]));
  pg.broadcast(bytes, 0);
  if (pg.rank() != 0) c = decode_checkpoint(bytes, path);
  return c;
}

/// The records that match the model's tensors, checked by name, role, dtype and size.
template <class Model>
std::vector<const checkpoint_tensor*> match_model(Model& m, const checkpoint_contents& c,
                                                  const std::string& path, int rank,
                                                  std::vector<tensor_slot>& slots) {
  slots = collect_parameters(m);
  const std::size_t nparams = slots.size();
  for (auto& b : collect_buffers(m))
    slots.push_back(b);
  std::map<std::string, const checkpoint_tensor*> by_name[2];
  for (auto& t : c.tensors)
    by_name[static_cast<int>(t.role)][t.name] = &t;
  std::vector<const checkpoint_tensor*> out;
  auto what = [](checkpoint_role r) { return r == checkpoint_role::parameter ? "parameter" : "buffer"; };
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const auto role = i < nparams ? checkpoint_role::parameter : checkpoint_role::buffer;
    auto& s = slots[i];
    auto& names = by_name[static_cast<int>(role)];
    auto it = names.find(s.name);
    if (it == names.end())
      detail::throw_error(error_kind::mismatch,
                          {"rank ", rank, ": checkpoint ", path, " has no ", what(role), " '", s.name,
                           "': it was saved from another model; load it into the model that saved it"},
                          rank);
    const auto& t = *it->second;
    if (t.type != s.type || t.count != s.count)
      detail::throw_error(error_kind::mismatch,
                          {"rank ", rank, ": ", what(role), " '", s.name, "' is ", s.count, " × ",
                           to_string(s.type), " here but ", t.count, " × ", to_string(t.type),
                           " in checkpoint ", path, ": load it into the model that saved it"},
                          rank);
    if (s.on_device)
      detail::throw_error(error_kind::config,
                          {"rank ", rank, ": checkpoint: '", s.name,
                           "' lives in device memory; checkpoints load host tensors for now"},
                          rank);
    names.erase(it);
    out.push_back(&t);
  }
  for (int r = 0; r < 2; ++r)
    if (!by_name[r].empty())
      detail::throw_error(error_kind::mismatch,
                          {"rank ", rank, ": checkpoint ", path, " holds ",
                           what(static_cast<checkpoint_role>(r)), " '", by_name[r].begin()->first,
                           "', which this model lacks: load it into the model that saved it"},
                          rank);
  return out;
}

/// Whether `c` holds state for this optimizer; checked before anything is changed.
template <class Optimizer>
void check_optimizer(Optimizer& opt, const checkpoint_contents& c, const std::string& path) {
  const auto slots = opt.state().slots();
  const int rank = opt.model().group().rank();
  if (c.optimizer != Optimizer::name() || c.slots != slots)
    detail::throw_error(
        error_kind::config,
        {"rank ", rank, ": checkpoint ", path, " holds ",
         (c.optimizer.empty()
              ? std::string("no optimizer state")
              : detail::message({"the state of ", c.optimizer, " (", c.slots, " values per element)"})),
         ", but this job's optimizer is ", Optimizer::name(), " (", slots,
         "): build the optimizer the job saved (for sgd, with momentum if it had one), or load "
         "without one"},
        rank);
}

/// Each rank copies the elements it owns, in this job's shards, from the whole arrays.
template <class Optimizer>
void restore_optimizer(Optimizer& opt, const checkpoint_contents& c,
                       const std::vector<const checkpoint_tensor*>& rec) {
  auto& st = opt.state();
  opt.model().for_each_shard([&](auto& r) {
    using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
    const auto& t = *rec.at(r.parameter);
    check_shard_range(r.offset, r.value.size(), t.count, t.name);
    for (std::size_t k = 0; k < st.slots() && !r.value.empty(); ++k)
      std::memcpy(st.template at<T>(k, r.bucket, r.state_offset),
                  reinterpret_cast<const T*>(t.state[k].data()) + r.offset, r.value.size() * sizeof(T));
  });
  opt.set_steps(c.optimizer_steps);
}

template <class Parallel, class Optimizer>
training_progress load_checkpoint(const std::string& path, Parallel& dp, Optimizer* opt,
                                  const checkpoint_options& o) {
  auto& pg = dp.group();
  if constexpr (!std::is_same_v<Optimizer, void>)
    check_optimizer_of(dp, *opt, detail::message({"load_checkpoint(", path, ")"}), pg.rank());
  const auto c = read_on_rank0(pg, path, o);
  std::vector<tensor_slot> slots;
  const auto rec = match_model(dp.module(), c, path, pg.rank(), slots);
  if constexpr (!std::is_same_v<Optimizer, void>) check_optimizer(*opt, c, path);
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (!rec[i]->values.empty()) std::memcpy(slots[i].value, rec[i]->values.data(), rec[i]->values.size());
  if constexpr (!std::is_same_v<Optimizer, void>) restore_optimizer(*opt, c, rec);
  return {c.step, c.epoch, c.samples};
}

} // namespace detail

/// Collective (every rank calls it at the same step): rank 0 writes `path` with the model's
/// parameters and buffers (rank 0's: they are every rank's after a step) and `progress`. The
/// file is the old one or the whole new one whatever happens (temporary file, fsync,
/// rename); with keep_previous the old one stays as `path.prev`. A failure on rank 0 is a
/// ddp::error (data) on every rank, with rank 0's message.
template <class Parallel>
void save_checkpoint(const std::string& path, Parallel& dp, const training_progress& progress,
                     const checkpoint_options& o = {}) {
  detail::save_checkpoint<Parallel, void>(path, dp, nullptr, progress, o);
}

/// The same, with a ddp::optim optimizer's state: each rank's shard is gathered into whole
/// per-parameter arrays (a sum over the ranks of the size of the state), so that a job of
/// another world size can cut its own shards from them.
template <class Parallel, detail::sharded_optimizer Optimizer>
void save_checkpoint(const std::string& path, Parallel& dp, Optimizer& opt, const training_progress& progress,
                     const checkpoint_options& o = {}) {
  detail::save_checkpoint(path, dp, &opt, progress, o);
}

/// Collective, at any world size: rank 0 reads and checks `path` (or `path.prev`, see
/// checkpoint_options) and broadcasts it; every rank sets its parameters and buffers.
/// Returns the saved progress. A missing, truncated, damaged or foreign file, or one of
/// another model, is a ddp::error naming the file and what is wrong, on every rank, and
/// changes nothing.
template <class Parallel>
training_progress load_checkpoint(const std::string& path, Parallel& dp, const checkpoint_options& o = {}) {
  return detail::load_checkpoint<Parallel, void>(path, dp, nullptr, o);
}

/// The same, restoring the optimizer's state (cut into this job's shards) and step count.
template <class Parallel, detail::sharded_optimizer Optimizer>
training_progress load_checkpoint(const std::string& path, Parallel& dp, Optimizer& opt,
                                  const checkpoint_options& o = {}) {
  return detail::load_checkpoint(path, dp, &opt, o);
}

DDP_END_NAMESPACE

#endif // DDP_CHECKPOINT_HPP
