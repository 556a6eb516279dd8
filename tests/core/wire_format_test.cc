// The recorder writes protobuf by hand (no libprotobuf in the target process). These tests parse
// what it wrote with the real libprotobuf and compare field by field, and compare the hand-written
// encoding byte for byte with libprotobuf's own serialization.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/recorder.h"
#include "core/trace.pb.h"
#include "core/trace_format.h"
#include "core/trace_ids.h"
#include "core/wire_writer.h"

namespace gpumem {
namespace {

TEST(TraceIds, MirrorTheSchema) {
  namespace f = proto::memory_field;
  const auto* memory = MemoryEvent::descriptor();
  EXPECT_EQ(memory->FindFieldByName("seq")->number(), static_cast<int>(f::kSeq));
  EXPECT_EQ(memory->FindFieldByName("timestamp_ns")->number(), static_cast<int>(f::kTimestampNs));
  EXPECT_EQ(memory->FindFieldByName("device")->number(), static_cast<int>(f::kDevice));
  EXPECT_EQ(memory->FindFieldByName("api")->number(), static_cast<int>(f::kApi));
  EXPECT_EQ(memory->FindFieldByName("kind")->number(), static_cast<int>(f::kKind));
  EXPECT_EQ(memory->FindFieldByName("action")->number(), static_cast<int>(f::kAction));
  EXPECT_EQ(memory->FindFieldByName("stack_id")->number(), static_cast<int>(f::kStackId));
  EXPECT_EQ(memory->FindFieldByName("pitch")->number(), static_cast<int>(f::kPitch));
  EXPECT_EQ(memory->FindFieldByName("total_bytes")->number(), static_cast<int>(f::kTotalBytes));
  const auto* packet = TracePacket::descriptor();
  EXPECT_EQ(packet->FindFieldByName("memory")->number(),
            static_cast<int>(proto::packet_field::kMemory));
  EXPECT_EQ(packet->FindFieldByName("stack")->number(),
            static_cast<int>(proto::packet_field::kStack));
  EXPECT_EQ(packet->FindFieldByName("footer")->number(),
            static_cast<int>(proto::packet_field::kFooter));
  // Every Api value the recorder can write exists, with the same number, in the schema.
  for (auto api :
       {proto::Api::kCudaMalloc, proto::Api::kCudaFreeHost, proto::Api::kCuMemAlloc,
        proto::Api::kCuMemUnmap, proto::Api::kCuMemFreeHost, proto::Api::kCuMemAllocHost}) {
    EXPECT_NE(Api_descriptor()->FindValueByNumber(static_cast<int>(api)), nullptr);
  }
  EXPECT_EQ(static_cast<int>(proto::Api::kCuMemAllocHost), CU_MEM_ALLOC_HOST);
  EXPECT_EQ(static_cast<int>(proto::Api::kCudaMalloc3D), CUDA_MALLOC_3D);
  EXPECT_EQ(static_cast<int>(proto::MemoryKind::kVmmMapping), VMM_MAPPING);
  EXPECT_EQ(static_cast<int>(proto::Action::kFreeFailed), FREE_FAILED);
  EXPECT_EQ(static_cast<int>(proto::Action::kRetain), RETAIN);
  EXPECT_EQ(static_cast<int>(proto::MemoryKind::kVmmImported), VMM_IMPORTED);
  EXPECT_EQ(static_cast<int>(proto::Api::kCuMemRetainAllocationHandle),
            CU_MEM_RETAIN_ALLOCATION_HANDLE);
  EXPECT_EQ(static_cast<int>(proto::Api::kCuMemImportFromShareableHandle),
            CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE);
  const auto* header = Header::descriptor();
  EXPECT_EQ(header->FindFieldByName("rank")->number(),
            static_cast<int>(proto::header_field::kRank));
  EXPECT_EQ(header->FindFieldByName("local_rank")->number(),
            static_cast<int>(proto::header_field::kLocalRank));
  EXPECT_EQ(header->FindFieldByName("world_size")->number(),
            static_cast<int>(proto::header_field::kWorldSize));
}

// Random MemoryEvents: the hand-written encoding equals libprotobuf's, byte for byte.
TEST(WireWriter, EncodesExactlyAsLibprotobuf) {
  std::mt19937_64 random(42);
  const uint64_t edges[] = {0,           1, 127, 128, 16383, 16384, 0xffffffffull, 0x100000000ull,
                            ~uint64_t{0}};
  auto value = [&]() {
    return random() % 3 == 0 ? edges[random() % 9] : random() >> (random() % 64);
  };
  for (int round = 0; round < 2000; ++round) {
    MemoryEvent expected;
    expected.set_seq(value());
    expected.set_timestamp_ns(value());
    expected.set_tid(static_cast<uint32_t>(value()));
    expected.set_device(static_cast<int32_t>(value()));  // negative ones too
    expected.set_api(static_cast<Api>(random() % 12));
    expected.set_size(value());
    expected.set_address(value());
    expected.set_result(static_cast<int32_t>(value()));
    expected.set_stack_id(value());
    expected.set_pitch(value());

    uint8_t buffer[512];
    wire::Writer writer(buffer, sizeof(buffer));
    namespace f = proto::memory_field;
    writer.Varint(f::kSeq, expected.seq());
    writer.Varint(f::kTimestampNs, expected.timestamp_ns());
    writer.Varint(f::kTid, expected.tid());
    writer.Int32(f::kDevice, expected.device());
    writer.Varint(f::kApi, expected.api());
    writer.Varint(f::kSize, expected.size());
    writer.Varint(f::kAddress, expected.address());
    writer.Int32(f::kResult, expected.result());
    writer.Varint(f::kStackId, expected.stack_id());
    writer.Varint(f::kPitch, expected.pitch());
    ASSERT_FALSE(writer.overflowed());
    std::string written(reinterpret_cast<const char*>(writer.data()), writer.size());
    ASSERT_EQ(written, expected.SerializeAsString()) << expected.ShortDebugString();
  }
}

// The hot path's encoder: all of a memory event's fields (1..18, two-byte tags from 16) from one
// array, zeros left out, byte for byte as libprotobuf writes them.
TEST(WireWriter, VarintFieldsFromAnArrayEncodeExactlyAsLibprotobuf) {
  std::mt19937_64 random(7);
  const uint64_t edges[] = {0, 1, 127, 128, 16383, 16384, 0xffffffffull, ~uint64_t{0}};
  auto value = [&]() {
    return random() % 2 == 0 ? edges[random() % 8] : random() >> (random() % 64);
  };
  namespace f = proto::memory_field;
  for (int round = 0; round < 2000; ++round) {
    uint64_t fields[f::kPitch];
    for (uint64_t& field : fields) field = value();
    fields[f::kApi - 1] %= 12;
    fields[f::kKind - 1] %= 4;
    fields[f::kAction - 1] %= 4;
    MemoryEvent expected;
    expected.set_seq(fields[f::kSeq - 1]);
    expected.set_timestamp_ns(fields[f::kTimestampNs - 1]);
    fields[f::kTid - 1] &= 0xffffffffull;
    expected.set_tid(static_cast<uint32_t>(fields[f::kTid - 1]));
    const auto device = static_cast<int32_t>(fields[f::kDevice - 1]);
    fields[f::kDevice - 1] = static_cast<uint64_t>(static_cast<int64_t>(device));
    expected.set_device(device);
    expected.set_api(static_cast<Api>(fields[f::kApi - 1]));
    expected.set_kind(static_cast<MemoryKind>(fields[f::kKind - 1]));
    expected.set_action(static_cast<Action>(fields[f::kAction - 1]));
    expected.set_size(fields[f::kSize - 1]);
    expected.set_address(fields[f::kAddress - 1]);
    expected.set_stream(fields[f::kStream - 1]);
    expected.set_pool(fields[f::kPool - 1]);
    const auto result = static_cast<int32_t>(fields[f::kResult - 1]);
    fields[f::kResult - 1] = static_cast<uint64_t>(static_cast<int64_t>(result));
    expected.set_result(result);
    expected.set_stack_id(fields[f::kStackId - 1]);
    expected.set_handle(fields[f::kHandle - 1]);
    expected.set_offset(fields[f::kOffset - 1]);
    expected.set_free_bytes(fields[f::kFreeBytes - 1]);
    expected.set_total_bytes(fields[f::kTotalBytes - 1]);
    expected.set_pitch(fields[f::kPitch - 1]);

    uint8_t buffer[f::kPitch * (2 + wire::kMaxVarintBytes)];
    const uint8_t* end = wire::PutVarintFields(buffer, 1, fields, f::kPitch);
    std::string written(reinterpret_cast<const char*>(buffer), static_cast<size_t>(end - buffer));
    ASSERT_EQ(written, expected.SerializeAsString()) << expected.ShortDebugString();
  }
}

TEST(WireWriter, NestedRepeatedAndEmptyFields) {
  Stack expected;
  expected.set_id(300);
  for (uint64_t frame : {uint64_t{0x7f0000001234}, uint64_t{1}, uint64_t{0}, ~uint64_t{0}}) {
    expected.add_frame(frame);
  }
  Header header;
  header.add_command_line("prog");
  header.add_command_line("");  // an empty argument is still an argument
  header.add_command_line(std::string(300, 'x'));

  uint8_t buffer[2048];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t stack = writer.BeginNested(proto::packet_field::kStack);
  writer.Varint(proto::stack_field::kId, expected.id());
  std::vector<uint64_t> frames(expected.frame().begin(), expected.frame().end());
  writer.PackedVarints(proto::stack_field::kFrame, frames.data(), frames.size());
  writer.EndNested(stack);
  writer.EndNested(packet);
  packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t header_token = writer.BeginNested(proto::packet_field::kHeader);
  for (const std::string& arg : header.command_line()) {
    writer.RepeatedBytes(proto::header_field::kCommandLine, arg.data(), arg.size());
  }
  writer.EndNested(header_token);
  writer.EndNested(packet);

  Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(writer.data(), static_cast<int>(writer.size())));
  ASSERT_EQ(trace.packet_size(), 2);
  EXPECT_EQ(trace.packet(0).stack().ShortDebugString(), expected.ShortDebugString());
  EXPECT_EQ(trace.packet(1).header().ShortDebugString(), header.ShortDebugString());
}

TEST(WireWriter, StopsAtTheEndOfItsBuffer) {
  uint8_t buffer[40];
  wire::Writer writer(buffer, sizeof(buffer));
  writer.Varint(1, 5);
  EXPECT_FALSE(writer.overflowed());
  writer.String(2, "a string that does not fit into the forty bytes of this buffer");
  EXPECT_TRUE(writer.overflowed());
  EXPECT_LE(writer.size(), sizeof(buffer));
}

// Records, through the recorder's own calls, a device, a pitched allocation with its stack and a
// failed allocation; returns the allocation.
MemoryRecord RecordADeviceAndTwoAllocations() {
  MemoryRecord alloc;
  alloc.seq = recorder::NextSeq();
  alloc.api = proto::Api::kCuMemAllocPitch;
  alloc.kind = proto::MemoryKind::kDevice;
  alloc.action = proto::Action::kAlloc;
  alloc.device = 3;
  alloc.size = 123456789012ull;
  alloc.address = 0x7f00deadbeef00ull;
  alloc.pitch = 512;
  alloc.stack_id = recorder::CaptureStack(reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
  recorder::RecordDevice(3, "Test GPU <&>", 85017493504ull);
  recorder::RecordMemory(alloc);
  MemoryRecord failed;
  failed.seq = recorder::NextSeq();
  failed.api = proto::Api::kCudaMalloc;
  failed.kind = proto::MemoryKind::kDevice;
  failed.action = proto::Action::kAllocFailed;
  failed.device = -1;
  failed.result = 2;
  failed.size = ~uint64_t{0};
  failed.free_bytes = 1;
  failed.total_bytes = 2;
  recorder::RecordMemory(failed);
  return alloc;
}

// The packets after the header, by kind.
struct RecordedPackets {
  std::vector<MemoryEvent> events;
  const Device* device = nullptr;
  const Footer* footer = nullptr;
  bool saw_stack = false;  // the allocation's stack, with frames
  bool saw_thread = false;
  bool saw_own_module = false;
};

RecordedPackets Collect(const Trace& trace, uint64_t stack_id) {
  RecordedPackets seen;
  for (const TracePacket& packet : trace.packet()) {
    if (packet.has_memory()) seen.events.push_back(packet.memory());
    if (packet.has_device()) seen.device = &packet.device();
    if (packet.has_footer()) seen.footer = &packet.footer();
    if (packet.has_thread())
      seen.saw_thread |= packet.thread().tid() == static_cast<uint32_t>(gettid());
    if (packet.has_stack())
      seen.saw_stack |= packet.stack().id() == stack_id && packet.stack().frame_size() > 0;
    if (packet.has_module())
      seen.saw_own_module |=
          packet.module().path() == std::filesystem::canonical("/proc/self/exe").string();
  }
  return seen;
}

void ExpectHeader(const Header& header, const std::string& path) {
  EXPECT_EQ(header.format_version(), proto::kFormatVersion);
  EXPECT_EQ(header.pid(), static_cast<uint32_t>(getpid()));
  EXPECT_FALSE(header.command_line().empty());
  EXPECT_GT(header.start_time_unix_ns(), 1700000000ull * 1000000000ull);
  bool saw_option = false;
  for (const Option& option : header.option())
    saw_option |= option.name() == "GPUMEM_OUTPUT" && option.value() == path;
  EXPECT_TRUE(saw_option) << header.ShortDebugString();
}

// The two events RecordADeviceAndTwoAllocations wrote, field by field.
void ExpectEvents(const std::vector<MemoryEvent>& events, const MemoryRecord& alloc,
                  const Header& header) {
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].seq(), alloc.seq);
  EXPECT_EQ(events[0].api(), CU_MEM_ALLOC_PITCH);
  EXPECT_EQ(events[0].kind(), DEVICE);
  EXPECT_EQ(events[0].action(), ALLOC);
  EXPECT_EQ(events[0].device(), 3);
  EXPECT_EQ(events[0].size(), alloc.size);
  EXPECT_EQ(events[0].address(), alloc.address);
  EXPECT_EQ(events[0].pitch(), 512u);
  EXPECT_EQ(events[0].tid(), static_cast<uint32_t>(gettid()));
  EXPECT_EQ(events[0].stack_id(), alloc.stack_id);
  EXPECT_GT(events[0].timestamp_ns(), header.start_time_mono_ns());
  EXPECT_EQ(events[1].action(), ALLOC_FAILED);
  EXPECT_EQ(events[1].device(), -1);
  EXPECT_EQ(events[1].result(), 2);
  EXPECT_EQ(events[1].size(), ~uint64_t{0});
  EXPECT_EQ(events[1].free_bytes(), 1u);
  EXPECT_EQ(events[1].total_bytes(), 2u);
}

