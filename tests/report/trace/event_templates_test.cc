// Format 2's event references (core/trace.proto, EventRef), read back through TraceFile: expanded
// to the events they stand for, on the packet visitor's path and on the memory sink's, and
// damage around them counted, never a crash.
#include "report/trace/event_templates.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/trace/event_stream.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::Framed;
using testing::HeaderPacket;
using testing::UniqueTempPath;
using testing::Varint;

// A full memory event that defines `slot` (0: none) of `writer`.
TracePacket Define(uint32_t writer, uint32_t slot, uint64_t seq, uint64_t time, uint64_t address,
                   uint32_t tid = 10) {
  TracePacket packet;
  MemoryEvent* event = packet.mutable_memory();
  event->set_seq(seq);
  event->set_timestamp_ns(time);
  event->set_tid(tid);
  event->set_api(CUDA_MALLOC);
  event->set_kind(DEVICE);
  event->set_action(ALLOC);
  event->set_size(4096);
  event->set_address(address);
  event->set_stack_id(7);
  event->set_writer(writer);
  event->set_template_slot(slot);
  return packet;
}

TracePacket DefineLaunch(uint32_t writer, uint32_t slot, uint64_t seq, uint64_t time,
                         uint64_t correlation) {
  TracePacket packet;
  LaunchEvent* launch = packet.mutable_launch();
  launch->set_seq(seq);
  launch->set_timestamp_ns(time);
  launch->set_tid(10);
  launch->set_kernel_id(3);
  launch->set_grid_x(4);
  launch->set_correlation_id(correlation);
  launch->add_pointer_args(0x7000);
  launch->set_writer(writer);
  launch->set_template_slot(slot);
  return packet;
}

std::string Ref(uint32_t writer, uint32_t slot, int64_t seq_delta, int64_t time_delta,
                int64_t correlation_delta = 0) {
  EventRef ref;
  ref.set_writer(writer);
  ref.set_slot(slot);
  ref.set_seq_delta(seq_delta);
  ref.set_time_delta(time_delta);
  ref.set_correlation_delta(correlation_delta);
  const std::string body = ref.SerializeAsString();
  return "\x12" + Varint(body.size()) + body;
}

// The event as the visitor gets it, without what differs between a definition and a reference.
struct Seen {
  bool launch = false;
  uint64_t seq = 0;
  uint64_t time = 0;
  uint64_t address = 0;      // memory
  uint64_t correlation = 0;  // launch
  uint32_t tid = 0;
  bool event_ref = false;
  bool operator==(const Seen&) const = default;
};

class EventTemplatesTest : public ::testing::Test {
 protected:
  void Write(const std::string& bytes) { std::ofstream(path_, std::ios::binary) << bytes; }
  void TearDown() override { std::remove(path_.c_str()); }

  // Through the packet visitor, in file order.
  std::vector<Seen> Visit() {
    std::vector<Seen> seen;
    absl::StatusOr<std::unique_ptr<TraceFile>> trace =
        TraceFile::Read(path_, [&](const PacketPosition& position, const TracePacket& packet) {
          if (packet.has_memory()) {
            const MemoryEvent& event = packet.memory();
            EXPECT_EQ(event.writer(), 0u);  // handed on without the writer's fields
            EXPECT_EQ(event.template_slot(), 0u);
            EXPECT_EQ(event.size(), 4096u);
            EXPECT_EQ(event.stack_id(), 7u);
            seen.push_back({false, event.seq(), event.timestamp_ns(), event.address(), 0,
                            event.tid(), position.event_ref});
          } else if (packet.has_launch()) {
            const LaunchEvent& launch = packet.launch();
            EXPECT_EQ(launch.writer(), 0u);
            EXPECT_EQ(launch.kernel_id(), 3u);
            EXPECT_EQ(launch.pointer_args_size(), 1);
            seen.push_back({true, launch.seq(), launch.timestamp_ns(), 0, launch.correlation_id(),
                            launch.tid(), position.event_ref});
          }
        });
    EXPECT_TRUE(trace.ok()) << trace.status();
    if (trace.ok()) file_ = *std::move(trace);
    return seen;
  }

