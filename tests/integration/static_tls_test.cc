// gpumem adds nothing to the static TLS of the program's threads: a preloaded library's TLS sits at
// the top of every thread's stack, so a program whose threads run on small stacks could no longer
// start them (on the H100 machine gpumem's 112 bytes, placed before libcudart's 4096-aligned block,
// cost 4 KiB a thread, and pthread_create with a 16 KiB stack failed with EINVAL).
#include <elf.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

TEST(StaticTls, ThePreloadLibraryHasNoTlsSegment) {
  std::ifstream in(BuildPath("lib/libgpumem.so"), std::ios::binary);
  Elf64_Ehdr header{};
  ASSERT_TRUE(in.read(reinterpret_cast<char*>(&header), sizeof(header)));
  ASSERT_EQ(header.e_ident[EI_CLASS], ELFCLASS64);
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    in.seekg(static_cast<std::streamoff>(header.e_phoff + i * header.e_phentsize));
    ASSERT_TRUE(in.read(reinterpret_cast<char*>(&segment), sizeof(segment)));
    EXPECT_NE(segment.p_type, static_cast<Elf64_Word>(PT_TLS))
        << "libgpumem.so has " << segment.p_memsz << " bytes of TLS";
  }
}

TEST(StaticTls, ThreadsCarryTheSameStaticTlsUnderGpumem) {
  const std::string program = BuildPath("tests/programs/static_tls");
  const ProgramRun plain = RunProgram({program}, {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  TempDir dir;
  const ProgramRun recorded = RunProgram({program}, RecordingEnvironment(dir.File("t.trace")));
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_NE(plain.out.find("=0\n"), std::string::npos) << plain.out;  // the thread started
  EXPECT_EQ(recorded.out, plain.out);
}

}  // namespace
}  // namespace gpumem::testing
