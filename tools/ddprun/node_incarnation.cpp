#include "node_incarnation.hpp"

namespace ddprun {
namespace {

std::string node_key(int node, const std::string& what, int incarnation) {
  return "ddprun/r0/ipr/node/" + std::to_string(node) + "/" + what + "/" + std::to_string(incarnation);
}

} // namespace

node_incarnation current_incarnation(ddp::tcp_store& s, int node, int from) {
  for (int i = from;; ++i) {
    if (!s.check({node_key(node, "gate", i)})) return {i, false};
    if (counted_lost(s, node, i)) return {i, true};
  }
}

bool claim_incarnation(ddp::tcp_store& s, int node, int incarnation) {
  return s.add(node_key(node, "gate", incarnation), 1) == 1;
}

bool counted_lost(ddp::tcp_store& s, int node, int incarnation) {
  return s.try_get(node_key(node, "lost", incarnation)).value_or("") == "1";
}

bool count_incarnation_lost(ddp::tcp_store& s, int node, int incarnation) {
  s.set(node_key(node, "lost", incarnation), "1");
  if (claim_incarnation(s, node, incarnation)) return true;
  s.set(node_key(node, "lost", incarnation), "0"); // the rejoin won: the node is not lost
  return false;
}

std::string ends_record_key(int round, int node, int incarnation) {
  return "ddprun/r" + std::to_string(round) + "/ipr/done/" + std::to_string(node) + "/" +
         std::to_string(incarnation);
}

std::string counted_key(int round, int node, int incarnation) {
  return "ddprun/r" + std::to_string(round) + "/ipr/counted/" + std::to_string(node) + "/" +
         std::to_string(incarnation);
}

} // namespace ddprun