// The recorder itself, in this process: every packet it writes parses with libprotobuf, and the
// whole file parses as one Trace message (what `protoc --decode` needs).
TEST(Recorder, WritesATraceThatLibprotobufParsesFieldByField) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("wire_format_test-" + std::to_string(getpid()) + ".trace"))
                         .string();
  setenv("GPUMEM_OUTPUT", path.c_str(), 1);
  unsetenv("GPUMEM_SESSION_PID");
  recorder::Init(LoaderFunctions{&dlopen, &dlsym});
  const MemoryRecord alloc = RecordADeviceAndTwoAllocations();
  recorder::Finish();

  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::filesystem::remove(path);
  Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes.str()));
  ASSERT_GE(trace.packet_size(), 5);
  const Header& header = trace.packet(0).header();
  ExpectHeader(header, path);

  const RecordedPackets seen = Collect(trace, alloc.stack_id);
  ExpectEvents(seen.events, alloc, header);
  ASSERT_NE(seen.device, nullptr);
  EXPECT_EQ(seen.device->ordinal(), 3);
  EXPECT_EQ(seen.device->name(), "Test GPU <&>");
  EXPECT_EQ(seen.device->total_memory(), 85017493504ull);
  EXPECT_TRUE(seen.saw_thread);
  EXPECT_TRUE(seen.saw_own_module);
  EXPECT_NE(alloc.stack_id, 0u);  // libunwind is installed wherever the tests run
  EXPECT_TRUE(seen.saw_stack);
  ASSERT_NE(seen.footer, nullptr);
  EXPECT_TRUE(seen.footer->clean_exit());
  EXPECT_EQ(seen.footer->events(), 2u);
  EXPECT_EQ(seen.footer->events_dropped(), 0u);
  EXPECT_EQ(seen.footer->bytes_written(),
            bytes.str().size() - trace.packet().rbegin()->ByteSizeLong() - 2);
}

}  // namespace
}  // namespace gpumem