  // Through the memory sink (the hand decoder's path) in seq order, launches beside them.
  std::vector<Seen> Stream() {
    std::vector<Seen> seen;
    absl::StatusOr<std::unique_ptr<TraceFile>> trace = TraceFile::Open(path_);
    EXPECT_TRUE(trace.ok()) << trace.status();
    if (!trace.ok()) return seen;
    StreamMemoryEventsBySeq(
        **trace,
        [&](const MemoryEvent& event) {
          EXPECT_EQ(event.writer(), 0u);
          EXPECT_EQ(event.size(), 4096u);
          seen.push_back(
              {false, event.seq(), event.timestamp_ns(), event.address(), 0, event.tid(), false});
        },
        kReorderWindow, nullptr,
        [&](const LaunchEvent& launch) {
          seen.push_back({true, launch.seq(), launch.timestamp_ns(), 0, launch.correlation_id(),
                          launch.tid(), false});
        });
    file_ = *std::move(trace);
    return seen;
  }

  std::string path_ = UniqueTempPath(".trace");
  std::unique_ptr<TraceFile> file_;
};

TEST_F(EventTemplatesTest, ReferencesExpandToTheEventsTheyStandFor) {
  Write(Framed(HeaderPacket(2)) + Framed(Define(1, 5, 1, 1000, 0xA000)) +
        Framed(DefineLaunch(1, 9, 2, 1500, 100)) + Ref(1, 5, 0, 100) + Ref(1, 9, 0, 50, 2) +
        Framed(Define(2, 5, 5, 1700, 0xB000, 20)) + Ref(1, 5, 1, 10) + Ref(2, 5, 1, -20));
  const std::vector<Seen> expected = {
      {false, 1, 1000, 0xA000, 0, 10, false}, {true, 2, 1500, 0, 100, 10, false},
      {false, 3, 1600, 0xA000, 0, 10, true},  {true, 4, 1650, 0, 102, 10, true},
      {false, 5, 1700, 0xB000, 0, 20, false}, {false, 6, 1660, 0xA000, 0, 10, true},
      {false, 7, 1680, 0xB000, 0, 20, true},
  };
  EXPECT_EQ(Visit(), expected);
  EXPECT_EQ(file_->event_ref_count(), 4u);
  EXPECT_EQ(file_->memory_event_count(), 5u);
  EXPECT_EQ(file_->launch_event_count(), 2u);
  EXPECT_FALSE(file_->end().damaged()) << file_->end().Describe();

  std::vector<Seen> by_seq = expected;
  for (Seen& event : by_seq) event.event_ref = false;
  EXPECT_EQ(Stream(), by_seq);
  EXPECT_EQ(file_->event_ref_count(), 4u);
}

// A thread's state, with its writer number, is reused by a thread started after it ended: its
// first events define the slots anew.
TEST_F(EventTemplatesTest, AReusedWriterRedefinesItsSlots) {
  Write(Framed(HeaderPacket(2)) + Framed(Define(1, 5, 1, 1000, 0xA000, 10)) + Ref(1, 5, 0, 10) +
        Framed(Define(1, 5, 3, 2000, 0xC000, 11)) + Ref(1, 5, 0, 10));
  const std::vector<Seen> expected = {
      {false, 1, 1000, 0xA000, 0, 10, false},
      {false, 2, 1010, 0xA000, 0, 10, true},
      {false, 3, 2000, 0xC000, 0, 11, false},
      {false, 4, 2010, 0xC000, 0, 11, true},
  };
  EXPECT_EQ(Visit(), expected);
}

