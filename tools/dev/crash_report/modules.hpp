// tools/crash_report: which loaded file holds an address, where it is loaded, and its GNU build
// ID, found without taking the loader's lock (see crash_report.cpp).
#ifndef DDP_CRASH_REPORT_MODULES_HPP
#define DDP_CRASH_REPORT_MODULES_HPP

#include "line.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ddp_crash_report {

using find_object_fn = int (*)(void*, dl_find_object*);
inline find_object_fn find_object = nullptr; // glibc >= 2.35 (looked up at load: older ones lack it)
inline char exe_path[4096];                  // the main program's file (its link map's name is "")
inline std::uintptr_t own_bias = 0;          // this library's: its frames (the handler) are not shown
inline bool own_bias_known = false;

// The end of a loaded file's last segment, from its program headers (mapped at `start`); 0 when
// they do not look like a loader's. For the dladdr fallback, which gives no extent.
inline std::uintptr_t loaded_end(std::uintptr_t start, std::uintptr_t bias) {
  if (start == 0) return 0;
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(start);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr))) return 0;
  std::uintptr_t end = 0;
  for (std::size_t i = 0; i < eh->e_phnum; ++i) {
    const auto* p = reinterpret_cast<const ElfW(Phdr)*>(start + eh->e_phoff + i * sizeof(ElfW(Phdr)));
    if (p->p_type == PT_LOAD && bias + p->p_vaddr + p->p_memsz > end) end = bias + p->p_vaddr + p->p_memsz;
  }
  return end;
}

// The loaded file that holds an address.
struct module {
  bool found = false;
  const char* path = "?";
  std::uintptr_t bias = 0;      // the link map's l_addr: address - bias = ELF virtual address
  std::uintptr_t map_start = 0; // its mapped extent, where known (build ID lookup)
  std::uintptr_t map_end = 0;
};

inline module module_of(std::uintptr_t addr) {
  module m;
  link_map* map = nullptr;
  if (find_object != nullptr) {
    dl_find_object found{};
    if (find_object(reinterpret_cast<void*>(addr), &found) != 0) return m;
    map = found.dlfo_link_map;
    m.map_start = reinterpret_cast<std::uintptr_t>(found.dlfo_map_start);
    m.map_end = reinterpret_cast<std::uintptr_t>(found.dlfo_map_end);
  } else {
    Dl_info info{};
    void* extra = nullptr;
    if (::dladdr1(reinterpret_cast<void*>(addr), &info, &extra, RTLD_DL_LINKMAP) == 0) return m;
    map = static_cast<link_map*>(extra);
    m.map_start = reinterpret_cast<std::uintptr_t>(info.dli_fbase); // where its ELF header is mapped
    if (map != nullptr) m.map_end = loaded_end(m.map_start, static_cast<std::uintptr_t>(map->l_addr));
  }
  if (map == nullptr) return m;
  m.found = true;
  m.bias = static_cast<std::uintptr_t>(map->l_addr);
  if (map->l_name != nullptr && map->l_name[0] != '\0')
    m.path = map->l_name;
  else if (exe_path[0] != '\0')
    m.path = exe_path;
  return m;
}

inline std::uintptr_t align4(std::uintptr_t v) { return (v + 3) & ~std::uintptr_t{3}; }

// Appends the module's GNU build ID (its PT_NOTE, read in memory, bounds checked against the
// mapping) to `out`; false when it has none or its headers are not where a loader puts them.
inline bool append_build_id(const module& m, line& out) {
  const std::uintptr_t start = m.map_start, end = m.map_end;
  if (start == 0 || end <= start || end - start < sizeof(ElfW(Ehdr))) return false;
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(start);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr))) return false;
  const std::uintptr_t ph = start + eh->e_phoff;
  if (eh->e_phoff > end - start || eh->e_phnum * sizeof(ElfW(Phdr)) > end - ph) return false;
  for (std::size_t i = 0; i < eh->e_phnum; ++i) {
    const auto* p = reinterpret_cast<const ElfW(Phdr)*>(ph + i * sizeof(ElfW(Phdr)));
    if (p->p_type != PT_NOTE) continue;
    std::uintptr_t n = m.bias + p->p_vaddr;
    const std::uintptr_t notes_end = n + p->p_memsz;
    if (n < start || notes_end > end || notes_end < n) continue;
    while (notes_end - n >= sizeof(ElfW(Nhdr))) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(n);
      const std::uintptr_t name = n + sizeof(ElfW(Nhdr));
      const std::uintptr_t desc = align4(name + nh->n_namesz);
      const std::uintptr_t next = align4(desc + nh->n_descsz);
      if (next > notes_end || next <= n) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
          std::memcmp(reinterpret_cast<const void*>(name), "GNU", 4) == 0) {
        for (std::size_t b = 0; b < nh->n_descsz; ++b)
          out.hex_byte(reinterpret_cast<const unsigned char*>(desc)[b]);
        return true;
      }
      n = next;
    }
  }
  return false;
}

} // namespace ddp_crash_report

#endif // DDP_CRASH_REPORT_MODULES_HPP
