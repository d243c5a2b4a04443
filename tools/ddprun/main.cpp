// ddprun — starts N local ranks of a ddp (or torchrun-style) program, like torchrun.
//
//   ddprun --nproc-per-node 4 ./train --epochs 3
//   ddprun --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500 --nproc-per-node 8 ./train
//   ddprun --nnodes 2:4 --max-restarts 3 [--node-rank 0 on the store's host] --master-addr node0 ./train
//   ddprun --in-process-recovery --nnodes 2 --node-rank 0 --master-addr node0 --nproc-per-node 8 ./train
//
// Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK,
// MASTER_ADDR, MASTER_PORT, DDP_TOKEN, DDP_STORE_IN_LAUNCHER=1 and DDP_RESTART_ROUND.
// Output lines are prefixed with "[rank] ".
//
// One concept per file:
//   options              the command line and DDP_TOKEN
//   launcher_store       the rendezvous store, served by node 0's ddprun
//   local_ports          the ports the job's connections take, against the node's range
//   rank_environment     the variables a rank starts with
//   rank_processes       the ranks as processes: start, look at, signal
//   output_prefix        the ranks' output, "[rank] " in front of each line
//   signals              SIGINT, SIGTERM and SIGQUIT sent to ddprun, forwarded to the ranks
//   round                one round: watch the ranks until all have exited, stop them on a failure
//   first_failure        which rank failed first (the exit code), failure_notes (what ranks say)
//   restarts             --max-restarts, and how the nodes agree on each round
//   elastic_rounds       --nnodes MIN:MAX: rounds whose size follows the nodes present
//   elastic_rendezvous   how the agents meet in a round, and who is in it
//   elastic_wait         the agents' waits between rounds, each with a deadline
//   agent_heartbeat      agents' liveness, as the store's host sees it
//   recovery_job         --in-process-recovery across nodes: the job's end, a user's stop
//   generations          the generations every node's agent follows in the store
//   joiner_slots         --max-restarts under --in-process-recovery: the joiners in dead ranks' slots
//   node_rejoin          a lost node's agent started again: whether it may rejoin
//   crash_report_library where --crash-report finds libddp_crash_report.so
//
// --crash-report preloads libddp_crash_report.so (tools/dev/crash_report.cpp) into every rank: a
// rank that dies of a fatal signal prints its frames before ddprun names the signal.
#include "launcher_store.hpp"
#include "local_ports.hpp"
#include "options.hpp"
#include "restarts.hpp"
#include "signals.hpp"

int main(int argc, char** argv) {
  ddprun::job j;
  if (auto code = ddprun::parse_command_line(argc, argv, j)) return *code;
  if (auto code = ddprun::check_local_ports(j)) return *code;
  if (auto code = ddprun::start_store(j)) return *code;
  if (!ddprun::catch_user_signals()) return 1;
  return ddprun::run_rounds(j);
}