// A reference to a slot no event defined is counted as damage, in one line, and not visited.
TEST_F(EventTemplatesTest, AReferenceToAnUnknownSlotIsDamage) {
  const std::string before = Framed(HeaderPacket(2)) + Framed(Define(1, 5, 1, 1000, 0xA000));
  Write(before + Ref(1, 6, 0, 10) + Ref(3, 1, 0, 10) + Ref(1, 5, 1, 10));
  // The unknown slot's reference still moves its writer on: the next one lands on seq 4.
  const std::vector<Seen> expected = {
      {false, 1, 1000, 0xA000, 0, 10, false},
      {false, 4, 1020, 0xA000, 0, 10, true},
  };
  EXPECT_EQ(Visit(), expected);
  const TraceEndStatus& end = file_->end();
  EXPECT_TRUE(end.damaged());
  EXPECT_EQ(end.unresolved_refs, 2u);
  EXPECT_EQ(end.ErrorLine(path_),
            path_ + ": 2 event reference(s) to a template lost with damaged data (first at byte " +
                std::to_string(before.size()) + ")");
  EXPECT_EQ(Stream().size(), 2u);
}

// A definition whose writer died half-way (its reserved space zeros) does not parse: from there on
// no writer's templates are trusted (the lost packet may have redefined any slot of any writer),
// until full events define them again.
TEST_F(EventTemplatesTest, ADefinitionTornInTheMiddleLosesTheReferencesAfterIt) {
  std::string torn = Framed(Define(1, 6, 3, 1200, 0xD000));
  std::fill(torn.begin() + 6, torn.end(), '\0');
  Write(Framed(HeaderPacket(2)) + Framed(Define(1, 5, 1, 1000, 0xA000)) + Ref(1, 5, 0, 100) + torn +
        Ref(1, 6, 0, 10) + Ref(1, 5, 0, 10) + Framed(Define(2, 1, 6, 1500, 0xB000, 20)) +
        Ref(2, 1, 0, 5));
  const std::vector<Seen> expected = {
      {false, 1, 1000, 0xA000, 0, 10, false},
      {false, 2, 1100, 0xA000, 0, 10, true},
      {false, 6, 1500, 0xB000, 0, 20, false},
      {false, 7, 1505, 0xB000, 0, 20, true},
  };
  EXPECT_EQ(Visit(), expected);
  const TraceEndStatus& end = file_->end();
  EXPECT_EQ(end.unparseable_packets, 1u);
  EXPECT_EQ(end.unresolved_refs, 2u);
  EXPECT_NE(end.Describe().find("1 packet(s) did not parse"), std::string::npos);
  EXPECT_NE(end.Describe().find("2 event reference(s) to a template lost"), std::string::npos);
  EXPECT_EQ(Stream().size(), 4u);
}

// A file cut inside a reference (a crash): every complete event before it is read.
TEST_F(EventTemplatesTest, AFileCutInsideAReferenceKeepsWhatCameBefore) {
  const std::string last = Ref(1, 5, 0, 10);
  Write(Framed(HeaderPacket(2)) + Framed(Define(1, 5, 1, 1000, 0xA000)) + Ref(1, 5, 0, 100) +
        last.substr(0, last.size() - 2));
  EXPECT_EQ(Visit().size(), 2u);
  EXPECT_EQ(file_->end().framing.kind, TraceEnd::Kind::kTorn);
  EXPECT_EQ(file_->end().unresolved_refs, 0u);
}

// Version-1 traces hold no references and read as they always did (TraceFileTest covers them);
// a trace of a newer format is refused in one line.
TEST_F(EventTemplatesTest, FormatsTwoAndThreeAreReadFormatFourIsNot) {
  Write(Framed(HeaderPacket(2)));
  EXPECT_TRUE(TraceFile::Open(path_).ok());
  Write(Framed(HeaderPacket(3)));
  EXPECT_TRUE(TraceFile::Open(path_).ok());
  Write(Framed(HeaderPacket(4)));
  EXPECT_FALSE(TraceFile::Open(path_).ok());
}

uint64_t ZigZag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

