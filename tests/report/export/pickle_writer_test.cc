// report/export/pickle_writer.h: what it writes, read back by Python's own pickle.
#include "report/export/pickle_writer.h"

#include <cstdint>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::ProgramRun;
using testing::RunProgram;
using testing::TempDir;

TEST(PickleWriterTest, PythonReadsBackEveryKindOfValue) {
  std::string bytes;
  report::PickleWriter writer(&bytes);
  writer.Protocol();
  writer.BeginDict();
  writer.String("ints");
  writer.BeginList();
  for (const int64_t value :
       {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{65535}, int64_t{65536}, int64_t{-1},
        int64_t{-2147483648LL}, int64_t{2147483648LL}, int64_t{-1099511627776LL}, INT64_MAX,
        INT64_MIN}) {
    writer.Int(value);
  }
  writer.UInt(uint64_t{1} << 63);
  writer.UInt(UINT64_MAX);
  writer.EndList();
  writer.String("text");
  writer.BeginList();
  writer.String("héllo ✓ 𝄞");
  writer.String(std::string(300, 'x'));
  writer.String("bad \xff\xfe utf-8");
  writer.EndList();
  writer.String("many");
  writer.BeginList();
  for (int i = 0; i < 2500; ++i) writer.Int(i);
  writer.EndList();
  writer.String("nested");
  writer.BeginList();
  writer.BeginList();
  writer.BeginDict();
  writer.String("a");
  writer.None();
  writer.String("b");
  writer.Bool(true);
  writer.String("c");
  writer.Bool(false);
  writer.String("d");
  writer.Float(1.5);
  writer.EndDict();
  writer.EndList(0);  // memo 0
  writer.Get(0);
  writer.BeginTuple();
  writer.Int(0);
  writer.Int(0);
  writer.EndTuple();
  writer.EndList();
  writer.EndDict();
  writer.Stop();
  ASSERT_EQ(bytes.substr(0, 2), std::string("\x80\x04"));

  TempDir dir;
  std::ofstream(dir.File("p.pickle"), std::ios::binary) << bytes;
  const ProgramRun run = RunProgram(
      {GPUMEM_PYTHON3, "-c",
       "import pickle,pickletools,sys\n"
       "raw=open(sys.argv[1],'rb').read()\n"
       "d=pickle.loads(raw)\n"
       "assert d['ints']==[0,255,256,65535,65536,-1,-2**31,2**31,-2**40,2**63-1,-2**63,2**63,"
       "2**64-1], d['ints']\n"
       "assert d['text']==['h\\u00e9llo \\u2713 \\U0001d11e','x'*300,'bad \\\\xff\\\\xfe utf-8'],"
       " d['text']\n"
       "assert d['many']==list(range(2500))\n"
       "inner=d['nested'][0]\n"
       "assert inner==[{'a':None,'b':True,'c':False,'d':1.5}] and d['nested'][1] is inner\n"
       "assert d['nested'][2]==(0,0)\n"
       "assert max(op.proto for op,_,_ in pickletools.genops(raw))<=4\n"
       "print('ok')\n",
       dir.File("p.pickle")});
  EXPECT_EQ(run.out, "ok\n") << run.err;
}

}  // namespace
}  // namespace gpumem
