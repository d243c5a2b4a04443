// ddp::elastic — in-process recovery: ranks that survive a lost peer go on in
// their own processes. The training loop commits its state (the model's
// parameters and buffers, a held ddp::optim optimizer's state, and where
// training stands) to memory every few steps; ddp::elastic::run runs the
// loop, and when a peer is lost it meets the survivors on the launcher's
// store, forms a process group of them (ranks renumbered densely), restores
// the last commit on every one (rank 0's, broadcast) and calls the loop again
// from there. Needs ddprun
// --in-process-recovery. Design, waits and figures: docs/elastic.md, "In-process recovery".
#ifndef DDP_ELASTIC_HPP
#define DDP_ELASTIC_HPP

#include <ddp/backend/gloo.hpp>
#include <ddp/checkpoint.hpp>
#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>
#include <ddp/detail/elastic/joiners.hpp>
#include <ddp/detail/elastic/meeting.hpp>
#include <ddp/error.hpp>
#include <ddp/process_group.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
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
  /// A joiner (a process ddprun --in-process-recovery --max-restarts started in a dead rank's
  /// slot) waits this long to be admitted at a commit of the running ranks; past it, it
  /// withdraws and run() throws ddp::error (timeout). It stops waiting at once when the job ends.
  std::chrono::milliseconds join_wait{std::chrono::minutes(10)};
  /// The step of the loop's last commit (its total steps), when the loop knows it; 0: not known.
  /// No joiner is admitted at a commit of this step or later: a generation formed there would
  /// run no step. Joiners still waiting then end with the job (run() returns false in them).
  /// 0: no such step. A value at or below the first commit's step admits no joiner at all.
  /// It must be the same on every rank (the admission is skipped without a collective): derive
  /// it from what every rank shares (the global sample count, the epochs), not a rank's shard.
  std::uint64_t last_step = 0;
};

template <class Model> class state;
template <class Model, class Loop>
[[nodiscard]] bool run(state<Model>& st, Loop&& loop, const options& o = {});