// A compact_ref (format 3) of writer 1's `slot`, one time unit on, seq on by one, with `codes`.
std::string Compact(uint32_t slot, const std::vector<uint64_t>& codes) {
  std::string body = Varint(uint64_t{slot - 1} << 2) + Varint(ZigZag(1));
  for (uint64_t code : codes) body += Varint(code);
  return "\x1a" + Varint(body.size()) + body;
}

size_t Entry(uint64_t address) { return proto::AddressIndex(address); }
uint64_t Literal(int64_t delta) { return 128 + 2 * ZigZag(delta) + 1; }

TracePacket Started(TracePacket packet) {
  packet.mutable_memory()->set_writer_started(true);
  return packet;
}

// Addresses left out of the template: a hit names the table's entry, a miss is a literal against
// the previous address value; an entry holds the last value stored in it.
TEST_F(EventTemplatesTest, CompactReferencesCodeAddressesAsHitsAndLiterals) {
  const uint64_t a = 0xA000;
  const uint64_t b = 0xA000 + 0x12345;
  uint64_t c = b + 1;  // a value whose entry is a's, found by search: it replaces a there
  while (Entry(c) != Entry(a)) ++c;
  Write(Framed(HeaderPacket(3)) + Framed(Started(Define(1, 5, 1, 1000, a))) +
        Compact(5, {Entry(a)}) + Compact(5, {Literal(0x12345)}) + Compact(5, {Entry(b)}) +
        Compact(5, {Literal(static_cast<int64_t>(c - b))}) + Compact(5, {Entry(c)}));
  const std::vector<Seen> expected = {
      {false, 1, 1000, a, 0, 10, false}, {false, 2, 1001, a, 0, 10, true},
      {false, 3, 1002, b, 0, 10, true},  {false, 4, 1003, b, 0, 10, true},
      {false, 5, 1004, c, 0, 10, true},  {false, 6, 1005, c, 0, 10, true},
  };
  EXPECT_EQ(Visit(), expected);
  EXPECT_FALSE(file_->end().damaged()) << file_->end().Describe();
  std::vector<Seen> by_seq = expected;
  for (Seen& event : by_seq) event.event_ref = false;
  EXPECT_EQ(Stream(), by_seq);
}

// A launch read from a compact reference goes to the launch visitor with its own pointers: the
// launch is written straight into the stream's pool, whose slots the launches before it used.
TEST_F(EventTemplatesTest, CompactLaunchReferencesReachTheLaunchVisitorWithTheirPointers) {
  TracePacket launch = DefineLaunch(1, 9, 1, 1000, 100);
  launch.mutable_launch()->set_writer_started(true);
  launch.mutable_launch()->add_pointer_args(0x9000);
  // Literals count from the value before (the last pointer of the full launch, then each other).
  const uint64_t same_as_last = 128;  // a run of one value equal to the slot's last launch's
  Write(Framed(HeaderPacket(3)) + Framed(launch) + Compact(9, {Literal(0x100), Literal(0x2000)}) +
        Compact(9, {Literal(-0x1000), Entry(0x7000)}) + Compact(9, {same_as_last + 2}));
  absl::StatusOr<std::unique_ptr<TraceFile>> trace = TraceFile::Open(path_);
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::vector<std::vector<uint64_t>> pointers;
  std::vector<uint64_t> seqs;
  const MemoryStreamStats stats = StreamMemoryEventsBySeq(
      **trace, [](const MemoryEvent&) {}, /*window=*/2, nullptr,
      [&](const LaunchEvent& seen) {
        seqs.push_back(seen.seq());
        EXPECT_EQ(seen.kernel_id(), 3u);
        EXPECT_EQ(seen.writer(), 0u);
        pointers.emplace_back(seen.pointer_args().begin(), seen.pointer_args().end());
      });
  EXPECT_EQ(stats.launches, 4u);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3, 4}));
  const std::vector<std::vector<uint64_t>> expected = {
      {0x7000, 0x9000}, {0x9100, 0xB100}, {0xA100, 0x7000}, {0xA100, 0x7000}};
  EXPECT_EQ(pointers, expected);
  EXPECT_EQ((*trace)->launch_event_count(), 4u);
  EXPECT_FALSE((*trace)->end().damaged()) << (*trace)->end().Describe();
}

