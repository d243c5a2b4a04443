// Expansion of SLURM host lists: "gpu[01-03,07],cpu5" -> gpu01 gpu02 gpu03 gpu07 cpu5.
// Several bracket groups in one name expand as a product: "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2.
#ifndef DDP_DETAIL_TOPOLOGY_NODELIST_HPP
#define DDP_DETAIL_TOPOLOGY_NODELIST_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/message.hpp>

#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

inline error nodelist_error(std::string_view list, std::string_view why) {
  return error(error_kind::config, detail::message({"SLURM node list '", list, "' cannot be parsed: ", why}));
}

/// Expands the inside of one bracket group ("01-03,07") into its tokens,
/// keeping the zero padding of each range's lower bound.
inline std::vector<std::string> expand_bracket(std::string_view body, std::string_view whole) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    std::string_view item = body.substr(start, comma - start);
    if (item.empty()) throw nodelist_error(whole, "empty item inside brackets");
    std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      if (!parse_int(item)) throw nodelist_error(whole, detail::message({"'", item, "' is not a number"}));
      out.emplace_back(item);
    } else {
      std::string_view lo_s = item.substr(0, dash), hi_s = item.substr(dash + 1);
      auto lo = parse_int(lo_s), hi = parse_int(hi_s);
      if (!lo || !hi || *lo < 0 || *hi < *lo)
        throw nodelist_error(whole, detail::message({"bad range '", item, "'"}));
      if (*hi - *lo > 100000) throw nodelist_error(whole, "range too large");
      for (auto v = *lo; v <= *hi; ++v) {
        std::string s = std::to_string(v);
        if (s.size() < lo_s.size()) s.insert(0, lo_s.size() - s.size(), '0');
        out.push_back(std::move(s));
      }
    }
    start = comma + 1;
  }
  return out;
}

/// Expands one host pattern that contains no top-level comma.
inline std::vector<std::string> expand_host(std::string_view pat, std::string_view whole) {
  std::vector<std::string> acc{std::string()};
  std::size_t i = 0;
  while (i < pat.size()) {
    if (pat[i] == '[') {
      std::size_t close = pat.find(']', i);
      if (close == std::string_view::npos) throw nodelist_error(whole, "unbalanced '['");
      auto parts = expand_bracket(pat.substr(i + 1, close - i - 1), whole);
      std::vector<std::string> next;
      next.reserve(acc.size() * parts.size());
      for (const auto& a : acc)
        for (const auto& p : parts)
          next.push_back(a + p);
      acc = std::move(next);
      i = close + 1;
    } else if (pat[i] == ']') {
      throw nodelist_error(whole, "unbalanced ']'");
    } else {
      std::size_t next_br = pat.find_first_of("[]", i);
      if (next_br == std::string_view::npos) next_br = pat.size();
      for (auto& a : acc)
        a.append(pat.substr(i, next_br - i));
      i = next_br;
    }
  }
  return acc;
}

/// All host names of a SLURM node list, in order.
inline std::vector<std::string> expand_nodelist(std::string_view list) {
  std::vector<std::string> hosts;
  if (list.empty()) throw nodelist_error(list, "it is empty");
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (c == '[')
      ++depth;
    else if (c == ']')
      --depth;
    else if (c == ',' && depth == 0) {
      std::string_view pat = list.substr(start, i - start);
      if (pat.empty()) throw nodelist_error(list, "empty host name");
      for (auto& h : expand_host(pat, list))
        hosts.push_back(std::move(h));
      start = i + 1;
    }
    if (depth < 0 || depth > 1) throw nodelist_error(list, "unbalanced or nested brackets");
  }
  if (depth != 0) throw nodelist_error(list, "unbalanced '['");
  return hosts;
}

/// The first host of a node list (the list is validated whole).
inline std::string first_node(std::string_view list) { return expand_nodelist(list).front(); }

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_TOPOLOGY_NODELIST_HPP
