#include "report/trace/event_templates.h"

#include "report/trace/varint.h"

namespace gpumem::report {

namespace {

// The varint at *p (before end) into *value, *p past it; false when there is none. Only for a
// compact_ref's body, which the reader's slack follows (varint::ReadPadded).
[[gnu::always_inline]] inline bool TakeVarint(const uint8_t** p, const uint8_t* end,
                                              uint64_t* value) {
  const uint8_t* next = varint::ReadPadded(*p, end, value);
  if (next == nullptr) return false;
  *p = next;
  return true;
}

}  // namespace

EventTemplates::Writer* EventTemplates::FindOtherWriter(uint32_t id, bool add) {
  if (last_writer_ != nullptr && last_writer_id_ == id) return last_writer_;
  Writer* writer = nullptr;
  auto it = writers_.find(id);
  if (it != writers_.end()) {
    writer = it->second.get();
  } else if (add && writers_.size() < max_writers_) {
    writer = writers_.emplace(id, std::make_unique<Writer>()).first->second.get();
    if (direct_slot_writers_ < kMaxDirectWriters) {
      ++direct_slot_writers_;
      writer->direct.assign(kDirectSlots, nullptr);
    }
    if (id < kDirectWriters) {
      if (id >= direct_writers_.size()) direct_writers_.resize(id + 1, nullptr);
      direct_writers_[id] = writer;
    }
  } else {
    return nullptr;
  }
  last_writer_ = writer;
  last_writer_id_ = id;
  return writer;
}

EventTemplates::Template* EventTemplates::NoteFull(Writer* writer, uint64_t seq, uint64_t timestamp,
                                                   uint32_t template_slot) {
  writer->seq = seq;
  writer->timestamp = timestamp;
  if (template_slot == 0 || template_slot > kMaxTemplateSlots) return nullptr;
  auto [it, added] = writer->slots.try_emplace(template_slot);
  if (added) {
    if (++templates_ > max_templates_) {
      writer->slots.erase(it);
      --templates_;
      return nullptr;
    }
    it->second = std::make_unique<Template>();
    if (template_slot < writer->direct.size()) writer->direct[template_slot] = it->second.get();
  }
  return it->second.get();
}

void EventTemplates::Writer::StartAddresses() {
  for (LaunchPointers& entry : launch_pointers) entry.slot = 0;
  addresses.fill(0);
  known.set();
  last_address = 0;
  last_address_known = true;
}

// This, DecodeAddress and Advance run on every reference: always inlined, since the link-time
// optimizer left each a call of its own.
[[gnu::always_inline]] inline void EventTemplates::Writer::StoreAddress(uint64_t value) {
  const size_t index = proto::AddressIndex(value);
  addresses[index] = value;
  known.set(index);
  last_address = value;
  last_address_known = true;
}

void EventTemplates::Writer::ForgetAddresses() {
  known.reset();
  last_address_known = false;
}

[[gnu::always_inline]] inline bool EventTemplates::Writer::DecodeAddress(uint64_t code,
                                                                         uint64_t base,
                                                                         bool base_known,
                                                                         uint64_t* value) const {
  if (code < kAddressEntries) {
    if (!known.test(code)) return false;
    *value = addresses[code];
    return true;
  }
  if (!base_known) return false;
  // A literal (odd): the difference from `base`, wrapping as the recorder's.
  *value = base + static_cast<uint64_t>(proto::FromZigZag((code - kAddressEntries) >> 1));
  return true;
}

void EventTemplates::NoteMemory(const MemoryEventFields& event, bool writer_started) {
  Writer* writer = FindWriter(event.writer, /*add=*/true);
  if (writer == nullptr) return;  // one writer too many
  Template* defined = NoteFull(writer, event.seq, event.timestamp_ns, event.template_slot);
  if (writer_started) writer->StartAddresses();
  writer->StoreAddress(event.address);
  if (defined == nullptr) return;
  defined->launch = false;
  defined->launch_event.Clear();
  defined->memory = event;
  defined->memory.writer = 0;
  defined->memory.template_slot = 0;
}

void EventTemplates::NoteLaunch(const LaunchEvent& event) {
  Writer* found = FindWriter(event.writer(), /*add=*/true);
  if (found == nullptr) return;  // one writer too many
  Template* defined = NoteFull(found, event.seq(), event.timestamp_ns(), event.template_slot());
  Writer& writer = *found;
  writer.correlation = event.correlation_id();
  if (event.writer_started()) writer.StartAddresses();
  for (uint64_t pointer : event.pointer_args()) writer.StoreAddress(pointer);
  if (event.template_slot() != 0) {
    Writer::LaunchPointers& last =
        writer.launch_pointers[(event.template_slot() - 1) % kLaunchPointerEntries];
    last.slot = event.template_slot();
    last.pointers.assign(event.pointer_args().begin(), event.pointer_args().end());
  }
  if (defined == nullptr) return;
  defined->launch = true;
  defined->memory = MemoryEventFields{};
  defined->launch_event = event;
  defined->launch_event.clear_writer();
  defined->launch_event.clear_template_slot();
}

const EventTemplates::Template* EventTemplates::Resolve(const EventRefFields& ref, uint64_t* seq,
                                                        uint64_t* timestamp,
                                                        uint64_t* correlation) {
  // Unknown writers are not added: a damaged trace's references cannot grow the table.
  Writer* writer = FindWriter(ref.writer, /*add=*/false);
  if (writer == nullptr) return nullptr;
  return Advance(*writer, ref, seq, timestamp, correlation);
}

[[gnu::always_inline]] inline const EventTemplates::Template* EventTemplates::Advance(
    Writer& writer, const EventRefFields& ref, uint64_t* seq, uint64_t* timestamp,
    uint64_t* correlation) {
  // Unsigned arithmetic: the recorder's differences wrap the same way.
  writer.seq += 1 + static_cast<uint64_t>(ref.seq_delta);
  writer.timestamp += static_cast<uint64_t>(ref.time_delta);
  // A memory event's reference carries no correlation delta (0): the previous launch's stays.
  writer.correlation += static_cast<uint64_t>(ref.correlation_delta);
  *seq = writer.seq;
  *timestamp = writer.timestamp;
  *correlation = writer.correlation;
  if (ref.slot < writer.direct.size()) return writer.direct[ref.slot];
  auto slot = writer.slots.find(ref.slot);
  return slot == writer.slots.end() ? nullptr : slot->second.get();
}

bool EventTemplates::DecodeOneAddress(Writer* writer, const uint8_t* p, const uint8_t* end,
                                      uint64_t* value) {
  uint64_t code = 0;
  if (!TakeVarint(&p, end, &code) || p != end) return false;
  // A run of a launch's pointers: the general path.
  if (code >= kAddressEntries && (code - kAddressEntries) % 2 == 0) return false;
  if (!writer->DecodeAddress(code, writer->last_address, writer->last_address_known, value)) {
    return false;
  }
  writer->StoreAddress(*value);
  return true;
}

bool EventTemplates::DecodeAddresses(Writer* writer, uint32_t slot, const uint8_t* p,
                                     const uint8_t* end, size_t count) {
  addresses_.clear();
  Writer::LaunchPointers& last = writer->launch_pointers[(slot - 1) % kLaunchPointerEntries];
  const std::vector<uint64_t>* same = last.slot == slot ? &last.pointers : nullptr;
  // The values are decoded against the table as it was before the event: the recorder stores
  // them only after (a literal's base moves on with each value, though).
  uint64_t last_address = writer->last_address;
  bool last_known = writer->last_address_known;
  bool resolved = true;
  while (addresses_.size() < count && resolved) {
    uint64_t code = 0;
    if (!TakeVarint(&p, end, &code)) return false;
    if (code >= kAddressEntries && (code - kAddressEntries) % 2 == 0) {
      // A run of values equal to the slot's last launch's.
      const uint64_t run = (code - kAddressEntries) / 2 + 1;
      const size_t from = addresses_.size();
      if (run > count - from) return false;
      resolved = same != nullptr && same->size() >= from + run;
      if (!resolved) break;
      addresses_.insert(addresses_.end(), same->begin() + static_cast<ptrdiff_t>(from),
                        same->begin() + static_cast<ptrdiff_t>(from + run));
    } else {
      uint64_t value = 0;
      resolved = writer->DecodeAddress(code, last_address, last_known, &value);
      if (!resolved) break;
      addresses_.push_back(value);
    }
    last_address = addresses_.back();
    last_known = true;
  }
  if (!resolved) {
    // It stored values whose entries are not known: nothing of the table can be trusted.
    writer->ForgetAddresses();
    last.slot = 0;
    return true;
  }
  if (p != end) return false;
  for (uint64_t value : addresses_) writer->StoreAddress(value);
  return true;
}

EventTemplates::CompactResult EventTemplates::ResolveCompact(std::string_view body, Resolved* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(body.data());
  const uint8_t* const end = p + body.size();
  uint64_t head = 0;
  uint64_t seq_delta = 0;
  uint64_t time_delta = 0;
  uint64_t correlation_delta = 0;
  if (!TakeVarint(&p, end, &head)) return CompactResult::kMalformed;
  if ((head & 1) != 0 && !TakeVarint(&p, end, &seq_delta)) return CompactResult::kMalformed;
  if (!TakeVarint(&p, end, &time_delta)) return CompactResult::kMalformed;
  if ((head & 2) != 0 && !TakeVarint(&p, end, &correlation_delta)) {
    return CompactResult::kMalformed;
  }
  EventRefFields ref;
  ref.writer = static_cast<uint32_t>((head >> 14) + 1);
  ref.slot = static_cast<uint32_t>((head >> 2 & 0xFFF) + 1);
  ref.seq_delta = proto::FromZigZag(seq_delta);
  ref.time_delta = proto::FromZigZag(time_delta);
  ref.correlation_delta = proto::FromZigZag(correlation_delta);
  Writer* writer = FindWriter(ref.writer, /*add=*/false);
  out->found = nullptr;
  if (writer == nullptr) return CompactResult::kUnresolved;
  out->found = Advance(*writer, ref, &out->seq, &out->timestamp, &out->correlation);
  Writer::LaunchPointers& last = writer->launch_pointers[(ref.slot - 1) % kLaunchPointerEntries];
  if (out->found == nullptr) {
    // Its address codes, unknown in number, changed the table (and the slot's last launch).
    writer->ForgetAddresses();
    last.slot = 0;
    return CompactResult::kUnresolved;
  }
  const bool launch = out->found->launch;
  out->addresses = nullptr;
  if (!launch && DecodeOneAddress(writer, p, end, &out->address)) return CompactResult::kResolved;
  const size_t count = launch ? out->found->launch_event.pointer_args_size() : 1;
  if (!DecodeAddresses(writer, ref.slot, p, end, count)) return CompactResult::kMalformed;
  if (addresses_.size() != count) {
    out->found = nullptr;
    return CompactResult::kUnresolved;
  }
  if (launch) {
    last.slot = ref.slot;
    last.pointers = addresses_;
    out->addresses = &addresses_;
  } else {
    out->address = addresses_[0];
  }
  return CompactResult::kResolved;
}

void ExpandLaunchRef(const LaunchEvent& launch_template, const EventTemplates::Resolved& resolved,
                     LaunchEvent* launch) {
  const LaunchEvent& from = launch_template;
  // Looked up once: GetReflection() assigns the descriptors behind a once-flag on every call,
  // which cost more than the rest of the expansion.
  static const google::protobuf::Reflection* const reflection = LaunchEvent::GetReflection();
  if (!reflection->GetUnknownFields(from).empty() ||
      !reflection->GetUnknownFields(*launch).empty()) {
    *launch = from;
  } else {
    // Every field of LaunchEvent (tests/report/trace/event_templates_test.cc checks that none is
    // left out); those the reference gives are set below.
    launch->set_tid(from.tid());
    launch->set_device(from.device());
    launch->set_api(from.api());
    launch->set_kernel_id(from.kernel_id());
    launch->set_grid_x(from.grid_x());
    launch->set_grid_y(from.grid_y());
    launch->set_grid_z(from.grid_z());
    launch->set_block_x(from.block_x());
    launch->set_block_y(from.block_y());
    launch->set_block_z(from.block_z());
    launch->set_shared_memory_bytes(from.shared_memory_bytes());
    launch->set_stream(from.stream());
    launch->set_stack_id(from.stack_id());
    launch->set_result(from.result());
    launch->set_graph(from.graph());
    launch->set_from_cupti(from.from_cupti());
    launch->set_params_unknown(from.params_unknown());
    launch->set_writer(from.writer());
    launch->set_template_slot(from.template_slot());
    launch->set_writer_started(from.writer_started());
    if (resolved.addresses == nullptr) *launch->mutable_pointer_args() = from.pointer_args();
  }
  launch->set_seq(resolved.seq);
  launch->set_timestamp_ns(resolved.timestamp);
  launch->set_correlation_id(resolved.correlation);
  if (resolved.addresses != nullptr) {
    const std::vector<uint64_t>& pointers = *resolved.addresses;
    launch->mutable_pointer_args()->Assign(pointers.begin(), pointers.end());
  }
}

}  // namespace gpumem::report
