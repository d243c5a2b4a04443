// ddp::elastic — in-process recovery: ranks that survive a lost peer go on in
// their own processes. The training loop commits its state (the model's
// parameters and buffers, and where training stands) to memory every few
// steps; ddp::elastic::run runs the loop, and when a peer is lost it meets
// the survivors on the launcher's store, forms a process group of them (ranks
// renumbered densely), restores the last commit on every one (rank 0's,
// broadcast) and calls the loop again from there. Needs ddprun
// --in-process-recovery. Design, waits and figures: docs/elastic.md, "In-process recovery".
#ifndef DDP_ELASTIC_HPP
#define DDP_ELASTIC_HPP

#include <ddp/backend/gloo.hpp>
#include <ddp/checkpoint.hpp>
#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>
#include <ddp/detail/elastic/meeting.hpp>
#include <ddp/error.hpp>
#include <ddp/process_group.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace elastic {

struct options {
  /// How long the first survivor to meet waits for the others when the store saw no rank lost
  /// (a peer vanished without closing its connections); a rank alive but busy while the store saw
  /// another lost is waited for up to the group's timeout. One that takes longer is left out.
  std::chrono::milliseconds last_call{5000};
  /// Recoveries after which the next lost peer ends the job (its error goes out of run).
  int max_recoveries = 8;
  /// Generation 0's process group (init_process_group's options); its timeout serves every generation.
  init_options init{};
};

/// The training state that survives a lost peer: `model`'s parameters and buffers (held by
/// reference; host memory) and the progress, copied to memory at each commit. Replicated state
/// only: a sharded optimizer's shards die with their rank, so ddp::optim is not held here
/// (docs/elastic.md, "What in-process recovery keeps").
template <class Model> class state {
public:
  explicit state(Model& model) : model_(model) {}

  /// Copies the model and `at` to memory: the point the survivors go back to. Call it on every
  /// rank at the same step, after the optimizer's step (memory: two copies, the last two commits).
  void commit(const training_progress& at) {
    std::swap(previous_, latest_); // the older buffer is reused
    latest_.at = at;
    latest_.valid = true;
    latest_.bytes.clear();
    for_each_tensor(
        [&](std::byte* p, std::size_t n) { latest_.bytes.insert(latest_.bytes.end(), p, p + n); });
  }

  /// The progress of the last commit (what a generation starts from).
  const training_progress& committed() const noexcept { return latest_.at; }
  /// 0 for the job's start, then one more per recovery.
  std::uint64_t generation() const noexcept { return generation_; }

private:
  // restore is run's step, not the user's: a call of its own would renumber the generation.
  template <class M, class Loop> friend void run(state<M>&, Loop&&, const options&);

  /// What run() does at the start of each generation: puts every rank of `pg` at the same
  /// commit. The survivors agree on the oldest latest commit among them (a rank may have
  /// committed once more before the loss reached it), load theirs, and take rank 0's
  /// copy. Generation 0 commits rank 0's model as step 0.
  void restore(process_group<gloo>& pg, std::uint64_t generation) {
    generation_ = generation;
    std::vector<std::int64_t> step{latest_.valid ? static_cast<std::int64_t>(latest_.at.step) : -1};
    std::vector<std::int64_t> lo = step;
    pg.all_reduce(lo, op::min);
    if (lo[0] >= 0) {
      auto* pick = latest_.valid && static_cast<std::int64_t>(latest_.at.step) == lo[0]       ? &latest_
                   : previous_.valid && static_cast<std::int64_t>(previous_.at.step) == lo[0] ? &previous_
                                                                                              : nullptr;
      if (pick == nullptr)
        throw error(error_kind::mismatch,
                    "rank " + std::to_string(pg.rank()) + ": ddp::elastic: no commit of step " +
                        std::to_string(lo[0]) + " here (the last is step " + std::to_string(step[0]) +
                        "): commit on every rank at the same steps",
                    pg.rank());
      if (pick != &latest_) latest_ = std::move(*pick);
      load(latest_.bytes, pg.rank());
    }
    previous_ = {};
    for_each_tensor([&](std::byte* p, std::size_t n) {
      if (n > 0) pg.broadcast(std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(p), n), 0);
    });
    std::vector<std::int64_t> at{static_cast<std::int64_t>(latest_.at.step),
                                 static_cast<std::int64_t>(latest_.at.epoch),
                                 static_cast<std::int64_t>(latest_.at.samples)};
    pg.broadcast(at, 0);
    commit({static_cast<std::uint64_t>(at[0]), static_cast<std::uint64_t>(at[1]),
            static_cast<std::uint64_t>(at[2])});
  }

  struct snapshot {
    training_progress at{};
    std::vector<std::byte> bytes;
    bool valid = false;
  };

  /// f(bytes, count) for each parameter and buffer, walked again each time (storage may move).
  template <class F> void for_each_tensor(F&& f) {
    parameters_ = detail::collect_parameters(model_);
    buffers_ = detail::collect_buffers(model_);
    for (auto* slots : {&parameters_, &buffers_})
      for (auto& s : *slots) {
        if (s.on_device)
          throw error(error_kind::config, "ddp::elastic: '" + s.name +
                                              "' lives in device memory; in-process recovery holds host "
                                              "tensors (commit a host copy of the model)");
        f(static_cast<std::byte*>(s.value), s.count * size_of(s.type));
      }
  }

  void load(const std::vector<std::byte>& bytes, int rank) {
    std::size_t at = 0;
    for_each_tensor([&](std::byte* p, std::size_t n) {
      if (at + n > bytes.size())
        throw error(error_kind::mismatch,
                    "rank " + std::to_string(rank) +
                        ": ddp::elastic: the model grew since its last commit (its tensors hold more bytes "
                        "than the commit): keep the model's shapes fixed while training",
                    rank);
      std::memcpy(p, bytes.data() + at, n);
      at += n;
    });
  }

  Model& model_;
  snapshot latest_, previous_;
  std::vector<detail::tensor_slot> parameters_, buffers_;
  std::uint64_t generation_ = 0;
};