namespace gpumem {
namespace {

// A field number core/trace_ids.h (generated from trace.proto) gives, and the field it names.
struct FieldMirror {
  const google::protobuf::Descriptor* message;
  const char* field;
  uint32_t number;
};

// Each mirrored number names the same field in the schema.
void ExpectFieldNumbers(std::initializer_list<FieldMirror> mirrors) {
  for (const FieldMirror& mirror : mirrors) {
    const auto* field = mirror.message->FindFieldByName(mirror.field);
    ASSERT_NE(field, nullptr) << mirror.message->name() << "." << mirror.field;
    EXPECT_EQ(field->number(), static_cast<int>(mirror.number))
        << mirror.message->name() << "." << mirror.field;
  }
}

// The field numbers of the packets added after the memory ones.
TEST(TraceIds, PacketFieldsMirrorTheSchema) {
  ExpectFieldNumbers({
      {TracePacket::descriptor(), "kernel_name", proto::packet_field::kKernelName},
      {TracePacket::descriptor(), "launch", proto::packet_field::kLaunch},
      {TracePacket::descriptor(), "cupti", proto::packet_field::kCupti},
      {TracePacket::descriptor(), "kernel_timing", proto::packet_field::kKernelTiming},
      {TracePacket::descriptor(), "pool_usage", proto::packet_field::kPoolUsage},
      {TracePacket::descriptor(), "python_code", proto::packet_field::kPythonCode},
      {TracePacket::descriptor(), "python_status", proto::packet_field::kPythonStatus},
      {TracePacket::descriptor(), "python_holder", proto::packet_field::kPythonHolder},
      {TracePacket::descriptor(), "stream_capture", proto::packet_field::kStreamCapture},
  });
}

// The field numbers of kernel names and launches.
TEST(TraceIds, LaunchFieldsMirrorTheSchema) {
  namespace l = proto::launch_field;
  ExpectFieldNumbers({
      {KernelName::descriptor(), "id", proto::kernel_name_field::kId},
      {KernelName::descriptor(), "name", proto::kernel_name_field::kName},
      {LaunchEvent::descriptor(), "seq", l::kSeq},
      {LaunchEvent::descriptor(), "timestamp_ns", l::kTimestampNs},
      {LaunchEvent::descriptor(), "tid", l::kTid},
      {LaunchEvent::descriptor(), "device", l::kDevice},
      {LaunchEvent::descriptor(), "api", l::kApi},
      {LaunchEvent::descriptor(), "kernel_id", l::kKernelId},
      {LaunchEvent::descriptor(), "grid_x", l::kGridX},
      {LaunchEvent::descriptor(), "grid_y", l::kGridY},
      {LaunchEvent::descriptor(), "grid_z", l::kGridZ},
      {LaunchEvent::descriptor(), "block_x", l::kBlockX},
      {LaunchEvent::descriptor(), "block_y", l::kBlockY},
      {LaunchEvent::descriptor(), "block_z", l::kBlockZ},
      {LaunchEvent::descriptor(), "shared_memory_bytes", l::kSharedMemoryBytes},
      {LaunchEvent::descriptor(), "stream", l::kStream},
      {LaunchEvent::descriptor(), "correlation_id", l::kCorrelationId},
      {LaunchEvent::descriptor(), "stack_id", l::kStackId},
      {LaunchEvent::descriptor(), "result", l::kResult},
      {LaunchEvent::descriptor(), "graph", l::kGraph},
      {LaunchEvent::descriptor(), "pointer_args", l::kPointerArgs},
      {LaunchEvent::descriptor(), "from_cupti", l::kFromCupti},
      {LaunchEvent::descriptor(), "params_unknown", l::kParamsUnknown},
  });
}

// The field numbers of CUPTI's status, kernel times and pool usage.
TEST(TraceIds, CuptiFieldsMirrorTheSchema) {
  ExpectFieldNumbers({
      {CuptiStatus::descriptor(), "state", proto::cupti_field::kState},
      {CuptiStatus::descriptor(), "detail", proto::cupti_field::kDetail},
      {CuptiStatus::descriptor(), "kernel_timing", proto::cupti_field::kKernelTiming},
      {KernelTiming::descriptor(), "correlation_id", proto::kernel_timing_field::kCorrelationId},
      {KernelTiming::descriptor(), "start_ns", proto::kernel_timing_field::kStartNs},
      {KernelTiming::descriptor(), "end_ns", proto::kernel_timing_field::kEndNs},
      {KernelTiming::descriptor(), "device", proto::kernel_timing_field::kDevice},
      {PoolUsage::descriptor(), "pool", proto::pool_usage_field::kPool},
      {PoolUsage::descriptor(), "device", proto::pool_usage_field::kDevice},
      {PoolUsage::descriptor(), "reserved_bytes", proto::pool_usage_field::kReservedBytes},
      {PoolUsage::descriptor(), "used_bytes", proto::pool_usage_field::kUsedBytes},
      {PoolUsage::descriptor(), "timestamp_ns", proto::pool_usage_field::kTimestampNs},
      {PoolUsage::descriptor(), "correlation_id", proto::pool_usage_field::kCorrelationId},
  });
}

// The field numbers of Python stacks, code and holders.
TEST(TraceIds, PythonFieldsMirrorTheSchema) {
  ExpectFieldNumbers({
      {Stack::descriptor(), "python_code", proto::stack_field::kPythonCode},
      {Stack::descriptor(), "python_line", proto::stack_field::kPythonLine},
      {Stack::descriptor(), "python_group", proto::stack_field::kPythonGroup},
      {Stack::descriptor(), "python_truncated", proto::stack_field::kPythonTruncated},
      {PythonCode::descriptor(), "id", proto::python_code_field::kId},
      {PythonCode::descriptor(), "filename", proto::python_code_field::kFilename},
      {PythonCode::descriptor(), "function", proto::python_code_field::kFunction},
      {PythonCode::descriptor(), "first_line", proto::python_code_field::kFirstLine},
      {PythonStatus::descriptor(), "version", proto::python_status_field::kVersion},
      {PythonStatus::descriptor(), "supported", proto::python_status_field::kSupported},
      {PythonStatus::descriptor(), "detail", proto::python_status_field::kDetail},
      {PythonHolder::descriptor(), "seq", proto::python_holder_field::kSeq},
      {PythonHolder::descriptor(), "timestamp_ns", proto::python_holder_field::kTimestampNs},
      {PythonHolder::descriptor(), "tid", proto::python_holder_field::kTid},
      {PythonHolder::descriptor(), "address", proto::python_holder_field::kAddress},
      {PythonHolder::descriptor(), "size", proto::python_holder_field::kSize},
      {PythonHolder::descriptor(), "stack_id", proto::python_holder_field::kStackId},
      {PythonHolder::descriptor(), "how", proto::python_holder_field::kHow},
  });
}

// The field numbers of the footer.
TEST(TraceIds, FooterFieldsMirrorTheSchema) {
  ExpectFieldNumbers({
      {Footer::descriptor(), "events", proto::footer_field::kEvents},
      {Footer::descriptor(), "events_dropped", proto::footer_field::kEventsDropped},
      {Footer::descriptor(), "stacks", proto::footer_field::kStacks},
      {Footer::descriptor(), "stacks_failed", proto::footer_field::kStacksFailed},
      {Footer::descriptor(), "bytes_written", proto::footer_field::kBytesWritten},
      {Footer::descriptor(), "clean_exit", proto::footer_field::kCleanExit},
      {Footer::descriptor(), "end_time_mono_ns", proto::footer_field::kEndTimeMonoNs},
      {Footer::descriptor(), "exit_status", proto::footer_field::kExitStatus},
      {Footer::descriptor(), "hook_conflicts", proto::footer_field::kHookConflicts},
      {Footer::descriptor(), "stop_reason", proto::footer_field::kStopReason},
      {Footer::descriptor(), "stopped_at_seq", proto::footer_field::kStoppedAtSeq},
      {Footer::descriptor(), "events_reentrant", proto::footer_field::kEventsReentrant},
  });
}

// The field numbers of stream captures and the capture of a memory event.
TEST(TraceIds, StreamCaptureFieldsMirrorTheSchema) {
  ExpectFieldNumbers({
      {MemoryEvent::descriptor(), "capture", proto::memory_field::kCapture},
      {StreamCapture::descriptor(), "seq", proto::stream_capture_field::kSeq},
      {StreamCapture::descriptor(), "timestamp_ns", proto::stream_capture_field::kTimestampNs},
      {StreamCapture::descriptor(), "tid", proto::stream_capture_field::kTid},
      {StreamCapture::descriptor(), "capture", proto::stream_capture_field::kCapture},
      {StreamCapture::descriptor(), "stream", proto::stream_capture_field::kStream},
      {StreamCapture::descriptor(), "mode", proto::stream_capture_field::kMode},
      {StreamCapture::descriptor(), "ended", proto::stream_capture_field::kEnded},
      {StreamCapture::descriptor(), "result", proto::stream_capture_field::kResult},
  });
}

// The enum values the recorder writes by number.
TEST(TraceIds, EnumValuesMirrorTheSchema) {
  EXPECT_EQ(static_cast<int>(proto::LaunchApi::kCuGraphLaunch), CU_GRAPH_LAUNCH);
  EXPECT_EQ(static_cast<int>(proto::CuptiState::kFailed), CUPTI_FAILED);
  EXPECT_EQ(static_cast<int>(proto::RecordingStop::kDiskFull), DISK_FULL);
  EXPECT_EQ(static_cast<int>(proto::RecordingStop::kSizeLimit), SIZE_LIMIT);
  EXPECT_EQ(static_cast<int>(proto::RecordingStop::kDescriptorLost), DESCRIPTOR_LOST);
  EXPECT_EQ(static_cast<int>(proto::RecordingStop::kWriteFailed), WRITE_FAILED);
  EXPECT_EQ(static_cast<int>(proto::RecordingStop::kAddressSpaceFull), ADDRESS_SPACE_FULL);
  EXPECT_EQ(static_cast<int>(proto::CaptureMode::kGlobal), CAPTURE_MODE_GLOBAL);
  EXPECT_EQ(static_cast<int>(proto::CaptureMode::kThreadLocal), CAPTURE_MODE_THREAD_LOCAL);
  EXPECT_EQ(static_cast<int>(proto::CaptureMode::kRelaxed), CAPTURE_MODE_RELAXED);
}

// Footer.exit_status has presence: a status of 0 is written, as libprotobuf writes it.
TEST(WireWriter, FieldWithPresenceIsWrittenWhenZero) {
  for (int32_t status : {0, 3, -1}) {
    Footer expected;
    expected.set_exit_status(status);
    uint8_t buffer[32];
    wire::Writer writer(buffer, sizeof(buffer));
    writer.Int32Present(proto::footer_field::kExitStatus, status);
    ASSERT_FALSE(writer.overflowed());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(writer.data()), writer.size()),
              expected.SerializeAsString());
  }
}

}  // namespace
}  // namespace gpumem

