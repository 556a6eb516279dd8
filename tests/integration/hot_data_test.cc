// The globals every event reads lie together in the preload library (GPUMEM_HOT_DATA,
// core/hot_path.h, laid out by interpose/hot_data.ld): in a framework gpumem's data is cold at each
// event, and each of them on a page of its own was a cache miss (and a TLB miss) per event.
#include <elf.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

struct Elf {
  std::vector<char> bytes;
  const Elf64_Ehdr& header() const { return *reinterpret_cast<const Elf64_Ehdr*>(bytes.data()); }
  const Elf64_Shdr& section(size_t index) const {
    return *reinterpret_cast<const Elf64_Shdr*>(bytes.data() + header().e_shoff +
                                                index * header().e_shentsize);
  }
  const char* SectionName(size_t index) const {
    return bytes.data() + section(header().e_shstrndx).sh_offset + section(index).sh_name;
  }
};

Elf ReadElf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Elf{std::vector<char>(std::istreambuf_iterator<char>(in), {})};
}

// The section index of each data symbol whose (mangled) name contains `name`; -1 where none is.
std::vector<int> SectionsOf(const Elf& elf, const std::vector<std::string>& names) {
  std::vector<int> found(names.size(), -1);
  for (size_t s = 0; s < elf.header().e_shnum; ++s) {
    const Elf64_Shdr& table = elf.section(s);
    if (table.sh_type != SHT_SYMTAB) continue;
    const char* strings = elf.bytes.data() + elf.section(table.sh_link).sh_offset;
    for (size_t i = 0; i < table.sh_size / sizeof(Elf64_Sym); ++i) {
      const auto& symbol = *reinterpret_cast<const Elf64_Sym*>(elf.bytes.data() + table.sh_offset +
                                                               i * sizeof(Elf64_Sym));
      if (ELF64_ST_TYPE(symbol.st_info) != STT_OBJECT) continue;
      const std::string symbol_name = strings + symbol.st_name;
      for (size_t n = 0; n < names.size(); ++n) {
        if (symbol_name.find(names[n]) != std::string::npos) found[n] = symbol.st_shndx;
      }
    }
  }
  return found;
}

TEST(HotData, EveryEventsGlobalsShareOneSmallBlock) {
  const Elf elf = ReadElf(BuildPath("lib/libgpumem.so"));
  ASSERT_GT(elf.bytes.size(), sizeof(Elf64_Ehdr));
  int hot = -1;
  for (size_t s = 0; s < elf.header().e_shnum; ++s) {
    if (std::string(elf.SectionName(s)) == ".data.gpumem_hot") hot = static_cast<int>(s);
  }
  ASSERT_GE(hot, 0) << "libgpumem.so has no .data.gpumem_hot section";
  // A few lines: a block that grew past this holds something that is not read at every event.
  EXPECT_LE(elf.section(static_cast<size_t>(hot)).sh_size, 1024u);
  // From six files: the recorder's start check, the thread-locals key, the clock, the driver's
  // query table, the unwinder's state and the self-timing switch.
  const std::vector<std::string> names = {"g_initialized", "g_start_state", "g_key_state",
                                          "g_ns_per_tick", "g_functions",   "g_anchor_offset",
                                          "g_find_object", "g_enabled",     "g_file_sink"};
  const std::vector<int> sections = SectionsOf(elf, names);
  for (size_t n = 0; n < names.size(); ++n) EXPECT_EQ(sections[n], hot) << names[n];
}

}  // namespace
}  // namespace gpumem::testing