// After damage a writer's table is unknown: a full event without writer_started puts back only
// its own entry; a reference that needs another entry is counted, never resolved to a guess, and
// (it stored a value this reader cannot place) leaves the whole table unknown until values are
// seen again.
TEST_F(EventTemplatesTest, AfterDamageOnlyAddressesSeenAgainResolve) {
  const uint64_t a = 0xA000;
  const uint64_t b = 0xB000;
  ASSERT_NE(Entry(a), Entry(b));
  std::string torn = Framed(Define(1, 6, 3, 1200, 0xD000));
  std::fill(torn.begin() + 6, torn.end(), '\0');
  Write(Framed(HeaderPacket(3)) + Framed(Started(Define(1, 5, 1, 1000, a))) +
        Compact(5, {Literal(static_cast<int64_t>(b - a))}) + torn +
        Framed(Define(1, 5, 10, 2000, a)) + Compact(5, {Entry(a)}) + Compact(5, {Entry(b)}) +
        Compact(5, {Entry(a)}) + Framed(Define(1, 5, 20, 3000, b)) + Compact(5, {Entry(b)}));
  const std::vector<Seen> seen = Visit();
  ASSERT_EQ(seen.size(), 6u);  // the two references after the damage but the first lost
  EXPECT_EQ(seen[1].address, b);
  EXPECT_EQ(seen[3].address, a);  // the entry the full event put back
  EXPECT_EQ(seen[5].address, b);  // seen again in full
  EXPECT_EQ(file_->end().unresolved_refs, 2u);
  EXPECT_EQ(file_->end().unparseable_packets, 1u);
}

// Whatever a damaged or crafted trace holds, the reader keeps a bounded number of writers and of
// templates: a full event beyond either defines nothing, and references to it stay unresolved.
TEST(EventTemplatesCapTest, WritersAndTemplatesAreCapped) {
  EventTemplates templates(/*max_writers=*/2, /*max_templates=*/3);
  auto define = [&templates](uint32_t writer, uint32_t slot, uint64_t seq) {
    MemoryEventFields event;
    event.seq = seq;
    event.size = 4096;
    event.writer = writer;
    event.template_slot = slot;
    templates.NoteMemory(event, /*writer_started=*/true);
  };
  auto resolves = [&templates](uint32_t writer, uint32_t slot) {
    EventRefFields ref;
    ref.writer = writer;
    ref.slot = slot;
    uint64_t seq = 0, timestamp = 0, correlation = 0;
    return templates.Resolve(ref, &seq, &timestamp, &correlation) != nullptr;
  };
  define(1, 1, 1);
  define(2, 1, 2);
  define(3, 1, 3);  // a third writer: one too many
  EXPECT_TRUE(resolves(1, 1));
  EXPECT_TRUE(resolves(2, 1));
  EXPECT_FALSE(resolves(3, 1));
  define(1, 2, 4);  // the third template
  define(1, 3, 5);  // a fourth: one too many
  define(2, 1, 6);  // a slot defined again is no new template
  EXPECT_TRUE(resolves(1, 2));
  EXPECT_FALSE(resolves(1, 3));
  EXPECT_TRUE(resolves(2, 1));
  templates.Forget();  // after damage nothing is held, and the room is there again
  define(3, 1, 7);
  define(3, 2, 8);
  EXPECT_TRUE(resolves(3, 1));
  EXPECT_TRUE(resolves(3, 2));
}

