// ddp::hybrid_groups — the two groups of hybrid sharding (FSDP's HSDP, ZeRO++'s
// hpZ): a shard group, within which sharded_data_parallel cuts the optimizer's
// state and gathers the parameters (a node: its shared memory or fast links),
// and a replicate group, across which each shard's gradient is averaged (the
// ranks that hold the same shard on the other nodes). make_hybrid_groups(pg)
// builds them from the topology; any two groups that tile the world do.
#ifndef DDP_HYBRID_GROUPS_HPP
#define DDP_HYBRID_GROUPS_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/op.hpp>
#include <ddp/process_group.hpp>

#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE

template <class Backend> struct hybrid_groups {
  process_group<Backend> shard;     ///< this rank's shard group (its node), numbered by local rank
  process_group<Backend> replicate; ///< this rank's place in every shard group, numbered by node
};

/// Collective over `pg`: shard = the ranks of this rank's node (pg.topology()'s
/// node_rank), replicate = the ranks with this rank's local rank on every node.
/// Every node must hold as many ranks of `pg` (else ddp::error(config) on every
/// rank, naming the counts). On one node the replicate groups have one rank
/// each: that is flat sharding, with the node's group in place of pg.
template <class Backend> hybrid_groups<Backend> make_hybrid_groups(process_group<Backend>& pg) {
  const auto& t = pg.topology();
  std::vector<std::int64_t> lo{t.local_world_size}, hi{t.local_world_size};
  pg.all_reduce(lo, op::min);
  pg.all_reduce(hi, op::max);
  if (lo[0] != hi[0])
    detail::throw_error(error_kind::config,
                        {"make_hybrid_groups on rank ", pg.rank(), ": the nodes hold ", lo[0], " to ", hi[0],
                         " ranks of the group; hybrid sharding needs as many on each (launch the same "
                         "--nproc-per-node on every node, or pass a shard size: make_hybrid_groups(pg, n))"},
                        pg.rank());
  return hybrid_groups<Backend>{pg.split(t.node_rank, t.local_rank), pg.split(t.local_rank, t.node_rank)};
}

/// Collective over `pg`: shard groups of `shard_size` consecutive ranks
/// (0..n-1, n..2n-1, ...), replicate groups of the ranks with the same place in
/// theirs. `shard_size` must divide pg.size() (ddp::error(config) otherwise).
template <class Backend>
hybrid_groups<Backend> make_hybrid_groups(process_group<Backend>& pg, int shard_size) {
  if (shard_size < 1 || pg.size() % shard_size != 0)
    detail::throw_error(error_kind::config,
                        {"make_hybrid_groups on rank ", pg.rank(), ": a shard size of ", shard_size,
                         " does not divide the group's ", pg.size(),
                         " ranks: pass a divisor of the world size (the ranks per node, usually)"},
                        pg.rank());
  const int r = pg.rank();
  return hybrid_groups<Backend>{pg.split(r / shard_size, r % shard_size),
                                pg.split(r % shard_size, r / shard_size)};
}

DDP_END_NAMESPACE

#endif // DDP_HYBRID_GROUPS_HPP