/// The training state that survives a lost peer: `model`'s parameters and buffers (held by
/// reference; host memory), the progress, and the state of a ddp::optim optimizer handed to
/// hold(), copied to memory at each commit. The optimizer's shards are gathered whole at each
/// commit, so any survivor holds all of it (docs/elastic.md, "What in-process recovery keeps").
template <class Model> class state {
public:
  explicit state(Model& model) : model_(model) {}

  /// Hands this generation's ddp::optim optimizer (built on a sharded_data_parallel of this
  /// state's model) to the state: its moments and step count become the last commit's, cut
  /// into this generation's shards, and every later commit holds them. Call it in each
  /// generation, after building the optimizer and before its first step (an optimizer that
  /// has stepped is refused: its moments would be overwritten); the optimizer must outlive
  /// the generation's commits (run() forgets it when it returns).
  template <detail::sharded_optimizer Optimizer> void hold(Optimizer& opt) {
    const std::string what = detail::message({"ddp::elastic::state::hold(", Optimizer::name(), ")"});
    auto refuse = [&](const std::string& why) {
      detail::throw_error(error_kind::config, {"rank ", rank_, ": ", what, ": ", why}, rank_);
    };
    if (static_cast<const void*>(&opt.model().module()) != static_cast<const void*>(&model_))
      refuse("the optimizer steps another model than the state's: hand the state the optimizer of its "
             "own model");
    if (opt.steps() != 0)
      refuse(detail::message(
          {"the optimizer has taken ", opt.steps(),
           " steps: hand it to the state once per generation, right after building it, before its first "
           "step (its state would be overwritten with the commit's)"}));
    for (const auto& p : detail::collect_parameters(model_))
      if (p.type != dtype::f32 && p.type != dtype::f64)
        refuse(detail::message({"parameter '", p.name, "' is ", to_string(p.type),
                                "; commits hold optimizer state of float32 and float64 parameters only"}));
    auto& c = latest_.optimizer;
    if (!c.optimizer.empty()) {
      if (c.optimizer != Optimizer::name() || c.slots != opt.state().slots())
        refuse(detail::message({"the commit of step ", latest_.at.step, " holds the state of ", c.optimizer,
                                " (", c.slots, " values per element), but this generation's optimizer is ",
                                Optimizer::name(), " (", opt.state().slots(),
                                "): build the same optimizer in every generation"}));
      std::vector<detail::tensor_slot> slots;
      detail::restore_optimizer(opt, c, detail::match_model(model_, c, what, rank_, slots));
    } else if (latest_.valid && latest_.at.step > 0) {
      detail::throw_error(
          error_kind::config,
          {"rank ", rank_, ": ", what, ": the commit of step ", latest_.at.step,
           " holds no optimizer state, so the optimizer would start afresh mid-training: hand "
           "it to the state in every generation, before the first commit"},
          rank_);
    }
    gather_ = [&opt](detail::checkpoint_contents& into) { detail::gather_optimizer_state(opt, into); };
  }

  /// Copies the model, the held optimizer's state and `at` to memory: the point the survivors
  /// go back to. Call it on every rank at the same step, after the optimizer's step (memory: the
  /// last two commits, each a copy of the model and, with an optimizer, of its whole state, one
  /// copy of the parameters per state slot, gathered by a collective over its shard group:
  /// docs/elastic.md). A commit
  /// without an optimizer after one that held one is refused: the moments would restart silently.
  void commit(const training_progress& at) {
    detail::checkpoint_contents optimizer;
    if (gather_) { // first: a peer lost in the gather leaves the last commit whole
      // Names, types and counts only: the values are snapshot::bytes.
      optimizer = detail::checkpoint_of_model(model_, rank_, /*copy_values=*/false);
      gather_(optimizer);
    } else if (!latest_.optimizer.optimizer.empty()) {
      detail::throw_error(error_kind::config,
                          {"rank ", rank_, ": ddp::elastic::state::commit(step ", at.step,
                           "): the commit of step ", latest_.at.step, " held ", latest_.optimizer.optimizer,
                           "'s state, and no optimizer is held now (this generation handed none to the "
                           "state, or run() has returned): call state.hold(optimizer) after building it in "
                           "every generation, or its moments restart silently"},
                          rank_);
    }
    commit_model(at);
    latest_.optimizer = std::move(optimizer);
    if (admit_) admit_(at); // may end the generation here: Note [Admission by claim]
  }

  /// The progress of the last commit (what a generation starts from).
  const training_progress& committed() const noexcept { return latest_.at; }
  /// 0 for the job's start, then one more per recovery.
  std::uint64_t generation() const noexcept { return generation_; }

private:
  // restore is run's step, not the user's: a call of its own would renumber the generation.
  template <class M, class Loop> friend bool run(state<M>&, Loop&&, const options&);

  /// What run() does at the start of each generation: puts every rank of `pg` at the same
  /// commit. The survivors agree on the oldest latest commit among them (a rank may have
  /// committed once more before the loss reached it), load theirs, and take rank 0's
  /// copy. Generation 0 commits rank 0's model as step 0. A joiner (`joining`) holds no commit
  /// and takes no part in the choice: it receives rank 0's, and rank 0 is always a survivor.
  void restore(process_group<gloo>& pg, std::uint64_t generation, bool joining = false) {
    generation_ = generation;
    rank_ = pg.rank();
    gather_ = nullptr; // the last generation's optimizer is gone with its loop
    constexpr auto none = std::numeric_limits<std::int64_t>::max();
    std::vector<std::int64_t> step{joining         ? none
                                   : latest_.valid ? static_cast<std::int64_t>(latest_.at.step)
                                                   : -1};
    std::vector<std::int64_t> lo = step;
    pg.all_reduce(lo, op::min);
    if (lo[0] == none)
      detail::throw_error(error_kind::mismatch,
                          {"rank ", pg.rank(), ": ddp::elastic: generation ", generation,
                           " holds joiners only: no survivor holds a commit to send them"},
                          pg.rank());
    if (lo[0] >= 0 && !joining) {
      auto* pick = latest_.valid && static_cast<std::int64_t>(latest_.at.step) == lo[0]       ? &latest_
                   : previous_.valid && static_cast<std::int64_t>(previous_.at.step) == lo[0] ? &previous_
                                                                                              : nullptr;
      if (pick == nullptr)
        detail::throw_error(error_kind::mismatch,
                            {"rank ", pg.rank(), ": ddp::elastic: no commit of step ", lo[0],
                             " here (the last is step ", step[0],
                             "): commit on every rank at the same steps"},
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
    // A copy, not a move: a peer lost during these broadcasts is one more recovery, which
    // must find this commit's optimizer state still here (the model went above).
    auto optimizer = broadcast_optimizer(pg, latest_.optimizer);
    commit_model({static_cast<std::uint64_t>(at[0]), static_cast<std::uint64_t>(at[1]),
                  static_cast<std::uint64_t>(at[2])});
    latest_.optimizer = std::move(optimizer);
  }

  /// The loop's optimizer ends with the loop: a later commit must not reach it; nor run()'s look
  /// for joiners, which refers to run()'s locals.
  void forget_optimizer() noexcept {
    gather_ = nullptr;
    admit_ = nullptr;
  }

  struct snapshot {
    training_progress at{};
    std::vector<std::byte> bytes;
    detail::checkpoint_contents optimizer; ///< empty without a held optimizer
    bool valid = false;
  };

  void commit_model(const training_progress& at) {
    std::swap(previous_, latest_); // the older buffer is reused
    latest_.at = at;
    latest_.valid = true;
    std::size_t total = 0; // reserved first: growing by doubling would hold two copies at once
    for_each_tensor([&](std::byte*, std::size_t n) { total += n; });
    latest_.bytes.clear();
    latest_.bytes.reserve(total);
    for_each_tensor(
        [&](std::byte* p, std::size_t n) { latest_.bytes.insert(latest_.bytes.end(), p, p + n); });
  }

  /// Rank 0's optimizer state of the commit, on every rank: its name, step count and state
  /// arrays only (the model's values are broadcast on their own). Every rank's model has rank
  /// 0's names, types and counts, so the others build the records from their own.
  detail::checkpoint_contents broadcast_optimizer(process_group<gloo>& pg, detail::checkpoint_contents c) {
    std::vector<std::int64_t> head{static_cast<std::int64_t>(c.optimizer.size()),
                                   static_cast<std::int64_t>(c.optimizer_steps),
                                   static_cast<std::int64_t>(c.slots)};
    pg.broadcast(head, 0);
    if (head[0] == 0) return {};
    std::vector<std::uint8_t> name(c.optimizer.begin(), c.optimizer.end());
    name.resize(static_cast<std::size_t>(head[0]));
    pg.broadcast(name, 0);
    if (pg.rank() != 0) {
      c = detail::checkpoint_of_model(model_, pg.rank(), /*copy_values=*/false);
      c.optimizer.assign(name.begin(), name.end());
      c.optimizer_steps = static_cast<std::uint64_t>(head[1]);
      c.slots = static_cast<std::uint32_t>(head[2]);
      for (auto& t : c.tensors)
        if (t.role == detail::checkpoint_role::parameter)
          t.state.assign(c.slots, std::vector<std::byte>(t.count * size_of(t.type)));
    }
    for (auto& t : c.tensors)
      for (auto& slot : t.state)
        if (!slot.empty())
          pg.broadcast(std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(slot.data()), slot.size()), 0);
    return c;
  }

  /// f(bytes, count) for each parameter and buffer, walked again each time (storage may move).
  template <class F> void for_each_tensor(F&& f) {
    parameters_ = detail::collect_parameters(model_);
    buffers_ = detail::collect_buffers(model_);
    for (auto* slots : {&parameters_, &buffers_})
      for (auto& s : *slots) {
        if (s.on_device)
          detail::throw_error(error_kind::config, {"ddp::elastic: '", s.name,
                                                   "' lives in device memory; in-process recovery holds host "
                                                   "tensors (commit a host copy of the model)"});
        f(static_cast<std::byte*>(s.value), s.count * size_of(s.type));
      }
  }

  void load(const std::vector<std::byte>& bytes, int rank) {
    std::size_t at = 0;
    for_each_tensor([&](std::byte* p, std::size_t n) {
      if (at + n > bytes.size())
        detail::throw_error(
            error_kind::mismatch,
            {"rank ", rank,
             ": ddp::elastic: the model grew since its last commit (its tensors hold more bytes "
             "than the commit): keep the model's shapes fixed while training"},
            rank);
      std::memcpy(p, bytes.data() + at, n);
      at += n;
    });
  }

  Model& model_;
  snapshot latest_, previous_;
  std::vector<detail::tensor_slot> parameters_, buffers_;
  std::function<void(detail::checkpoint_contents&)> gather_; ///< the held optimizer's, or empty
  std::function<void(const training_progress&)> admit_;      ///< run()'s look for joiners, or empty
  int rank_ = 0;
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
///
/// Joiners (ddprun --in-process-recovery --max-restarts N starts one in a dead rank's slot):
/// at each commit the group's rank 0 admits the joiners waiting, tells every rank which, and the
/// generation ends there on every rank; the next one holds the survivors and the joiners, who
/// receive the commit from its rank 0 (docs/elastic.md, "Joiners"). Joins count against no
/// bound. In a joiner, run() waits for its admission first (options::join_wait).
/// Returns true once the loop has returned; false in a joiner the job ended without (it never
/// ran the loop: its model is not the job's, so code after run() that saves or reports the model
/// must not run: hence [[nodiscard]]).
/// A joiner's admission throws ddp::error out of run() too: peer_lost when the joiner is
/// withdrawn while the job runs (its agent took it for dead, and the claim says so), timeout when
/// no commit admits it within options::join_wait or when the meeting it was admitted to closed
/// without it. Let the program exit non-zero on them: ddprun then counts a failed joiner (and may
/// start another in the slot), not a rank that finished.
template <class Model, class Loop> [[nodiscard]] bool run(state<Model>& st, Loop&& loop, const options& o) {
  static_assert(std::invocable<Loop&, process_group<gloo>&, const training_progress&>,
                "ddp::elastic::run: the loop must be callable as loop(ddp::process_group<ddp::gloo>& pg, "
                "const ddp::training_progress& from): pg is this generation's group, from the commit it "
                "starts at");
  struct forget_on_exit {
    state<Model>& st;
    ~forget_on_exit() { st.forget_optimizer(); }
  } forget{st};
  long (*files)(const ddp::topology&) = nullptr;
  if constexpr (open_files_communicator<gloo::communicator>)
    files = [](const ddp::topology& t) { return static_cast<long>(gloo::communicator::open_files(t)); };
  const bool enabled = detail::in_process_recovery_enabled();
  if (enabled && o.init.init_method != "env://")
    detail::throw_error(error_kind::config,
                        {"ddp::elastic::run: init_method '", o.init.init_method,
                         "' under ddprun --in-process-recovery: the survivors meet on the launcher's store, "
                         "so generation 0 must use it too: leave options::init.init_method at env://"});
  const auto job = ddp::topology::from_env();
  const std::string token =
      o.init.token.empty() ? detail::getenv_str("DDP_TOKEN").value_or("") : o.init.token;
  std::unique_ptr<tcp_store> joins; // where joiners register, are admitted, learn the job's end
  const auto joiner = enabled ? detail::joiner_identity() : std::nullopt;
  std::chrono::milliseconds timeout = o.init.timeout.count() > 0 ? o.init.timeout : detail::default_timeout();
  if (enabled && (joiner || detail::joiners_possible()))
    joins = std::make_unique<tcp_store>(detail::joiners_store_options(job, timeout, token));
  std::unique_ptr<process_group<gloo>> pg;
  std::uint64_t admitted_to = 0; // a joiner's generation (1 or more), until it has met it
  if (joiner) {
    const auto a = detail::wait_for_admission(joins, {*joiner, job.rank, job.node_rank}, o.join_wait);
    if (!a) {
      detail::log_line("joiner " + *joiner,
                       detail::message({"the job ended before admitting this joiner (job rank ", job.rank,
                                        "): it withdrew and takes no part (ddprun --in-process-recovery)"}));
      return false;
    }
    admitted_to = *a;
  } else {
    pg = std::make_unique<process_group<gloo>>(detail::make_rendezvous(o.init, files));
    timeout = pg->timeout();
  }
  const int job_rank = job.rank;
  std::uint64_t generation = 0;
  // Where this rank stands in the last generation decided (its rank there, its job node): a loss
  // while the next one meets, or forms its mesh, is one in that generation.
  detail::elastic_survivor me{pg ? pg->rank() : 0, job.node_rank};
  int size = pg ? pg->size() : 0;
  bool joining = admitted_to > 0;             // until its first restore: it holds no commit
  detail::joiner_registry seen;               // what this rank, as a group's rank 0, read of the registry
  std::vector<std::int64_t> member_job_ranks; // of generation `members_of`, for rank 0's admissions
  auto members_of = std::numeric_limits<std::uint64_t>::max();
  if (joins && detail::joiners_possible())
    st.admit_ = [&](const training_progress& at) {
      if (o.last_step > 0 && at.step >= o.last_step) return; // the same on every rank: no broadcast
      if (members_of != generation) { // every rank runs this at the same commit: all gather
        const std::vector<std::int64_t> mine{job_rank};
        member_job_ranks.assign(static_cast<std::size_t>(pg->size()), 0);
        pg->all_gather(mine, member_job_ranks);
        members_of = generation;
      }
      std::string ids;
      if (pg->rank() == 0)
        for (const auto& e : detail::admit_waiting_joiners(*joins, generation + 1, seen, member_job_ranks))
          ids += (ids.empty() ? "" : " ") + e.id;
      std::vector<std::int64_t> n{static_cast<std::int64_t>(ids.size())};
      pg->broadcast(n, 0); // every rank runs it at the same commit: all agree
      if (n[0] == 0) return;
      std::vector<std::uint8_t> bytes(ids.begin(), ids.end());
      bytes.resize(static_cast<std::size_t>(n[0]));
      pg->broadcast(bytes, 0);
      throw detail::joiners_admitted{std::string(bytes.begin(), bytes.end())};
    };
  for (int recoveries = 0;;) {
    try {
      // Note [A loss while recovering]: the meeting and the new mesh run inside the try, so a
      // peer lost while the next generation forms is one more recovery, from the generation
      // that was decided (`me`, `size`), not the end of the job.
      if (!pg) {
        auto g = admitted_to > 0
                     ? detail::meet_as_joiner(job, *joiner, admitted_to, o.last_call, timeout, token)
                     : detail::meet_survivors(job, me, size, generation + 1, o.last_call, timeout, token);
        generation = admitted_to > 0 ? admitted_to : generation + 1;
        admitted_to = 0;
        me = g.members[static_cast<std::size_t>(g.rv.topo.rank)];
        me.old_rank = g.rv.topo.rank;
        size = g.rv.topo.world_size;
        detail::wait_for_members(g);
        pg = std::make_unique<process_group<gloo>>(std::move(g.rv));
      }
      st.restore(*pg, generation, joining);
      joining = false;
      const training_progress from = st.committed(); // a copy: the loop's commits move committed()
      if constexpr (std::invocable<Loop&, process_group<gloo>&, const training_progress&>) loop(*pg, from);
      if (joins) detail::end_job_for_joiners(*joins, job_rank); // waiting joiners withdraw
      return true;
    } catch (const detail::joiners_admitted& a) {
      detail::log_line(detail::message({"rank ", job_rank}),
                       detail::message({"generation ", generation, " admitted joiner(s) ", a.ids,
                                        " at the commit of step ", st.committed().step,
                                        "; meeting them in generation ", generation + 1}));
      pg.reset();
    } catch (const error& e) {
      if (e.kind() != error_kind::peer_lost || recoveries >= o.max_recoveries) throw;
      ++recoveries;
      if (!enabled) {
        detail::log_line(detail::message({"rank ", job_rank}),
                         "ddp::elastic::run: a peer was lost, and this job was not started with ddprun "
                         "--in-process-recovery (DDP_IN_PROCESS_RECOVERY=1, the store in the launcher): "
                         "the error ends this rank");
        throw;
      }
      detail::log_line(detail::message({"rank ", job_rank}),
                       detail::message({"generation ", generation, " lost a peer (", e.message(),
                                        "); meeting the survivors to go on from the commit of step ",
                                        st.committed().step}));
      pg.reset(); // already failed: its connections close
    }
  }
}

} // namespace elastic
DDP_END_NAMESPACE

#endif // DDP_ELASTIC_HPP