/// Runs `loop(pg, from)` (pg: this generation's process_group<gloo>; from: the progress of the
/// commit every rank now holds) until it returns. Under ddprun --in-process-recovery, a
/// ddp::error of kind peer_lost out of the loop (a rank died, or its group was aborted)
/// destroys the failed group, meets the survivors in the next generation, restores the last
/// commit and calls the loop again; any other error, or one past max_recoveries, goes out. The
/// loop builds what holds the group (distributed_data_parallel, its sampler for
/// pg.size()/pg.rank()) inside, and picks up at `from` (global_batches::at(from.step) sets
/// the sampler's epoch and global position).
template <class Model, class Loop> void run(state<Model>& st, Loop&& loop, const options& o = {}) {
  static_assert(std::invocable<Loop&, process_group<gloo>&, const training_progress&>,
                "ddp::elastic::run: the loop must be callable as loop(ddp::process_group<ddp::gloo>& pg, "
                "const ddp::training_progress& from): pg is this generation's group, from the commit it "
                "starts at");
  long (*files)(const ddp::topology&) = nullptr;
  if constexpr (open_files_communicator<gloo::communicator>)
    files = [](const ddp::topology& t) { return static_cast<long>(gloo::communicator::open_files(t)); };
  const bool enabled = detail::in_process_recovery_enabled();
  if (enabled && o.init.init_method != "env://")
    throw error(error_kind::config,
                "ddp::elastic::run: init_method '" + o.init.init_method +
                    "' under ddprun --in-process-recovery: the survivors meet on the launcher's store, "
                    "so generation 0 must use it too: leave options::init.init_method at env://");
  const auto job = ddp::topology::from_env();
  const std::string token =
      o.init.token.empty() ? detail::getenv_str("DDP_TOKEN").value_or("") : o.init.token;
  auto pg = std::make_unique<process_group<gloo>>(detail::make_rendezvous(o.init, files));
  const std::chrono::milliseconds timeout = pg->timeout();
  const int job_rank = pg->rank();
  std::uint64_t generation = 0;
  // Where this rank stands in the last generation decided (its rank there, its job node): a loss
  // while the next one meets, or forms its mesh, is one in that generation.
  detail::elastic_survivor me{pg->rank(), pg->topology().node_rank};
  int size = pg->size();
  for (int recoveries = 0;; ++recoveries) {
    try {
      // Note [A loss while recovering]: the meeting and the new mesh run inside the try, so a
      // peer lost while the next generation forms is one more recovery, from the generation
      // that was decided (`me`, `size`), not the end of the job.
      if (!pg) {
        auto g = detail::meet_survivors(job, me, size, generation + 1, o.last_call, timeout, token);
        ++generation;
        me = g.members[static_cast<std::size_t>(g.rv.topo.rank)];
        me.old_rank = g.rv.topo.rank;
        size = g.rv.topo.world_size;
        detail::wait_for_members(g.rv);
        pg = std::make_unique<process_group<gloo>>(std::move(g.rv));
      }
      st.restore(*pg, generation);
      const training_progress from = st.committed(); // a copy: the loop's commits move committed()
      if constexpr (std::invocable<Loop&, process_group<gloo>&, const training_progress&>) loop(*pg, from);
      return;
    } catch (const error& e) {
      if (e.kind() != error_kind::peer_lost || recoveries >= o.max_recoveries) throw;
      if (!enabled) {
        detail::log_line("rank " + std::to_string(job_rank),
                         "ddp::elastic::run: a peer was lost, and this job was not started with ddprun "
                         "--in-process-recovery (DDP_IN_PROCESS_RECOVERY=1, the store in the launcher): "
                         "the error ends this rank");
        throw;
      }
      detail::log_line("rank " + std::to_string(job_rank),
                       "generation " + std::to_string(generation) + " lost a peer (" +
                           std::string(e.message()) +
                           "); meeting the survivors to go on from the commit of step " +
                           std::to_string(st.committed().step));
      pg.reset(); // already failed: its connections close
    }
  }
}

} // namespace elastic
DDP_END_NAMESPACE

#endif // DDP_ELASTIC_HPP