namespace gpumem {
namespace {

// ---- Event references (format 2) ----

// cudaFree of what `alloc` allocated.
void RecordFreeOf(MemoryRecord alloc) {
  alloc.seq = recorder::NextSeq();
  alloc.api = proto::Api::kCudaFree;
  alloc.action = proto::Action::kFree;
  alloc.size = 0;
  alloc.stack_id = 0;
  recorder::RecordMemory(alloc);
}

// One iteration of a loop, as a program repeats it: an allocation, a launch with the next
// correlation id, another thread's allocation (a new thread each time: it takes the state the
// last one left, so its writer number is reused), a failed allocation (never a template), a free.
void RecordIteration(int iteration) {
  MemoryRecord alloc;
  alloc.seq = recorder::NextSeq();
  alloc.api = proto::Api::kCudaMalloc;
  alloc.kind = proto::MemoryKind::kDevice;
  alloc.action = proto::Action::kAlloc;
  alloc.device = 0;
  alloc.size = 1 << 20;
  // A pooling allocator's: the address moves each iteration (a literal), the free repeats it (a
  // hit).
  alloc.address = 0x7f0000100000ull + 0x200000ull * static_cast<uint64_t>(iteration);
  alloc.stack_id = 77;
  recorder::RecordMemory(alloc);
  LaunchRecord launch;
  launch.seq = recorder::NextSeq();
  launch.api = proto::LaunchApi::kCuLaunchKernel;
  launch.device = 0;
  launch.grid[0] = 4;
  launch.block[0] = 256;
  launch.stream = 0x1234;
  launch.correlation_id = 100 + 3 * static_cast<uint64_t>(iteration);
  launch.stack_id = 78;
  recorder::RecordLaunch(launch);
  std::thread([] {
    MemoryRecord other;
    other.seq = recorder::NextSeq();
    other.api = proto::Api::kCuMemAlloc;
    other.kind = proto::MemoryKind::kDevice;
    other.action = proto::Action::kAlloc;
    other.size = 4096;
    other.address = 0x7f0000300000ull;
    recorder::RecordMemory(other);
  }).join();
  MemoryRecord failed;
  failed.seq = recorder::NextSeq();
  failed.api = proto::Api::kCudaMalloc;
  failed.kind = proto::MemoryKind::kDevice;
  failed.action = proto::Action::kAllocFailed;
  failed.size = 1ull << 40;
  failed.result = 2;
  failed.free_bytes = 1000 + static_cast<uint64_t>(iteration);
  failed.total_bytes = 4000;
  recorder::RecordMemory(failed);
  RecordFreeOf(alloc);
}

constexpr int kIterations = 4;

// Records the loop into `path`, GPUMEM_EVENT_REFS as given, in a process of its own (the recorder
// is one per process, and this test binary's other test has one already): a "threadsafe" death
// test runs its statement in a fresh run of this binary.
void RecordLoopInChild(
    const std::string& path, const char* event_refs, void (*record)() = [] {
      for (int i = 0; i < kIterations; ++i) RecordIteration(i);
    }) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GPUMEM_OUTPUT", path.c_str(), 1);
        setenv("GPUMEM_EVENT_REFS", event_refs, 1);
        unsetenv("GPUMEM_SESSION_PID");
        recorder::Init(LoaderFunctions{&dlopen, &dlsym});
        record();
        recorder::Finish();
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A file's top-level fields in file order, framed by hand: libprotobuf's Trace keeps its two
// repeated fields apart, and only the file's order says what a reference follows.
struct TopLevel {
  std::vector<TracePacket> packets;  // memory and launch events, references expanded
  Header header;
  int references = 0;
  int full_with_writer = 0;
  int writers_started = 0;
};

uint64_t ReadVarint(const std::string& bytes, size_t* at) {
  uint64_t value = 0;
  for (int shift = 0; *at < bytes.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[(*at)++]);
    value |= uint64_t{byte & 0x7Fu} << shift;
    if (byte < 0x80) break;
  }
  return value;
}

int64_t FromZigZag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

// What the schema's comments say a reference stands for, written out independently of the
// readers in report/: per writer, its slots' events, its previous seq, timestamp and correlation
// id, and (format 3) its address table, previous address and each slot's last launch pointers.
class Expander {
 public:
  void Full(TracePacket packet, TopLevel* out) {
    const bool launch = packet.has_launch();
    const uint32_t writer = launch ? packet.launch().writer() : packet.memory().writer();
    const uint32_t slot =
        launch ? packet.launch().template_slot() : packet.memory().template_slot();
    const bool started =
        launch ? packet.launch().writer_started() : packet.memory().writer_started();
    if (launch) {
      packet.mutable_launch()->clear_writer();
      packet.mutable_launch()->clear_template_slot();
      packet.mutable_launch()->clear_writer_started();
    } else {
      packet.mutable_memory()->clear_writer();
      packet.mutable_memory()->clear_template_slot();
      packet.mutable_memory()->clear_writer_started();
    }
    if (writer != 0) {
      ++out->full_with_writer;
      out->writers_started += started;
      State& state = states_[writer];
      if (started) state.addresses = State{}.addresses;
      Store(&state, slot, packet);
      state.seq = launch ? packet.launch().seq() : packet.memory().seq();
      state.timestamp = launch ? packet.launch().timestamp_ns() : packet.memory().timestamp_ns();
      if (launch) state.correlation = packet.launch().correlation_id();
      if (slot != 0) slots_[{writer, slot}] = packet;
    }
    out->packets.push_back(packet);
  }
  void Ref(const EventRef& ref, TopLevel* out) {
    ++out->references;
    State& state = states_[ref.writer()];
    state.seq += 1 + static_cast<uint64_t>(ref.seq_delta());
    state.timestamp += static_cast<uint64_t>(ref.time_delta());
    state.correlation += static_cast<uint64_t>(ref.correlation_delta());
    auto found = slots_.find({ref.writer(), ref.slot()});
    ASSERT_NE(found, slots_.end()) << "a reference to a slot never defined";
    TracePacket packet = found->second;
    if (packet.has_launch()) {
      packet.mutable_launch()->set_seq(state.seq);
      packet.mutable_launch()->set_timestamp_ns(state.timestamp);
      packet.mutable_launch()->set_correlation_id(state.correlation);
    } else {
      packet.mutable_memory()->set_seq(state.seq);
      packet.mutable_memory()->set_timestamp_ns(state.timestamp);
    }
    out->packets.push_back(packet);
  }
  // A compact_ref (format 3): head, deltas, then one code per address value.
  void Compact(const std::string& body, TopLevel* out) {
    ++out->references;
    size_t at = 0;
    const uint64_t head = ReadVarint(body, &at);
    const uint32_t writer = static_cast<uint32_t>((head >> 14) + 1);
    const uint32_t slot = static_cast<uint32_t>((head >> 2 & 4095) + 1);
    State& state = states_[writer];
    state.seq += 1 + static_cast<uint64_t>((head & 1) != 0 ? FromZigZag(ReadVarint(body, &at)) : 0);
    state.timestamp += static_cast<uint64_t>(FromZigZag(ReadVarint(body, &at)));
    if ((head & 2) != 0)
      state.correlation += static_cast<uint64_t>(FromZigZag(ReadVarint(body, &at)));
    auto found = slots_.find({writer, slot});
    ASSERT_NE(found, slots_.end()) << "a reference to a slot never defined";
    TracePacket packet = found->second;
    const size_t count = packet.has_launch() ? packet.launch().pointer_args_size() : 1;
    const std::vector<uint64_t>& last = state.last_launch[slot];
    std::vector<uint64_t> values;
    uint64_t previous = state.previous;
    while (values.size() < count) {
      const uint64_t code = ReadVarint(body, &at);
      if (code < 128) {
        values.push_back(state.addresses[code]);
      } else if ((code - 128) % 2 == 0) {
        for (uint64_t n = (code - 128) / 2 + 1; n > 0; --n)
          values.push_back(last.at(values.size()));
      } else {
        values.push_back(previous + static_cast<uint64_t>(FromZigZag((code - 128) >> 1)));
      }
      previous = values.back();
    }
    EXPECT_EQ(at, body.size());
    if (packet.has_launch()) {
      packet.mutable_launch()->set_seq(state.seq);
      packet.mutable_launch()->set_timestamp_ns(state.timestamp);
      packet.mutable_launch()->set_correlation_id(state.correlation);
      for (size_t i = 0; i < count; ++i) packet.mutable_launch()->set_pointer_args(i, values[i]);
    } else {
      packet.mutable_memory()->set_seq(state.seq);
      packet.mutable_memory()->set_timestamp_ns(state.timestamp);
      packet.mutable_memory()->set_address(values[0]);
    }
    Store(&state, slot, packet);
    out->packets.push_back(packet);
  }

