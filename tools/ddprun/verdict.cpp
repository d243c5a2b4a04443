#include "verdict.hpp"

#include <ddp/detail/common/env.hpp>

#include <string_view>

namespace ddprun {

std::string decide_verdict(const std::optional<std::pair<int, int>>& stop, const generations& g,
                           const std::map<int, rank_end>& ends, int nproc) {
  if (stop)
    return std::to_string(128 + stop->second) + " node " + std::to_string(stop->first) +
           "'s ddprun got signal " + std::to_string(stop->second) + " from the user, which stops every node";
  for (int r : g.members()) {
    auto at = ends.find(r);
    if (at == ends.end())
      return "1 rank " + std::to_string(r) + " of generation " + std::to_string(g.latest()) +
             " was on node " + std::to_string(r / nproc) + ", which was lost";
    if (at->second.code != 0)
      return std::to_string(at->second.code) + " rank " + std::to_string(r) + " of generation " +
             std::to_string(g.latest()) + " " + at->second.what;
  }
  const auto n = g.members().size();
  return "0 every rank of generation " + std::to_string(g.latest()) + " (" + std::to_string(n) +
         (n == 1 ? " rank" : " ranks") + ") finished well";
}

int verdict_code(const std::string& verdict) {
  auto code = ddp::detail::parse_int(std::string_view(verdict).substr(0, verdict.find(' ')));
  return code && *code >= 0 && *code < 256 ? static_cast<int>(*code) : 1;
}

} // namespace ddprun
