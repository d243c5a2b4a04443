// The definitions behind model_layout.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void check_unique_names(const std::vector<tensor_slot>& slots, const char* what) {
  std::unordered_set<std::string> seen;
  for (auto& s : slots)
    if (!seen.insert(s.name).second)
      detail::throw_error(error_kind::config, {"two ", what, " are named '", s.name,
                                               "': names identify them across ranks, make them unique"});
}

DDP_INLINE std::string describe(const std::vector<tensor_slot>& params,
                                const std::vector<tensor_slot>& buffers) {
  std::string d;
  for (auto* list : {&params, &buffers}) {
    d += list == &params ? "P\n" : "B\n";
    for (auto& s : *list)
      detail::append_message(d, {s.name, "|", to_string(s.type), "|", s.count, "\n"});
  }
  return d;
}

DDP_INLINE std::string describe_settings(std::string_view settings) {
  return settings.empty() ? std::string() : "S\n" + std::string(settings);
}

DDP_INLINE described_layout parse_description(const std::string& d) {
  described_layout out;
  std::vector<std::string>* section = &out.params;
  std::size_t start = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i] == '\n') {
      std::string line = d.substr(start, i - start);
      start = i + 1;
      if (line == "P")
        section = &out.params;
      else if (line == "B")
        section = &out.buffers;
      else if (line == "S")
        section = &out.settings;
      else
        section->push_back(std::move(line));
    }
  return out;
}

DDP_INLINE std::string pretty_entry(const std::string& line) {
  auto a = line.find('|'), b = line.rfind('|');
  if (a == std::string::npos || a == b) return detail::message({"'", line, "'"});
  return detail::message(
      {"'", line.substr(0, a), "' ", line.substr(a + 1, b - a - 1), " x ", line.substr(b + 1)});
}

DDP_INLINE std::string first_difference(const std::string& d0, const std::string& dr, int r) {
  const auto a = parse_description(d0), b = parse_description(dr);
  const std::string rank = detail::message({"rank ", r});
  for (const bool buffers : {false, true}) {
    const auto& x = buffers ? a.buffers : a.params;
    const auto& y = buffers ? b.buffers : b.params;
    const std::string kind = buffers ? "buffer" : "parameter";
    const std::string counts =
        detail::message({" (rank 0 has ", x.size(), " ", kind, "s, ", rank, " has ", y.size(), ")"});
    for (std::size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
      const std::string where = detail::message({kind, " #", i});
      if (i >= x.size())
        return detail::message(
            {rank, " has an extra ", where, " ", pretty_entry(y[i]), " that rank 0 does not have", counts});
      if (i >= y.size())
        return detail::message({rank, " lacks ", where, " ", pretty_entry(x[i]), " that rank 0 has", counts});
      if (x[i] != y[i])
        return detail::message(
            {where, " differs: rank 0 has ", pretty_entry(x[i]), ", ", rank, " has ", pretty_entry(y[i])});
    }
  }
  return {};
}

DDP_INLINE std::string first_setting_difference(const std::string& d0, const std::string& dr, int r) {
  const auto a = parse_description(d0).settings, b = parse_description(dr).settings;
  auto value = [](const std::vector<std::string>& lines, const std::string& name) {
    for (auto& l : lines)
      if (l.compare(0, name.size() + 1, name + "=") == 0) return l.substr(name.size() + 1);
    return std::string("unset");
  };
  for (const auto* side : {&a, &b})
    for (auto& line : *side) {
      const std::string name = line.substr(0, line.find('='));
      const std::string v0 = value(a, name), vr = value(b, name);
      if (v0 != vr)
        return detail::message(
            {"ddp_options::", name, " differs: rank ", r, " has it ", vr, " and rank 0 ", v0});
    }
  return {};
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_INL_HPP