 private:
  struct State {
    uint64_t seq = 0;
    uint64_t timestamp = 0;
    uint64_t correlation = 0;
    std::array<uint64_t, 128> addresses{};
    uint64_t previous = 0;
    std::map<uint32_t, std::vector<uint64_t>> last_launch;  // by slot
  };
  // The event's address values into the table, in order; a launch's as its slot's last.
  static void Store(State* state, uint32_t slot, const TracePacket& packet) {
    std::vector<uint64_t> values;
    if (packet.has_launch()) {
      values.assign(packet.launch().pointer_args().begin(), packet.launch().pointer_args().end());
      state->last_launch[slot] = values;
    } else {
      values.push_back(packet.memory().address());
    }
    for (uint64_t value : values) {
      state->addresses[((value ^ (value >> 17)) * 0x9e3779b97f4a7c15ull) >> 57] = value;
      state->previous = value;
    }
  }
  std::map<uint32_t, State> states_;
  std::map<std::pair<uint32_t, uint32_t>, TracePacket> slots_;
};

TopLevel ReadTopLevel(const std::string& bytes) {
  TopLevel top;
  Expander expander;
  for (size_t at = 0; at < bytes.size();) {
    const auto tag = static_cast<uint8_t>(bytes[at++]);
    if (tag == 0) continue;  // the unused tail
    const uint64_t length = ReadVarint(bytes, &at);
    const std::string body = bytes.substr(at, length);
    at += length;
    if (tag == 0x12) {
      EventRef ref;
      EXPECT_TRUE(ref.ParseFromString(body));
      expander.Ref(ref, &top);
      continue;
    }
    if (tag == 0x1A) {
      expander.Compact(body, &top);
      continue;
    }
    EXPECT_EQ(tag, 0x0A);
    TracePacket packet;
    EXPECT_TRUE(packet.ParseFromString(body));
    if (packet.has_header()) top.header = packet.header();
    if (packet.has_memory() || packet.has_launch()) expander.Full(packet, &top);
  }
  return top;
}

// The same loop recorded with references and without: every event a reference stands for is the
// event written in full, field for field (but the thread ids and times of two processes).
TEST(Recorder, EventReferencesResolveToTheEventsAFullEncodingWrites) {
  // The death tests' runs of this binary take the path from the environment this run sets.
  if (getenv("WIRE_FORMAT_TEST_STEM") == nullptr) {
    const std::string stem =
        (std::filesystem::temp_directory_path() / ("wire_format_refs-" + std::to_string(getpid())))
            .string();
    setenv("WIRE_FORMAT_TEST_STEM", stem.c_str(), 1);
  }
  const std::string stem = getenv("WIRE_FORMAT_TEST_STEM");
  RecordLoopInChild(stem + "-refs.trace", "1");
  RecordLoopInChild(stem + "-full.trace", "0");
  std::ifstream refs_in(stem + "-refs.trace", std::ios::binary);
  std::ifstream full_in(stem + "-full.trace", std::ios::binary);
  std::stringstream refs_bytes;
  std::stringstream full_bytes;
  refs_bytes << refs_in.rdbuf();
  full_bytes << full_in.rdbuf();
  std::filesystem::remove(stem + "-refs.trace");
  std::filesystem::remove(stem + "-full.trace");

  // Both parse as one Trace (what protoc --decode needs).
  Trace whole;
  ASSERT_TRUE(whole.ParseFromString(refs_bytes.str()));
  EXPECT_GT(whole.compact_ref_size(), 0);
  const TopLevel refs = ReadTopLevel(refs_bytes.str());
  const TopLevel full = ReadTopLevel(full_bytes.str());
  EXPECT_EQ(refs.header.format_version(), 3u);
  EXPECT_EQ(full.header.format_version(), 1u);
  EXPECT_EQ(full.references, 0);
  EXPECT_EQ(full.full_with_writer, 0);  // exactly format 1: no writer fields
  // Each registration's first event restarts its writer's address table: the main thread's and
  // each iteration's new thread's.
  EXPECT_EQ(refs.writers_started, 1 + kIterations);
  // The main thread's allocation, launch and free after the first iteration; the other threads'
  // allocations are each the first event of their thread, and failed allocations never repeat.
  EXPECT_EQ(refs.references, 3 * (kIterations - 1));
  ASSERT_EQ(refs.packets.size(), 5u * kIterations);
  ASSERT_EQ(full.packets.size(), refs.packets.size());
  std::map<uint32_t, uint64_t> last_time;  // per thread: times never go back
  for (size_t i = 0; i < refs.packets.size(); ++i) {
    TracePacket expanded = refs.packets[i];
    TracePacket written = full.packets[i];
    const uint32_t tid = expanded.has_launch() ? expanded.launch().tid() : expanded.memory().tid();
    const uint64_t time =
        expanded.has_launch() ? expanded.launch().timestamp_ns() : expanded.memory().timestamp_ns();
    EXPECT_GE(time, last_time[tid]) << i;
    EXPECT_GT(time, refs.header.start_time_mono_ns()) << i;
    last_time[tid] = time;
    for (TracePacket* packet : {&expanded, &written}) {
      if (packet->has_launch()) {
        packet->mutable_launch()->clear_tid();
        packet->mutable_launch()->clear_timestamp_ns();
      } else {
        packet->mutable_memory()->clear_tid();
        packet->mutable_memory()->clear_timestamp_ns();
      }
    }
    EXPECT_EQ(expanded.ShortDebugString(), written.ShortDebugString()) << i;
  }
  EXPECT_LT(refs_bytes.str().size(), full_bytes.str().size());
}

// A program's few hundred templates share a table of 4096 slots, a set of four per hash: where two
// of them fell on one slot, both were written in full at every use. Here 300 allocations of
// different sizes (templates), and their frees, repeat three times: after the first round nearly
// every event is a reference, and each still stands for the event written in full. The sets
// depend on the thread's salt: in one run of a hundred, five templates fall in one set and a few
// of its events are full again (kSpareFull); with a slot per hash about forty would be.
constexpr uint64_t kTemplates = 300;
constexpr int kSpareFull = 10;
constexpr int kRounds = 3;

void RecordManyTemplates() {
  for (int round = 0; round < kRounds; ++round) {
    for (uint64_t i = 0; i < kTemplates; ++i) {
      MemoryRecord alloc;
      alloc.seq = recorder::NextSeq();
      alloc.api = proto::Api::kCudaMalloc;
      alloc.kind = proto::MemoryKind::kDevice;
      alloc.action = proto::Action::kAlloc;
      alloc.size = 4096 * (i + 1);
      alloc.address = 0x7f0000000000ull + (i << 24);
      alloc.stack_id = 5;
      recorder::RecordMemory(alloc);
      RecordFreeOf(alloc);
    }
  }
}

TEST(Recorder, TemplatesThatShareASlotAreStillReferences) {
  if (getenv("WIRE_FORMAT_TEST_STEM") == nullptr) {
    const std::string stem = (std::filesystem::temp_directory_path() /
                              ("wire_format_templates-" + std::to_string(getpid())))
                                 .string();
    setenv("WIRE_FORMAT_TEST_STEM", stem.c_str(), 1);
  }
  const std::string stem = getenv("WIRE_FORMAT_TEST_STEM");
  RecordLoopInChild(stem + "-refs.trace", "1", RecordManyTemplates);
  RecordLoopInChild(stem + "-full.trace", "0", RecordManyTemplates);
  std::stringstream refs_bytes;
  std::stringstream full_bytes;
  refs_bytes << std::ifstream(stem + "-refs.trace", std::ios::binary).rdbuf();
  full_bytes << std::ifstream(stem + "-full.trace", std::ios::binary).rdbuf();
  std::filesystem::remove(stem + "-refs.trace");
  std::filesystem::remove(stem + "-full.trace");
  const TopLevel refs = ReadTopLevel(refs_bytes.str());
  const TopLevel full = ReadTopLevel(full_bytes.str());
  // The first round's allocations and its first free define templates; hardly anything else does.
  const int defining = static_cast<int>(kTemplates) + 1;
  EXPECT_GE(refs.full_with_writer, defining);
  EXPECT_LE(refs.full_with_writer, defining + kSpareFull);
  EXPECT_EQ(refs.references + refs.full_with_writer, static_cast<int>(2 * kTemplates * kRounds));
  ASSERT_EQ(refs.packets.size(), full.packets.size());
  for (size_t i = 0; i < refs.packets.size(); ++i) {
    TracePacket expanded = refs.packets[i];
    TracePacket written = full.packets[i];
    for (TracePacket* packet : {&expanded, &written}) {
      packet->mutable_memory()->clear_tid();
      packet->mutable_memory()->clear_timestamp_ns();
    }
    EXPECT_EQ(expanded.ShortDebugString(), written.ShortDebugString()) << i;
  }
}

}  // namespace
}  // namespace gpumem
