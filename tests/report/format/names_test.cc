// report/format/names.h: the names the reports print for the trace's enums.
#include "report/format/names.h"

#include <set>
#include <string>

#include "core/trace.pb.h"
#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

// Every value `descriptor` lists gets a name of its own from `name_of` (none the fallback
// `fallback_prefix<N>`, no two alike).
template <typename Enum, typename NameOf>
void ExpectEveryValueNamed(const google::protobuf::EnumDescriptor* descriptor, NameOf name_of,
                           const std::string& fallback_prefix) {
  std::set<std::string> seen;
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const int number = descriptor->value(i)->number();
    const std::string name = name_of(static_cast<Enum>(number));
    EXPECT_NE(name, fallback_prefix + std::to_string(number)) << descriptor->value(i)->name();
    EXPECT_TRUE(seen.insert(name).second) << name << " twice";
  }
}

TEST(NamesTest, EveryValueOfTheSchemaHasANameOfItsOwn) {
  ExpectEveryValueNamed<Api>(Api_descriptor(), ApiName, "api");
  ExpectEveryValueNamed<Action>(Action_descriptor(), ActionName, "action");
  ExpectEveryValueNamed<MemoryKind>(MemoryKind_descriptor(), KindName, "kind");
  ExpectEveryValueNamed<RecordingStop>(RecordingStop_descriptor(), RecordingStopName, "stop");
  ExpectEveryValueNamed<CaptureMode>(CaptureMode_descriptor(), CaptureModeName, "mode");
  ExpectEveryValueNamed<CuptiState>(CuptiState_descriptor(), CuptiStateName, "");
}

TEST(NamesTest, NamesAreTheOnesTheReportsAndSchemaUse) {
  EXPECT_EQ(ApiName(CUDA_MALLOC), "cudaMalloc");
  EXPECT_EQ(ApiName(CU_MEM_CREATE), "cuMemCreate");
  EXPECT_EQ(ApiName(CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE), "cuMemImportFromShareableHandle");
  EXPECT_EQ(ActionName(ALLOC_FAILED), "alloc_failed");
  EXPECT_EQ(ActionName(RETAIN), "retain");
  EXPECT_EQ(KindName(PINNED_HOST), "pinned_host");
  EXPECT_EQ(KindName(VMM_MAPPING), "vmm_mapping");
  EXPECT_EQ(KindName(KIND_UNKNOWN), "unknown");
  EXPECT_EQ(LaunchApiName(CU_LAUNCH_COOPERATIVE_KERNEL), "cuLaunchCooperativeKernel");
  EXPECT_EQ(LaunchApiName(CU_GRAPH_LAUNCH), "cuGraphLaunch");
  EXPECT_EQ(RecordingStopName(DISK_FULL), "disk_full");
  EXPECT_EQ(RecordingStopName(STOP_NONE), "none");
  EXPECT_EQ(CuptiStateName(CUPTI_OTHER_SUBSCRIBER), "other_subscriber");
  EXPECT_EQ(CaptureModeName(CAPTURE_MODE_THREAD_LOCAL), "thread_local");
}

TEST(NamesTest, ValuesFromANewerSchemaNameTheirNumber) {
  EXPECT_EQ(ApiName(static_cast<Api>(999)), "api999");
  EXPECT_EQ(ActionName(static_cast<Action>(77)), "action77");
  EXPECT_EQ(KindName(static_cast<MemoryKind>(42)), "kind42");
  EXPECT_EQ(LaunchApiName(static_cast<LaunchApi>(31)), "launch31");
  EXPECT_EQ(LaunchApiName(LAUNCH_API_UNKNOWN), "launch0");
  EXPECT_EQ(RecordingStopName(static_cast<RecordingStop>(12)), "stop12");
  EXPECT_EQ(CaptureModeName(static_cast<CaptureMode>(9)), "mode9");
  EXPECT_EQ(CuptiStateName(static_cast<CuptiState>(9)), "unknown");
}

TEST(NamesTest, DemangleReadsCppSymbolsAndKeepsTheRest) {
  EXPECT_EQ(Demangle("_Z6kernelPfi"), "kernel(float*, int)");
  EXPECT_EQ(Demangle("_ZN5torch3fooEv"), "torch::foo()");
  EXPECT_EQ(Demangle("cudaMalloc"), "cudaMalloc");                // C
  EXPECT_EQ(Demangle("_Znotamangledname"), "_Znotamangledname");  // not valid: as it is
  EXPECT_EQ(Demangle("_"), "_");
  EXPECT_EQ(Demangle(""), "");
  EXPECT_EQ(Demangle(nullptr), "");
}

}  // namespace
}  // namespace gpumem::report