// Every field of `launch` set, through reflection, to a value that depends on `seed` and on the
// field: a field added to LaunchEvent is set too, so ExpandLaunchRef must copy it.
void FillEveryField(uint64_t seed, LaunchEvent* launch) {
  const google::protobuf::Descriptor* descriptor = LaunchEvent::descriptor();
  const google::protobuf::Reflection* reflection = LaunchEvent::GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    const uint64_t value = seed * 100 + static_cast<uint64_t>(field->number());
    using Type = google::protobuf::FieldDescriptor::CppType;
    if (field->is_repeated()) {
      ASSERT_EQ(field->cpp_type(), Type::CPPTYPE_UINT64) << field->name();
      reflection->ClearField(launch, field);
      for (uint64_t k = 0; k < seed % 3 + 1; ++k) reflection->AddUInt64(launch, field, value + k);
      continue;
    }
    switch (field->cpp_type()) {
      case Type::CPPTYPE_UINT64:
        reflection->SetUInt64(launch, field, value);
        break;
      case Type::CPPTYPE_UINT32:
        reflection->SetUInt32(launch, field, static_cast<uint32_t>(value));
        break;
      case Type::CPPTYPE_INT32:
        reflection->SetInt32(launch, field, static_cast<int32_t>(value));
        break;
      case Type::CPPTYPE_BOOL:
        reflection->SetBool(launch, field, seed % 2 == 1);
        break;
      case Type::CPPTYPE_ENUM:
        reflection->SetEnumValue(launch, field, static_cast<int>(seed % 2 + 1));
        break;
      default:
        FAIL() << "LaunchEvent." << field->name() << ": a type this test does not fill";
    }
  }
}

// A launch slot reused from another launch (every field different) becomes the template with the
// reference's seq, timestamp, correlation id and pointers, and nothing of what it held before.
TEST(ExpandLaunchRefTest, CopiesEveryFieldOfTheTemplateIntoAReusedSlot) {
  for (bool with_pointers : {false, true}) {
    LaunchEvent launch_template;
    FillEveryField(3, &launch_template);  // three pointers
    LaunchEvent slot;
    FillEveryField(4, &slot);  // two pointers
    EventTemplates::Resolved resolved;
    resolved.seq = 7001;
    resolved.timestamp = 7002;
    resolved.correlation = 7003;
    const std::vector<uint64_t> pointers = {0x100, 0x200, 0x300};
    if (with_pointers) resolved.addresses = &pointers;
    ExpandLaunchRef(launch_template, resolved, &slot);

    LaunchEvent expected = launch_template;
    expected.set_seq(7001);
    expected.set_timestamp_ns(7002);
    expected.set_correlation_id(7003);
    if (with_pointers) expected.mutable_pointer_args()->Assign(pointers.begin(), pointers.end());
    EXPECT_EQ(slot.SerializeAsString(), expected.SerializeAsString())
        << "with pointers: " << with_pointers << "\n"
        << slot.DebugString() << "expected:\n"
        << expected.DebugString();
  }
}

// Fields this reader does not know (a newer writer's) come along too, and leave with the next use.
TEST(ExpandLaunchRefTest, UnknownFieldsAreCopiedAndNotLeftBehind) {
  LaunchEvent launch_template;
  FillEveryField(1, &launch_template);
  const google::protobuf::Reflection* reflection = LaunchEvent::GetReflection();
  reflection->MutableUnknownFields(&launch_template)->AddVarint(900, 5);
  LaunchEvent slot;
  EventTemplates::Resolved resolved;
  ExpandLaunchRef(launch_template, resolved, &slot);
  EXPECT_EQ(reflection->GetUnknownFields(slot).field_count(), 1);
  LaunchEvent plain_template;
  FillEveryField(2, &plain_template);
  ExpandLaunchRef(plain_template, resolved, &slot);
  EXPECT_TRUE(reflection->GetUnknownFields(slot).empty());
  EXPECT_EQ(slot.kernel_id(), plain_template.kernel_id());
}

}  // namespace
}  // namespace gpumem::report
