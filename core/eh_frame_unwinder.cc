#include "core/eh_frame_unwinder.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/hot_path.h"
#include "core/self_timing.h"
#include "core/thread_locals.h"

namespace gpumem::eh_frame_unwinder {
namespace {

// SetStop's range as start and size: one unsigned compare a frame.
GPUMEM_HOT_DATA std::atomic<uintptr_t> g_stop_start{0};
GPUMEM_HOT_DATA std::atomic<uintptr_t> g_stop_size{0};

void StoreStop(uintptr_t start, uintptr_t end) {
  g_stop_start.store(start, std::memory_order_relaxed);
  g_stop_size.store(end > start ? end - start : 0, std::memory_order_relaxed);
}

#if defined(__x86_64__) && defined(DLFO_EH_SEGMENT_TYPE)

// DWARF register numbers of the x86-64 psABI.
constexpr uint64_t kRbp = 6;
constexpr uint64_t kRsp = 7;
constexpr uint64_t kReturnAddress = 16;

// What a return address's unwind rule says, packed in 64 bits for the shared cache:
// kind (2 bits) | CFA (2) | rbp (2) | return address offset (int8, from the CFA) | rbp offset
// (int16) | CFA offset (int32).
enum Kind : uint64_t { kNotReady = 0, kFrame = 1, kEndOfStack = 2, kUnsupported = 3 };
// Where the CFA is: rsp + offset, rbp + offset, or the word at rbp + offset (GCC's stack
// realignment: `DW_OP_breg6 off; DW_OP_deref`).
enum CfaRule : uint64_t { kCfaRspOffset = 0, kCfaRbpOffset = 1, kCfaAtRbpOffset = 2 };
// Where the caller's rbp is: unchanged, saved at CFA + offset, or saved at rbp + offset
// (realignment again: `DW_CFA_expression rbp, DW_OP_breg6 off`).
enum RbpRule : uint64_t { kRbpUnchanged = 0, kRbpAtCfaOffset = 1, kRbpAtRbpOffset = 2 };

struct Rule {
  Kind kind = kUnsupported;
  CfaRule cfa = kCfaRspOffset;
  RbpRule rbp = kRbpUnchanged;
  int8_t return_address_offset = 0;
  int16_t rbp_offset = 0;
  int32_t cfa_offset = 0;

  uint64_t Pack() const {
    return static_cast<uint64_t>(kind) | static_cast<uint64_t>(cfa) << 2 |
           static_cast<uint64_t>(rbp) << 4 |
           uint64_t{static_cast<uint8_t>(return_address_offset)} << 8 |
           uint64_t{static_cast<uint16_t>(rbp_offset)} << 16 |
           uint64_t{static_cast<uint32_t>(cfa_offset)} << 32;
  }
  static Rule Unpack(uint64_t packed) {
    Rule rule;
    rule.kind = static_cast<Kind>(packed & 3);
    rule.cfa = static_cast<CfaRule>((packed >> 2) & 3);
    rule.rbp = static_cast<RbpRule>((packed >> 4) & 3);
    rule.return_address_offset = static_cast<int8_t>(packed >> 8);
    rule.rbp_offset = static_cast<int16_t>(packed >> 16);
    rule.cfa_offset = static_cast<int32_t>(packed >> 32);
    return rule;
  }
};

// Bounds-checked reads of the (trusted, mapped) unwind tables.
class Cursor {
 public:
  Cursor(const uint8_t* position, const uint8_t* end) : position_(position), end_(end) {}

  bool ok() const { return ok_; }
  const uint8_t* position() const { return position_; }
  bool AtEnd() const { return !ok_ || position_ >= end_; }
  void SkipTo(const uint8_t* position) {
    if (position < position_ || position > end_) ok_ = false;
    position_ = position;
  }
  void Skip(uint64_t bytes) {
    if (bytes > static_cast<uint64_t>(end_ - position_)) {
      ok_ = false;
      position_ = end_;
      return;
    }
    position_ += bytes;
  }

  template <typename T>
  T Fixed() {
    T value{};
    if (!ok_ || static_cast<size_t>(end_ - position_) < sizeof(T)) {
      ok_ = false;
      return value;
    }
    memcpy(&value, position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }
  uint64_t Uleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t byte = Fixed<uint8_t>();
      value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    ok_ = false;
    return 0;
  }
  int64_t Sleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t byte = Fixed<uint8_t>();
      value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) {
        if (shift + 7 < 64 && (byte & 0x40) != 0) value |= ~uint64_t{0} << (shift + 7);
        return static_cast<int64_t>(value);
      }
    }
    ok_ = false;
    return 0;
  }
  // A DW_EH_PE_* encoded pointer. `data_base`: what datarel is relative to (0: not allowed).
  // An indirect pointer is returned as its address (only a personality routine is ever indirect,
  // and it is only skipped).
  uint64_t Pointer(uint8_t encoding, uintptr_t data_base = 0) {
    const uintptr_t field = reinterpret_cast<uintptr_t>(position_);
    uint64_t value = 0;
    switch (encoding & 0x0f) {
      case 0x00:
        value = Fixed<uint64_t>();
        break;  // absptr
      case 0x01:
        value = Uleb();
        break;
      case 0x02:
        value = Fixed<uint16_t>();
        break;
      case 0x03:
        value = Fixed<uint32_t>();
        break;
      case 0x04:
        value = Fixed<uint64_t>();
        break;
      case 0x09:
        value = static_cast<uint64_t>(Sleb());
        break;
      case 0x0a:
        value = static_cast<uint64_t>(int64_t{Fixed<int16_t>()});
        break;
      case 0x0b:
        value = static_cast<uint64_t>(int64_t{Fixed<int32_t>()});
        break;
      case 0x0c:
        value = Fixed<uint64_t>();
        break;
      default:
        ok_ = false;
        return 0;
    }
    switch (encoding & 0x70) {
      case 0x00:
        break;
      case 0x10:
        value += field;
        break;    // pcrel
      case 0x30:  // datarel
        if (data_base == 0) ok_ = false;
        value += data_base;
        break;
      default:
        ok_ = false;  // textrel, funcrel, aligned: not emitted on x86-64 Linux
    }
    return value;
  }

 private:
  const uint8_t* position_;
  const uint8_t* end_;
  bool ok_ = true;
};

// Why a frame was left to libunwind: the first few are kept for GPUMEM_SELF_TIMING's report.
enum Reason : uint8_t {
  kNoFde,
  kUnreadableFde,
  kSignalFrame,
  kUnreadableProgram,
  kCfaExpression,
  kCfaRegister,
  kReturnAddressRule,
  kRbpRule,
  kOffsetRange,
  kOutsideStack,
  kReasonCount
};
constexpr const char* kReasonNames[kReasonCount] = {"no FDE (no module, no .eh_frame_hdr table)",
                                                    "FDE or CIE unreadable",
                                                    "signal frame",
                                                    "CFA program unreadable",
                                                    "CFA given by an expression",
                                                    "CFA from a register not rsp/rbp",
                                                    "return address not at an offset from the CFA",
                                                    "rbp in a register or an expression",
                                                    "offsets too large",
                                                    "CFA outside the thread's stack"};

struct Note {
  std::atomic<uintptr_t> address{0};
  std::atomic<uint8_t> reason{0};
  std::atomic<uint8_t> detail{0};
};
constexpr int kMaxNotes = 32;
Note g_notes[kMaxNotes];
std::atomic<int> g_note_count{0};

void NoteUnsupported(uintptr_t address, Reason reason, uint8_t detail = 0) {
  const int count = std::min(g_note_count.load(std::memory_order_relaxed), kMaxNotes);
  for (int i = 0; i < count; ++i) {
    if (g_notes[i].address.load(std::memory_order_relaxed) == address) return;
  }
  const int slot = g_note_count.fetch_add(1, std::memory_order_relaxed);
  if (slot >= kMaxNotes) return;
  g_notes[slot].reason.store(reason, std::memory_order_relaxed);
  g_notes[slot].detail.store(detail, std::memory_order_relaxed);
  g_notes[slot].address.store(address, std::memory_order_release);
}

constexpr uint8_t kEncodingOmit = 0xff;
constexpr uint8_t kDatarelSdata4 = 0x3b;

struct Cie {
  uint64_t code_alignment = 1;
  int64_t data_alignment = -8;
  uint8_t fde_encoding = 0;  // absptr
  bool has_augmentation_data = false;
  bool signal_frame = false;
  const uint8_t* instructions = nullptr;
  const uint8_t* end = nullptr;
};

// Reads one length-prefixed .eh_frame entry's header: its end, and the cursor after the length.
bool EntryBounds(const uint8_t* entry, Cursor* cursor, const uint8_t** end) {
  Cursor length_cursor(entry, entry + 12);
  uint64_t length = length_cursor.Fixed<uint32_t>();
  if (length == 0xffffffff) length = length_cursor.Fixed<uint64_t>();
  if (!length_cursor.ok() || length == 0 || length > (uint64_t{1} << 32)) return false;
  *end = length_cursor.position() + length;
  *cursor = Cursor(length_cursor.position(), *end);
  return true;
}

bool ParseCie(const uint8_t* entry, Cie* cie) {
  Cursor cursor(nullptr, nullptr);
  if (!EntryBounds(entry, &cursor, &cie->end)) return false;
  if (cursor.Fixed<uint32_t>() != 0) return false;  // a CIE's id in .eh_frame
  const uint8_t version = cursor.Fixed<uint8_t>();
  if (version != 1 && version != 3) return false;
  const char* augmentation = reinterpret_cast<const char*>(cursor.position());
  const size_t augmentation_length = strnlen(augmentation, 8);
  if (augmentation_length == 8) return false;
  cursor.Skip(augmentation_length + 1);
  cie->code_alignment = cursor.Uleb();
  cie->data_alignment = cursor.Sleb();
  const uint64_t return_register = version == 1 ? cursor.Fixed<uint8_t>() : cursor.Uleb();
  if (!cursor.ok() || return_register != kReturnAddress) return false;
  if (augmentation[0] == 'z') {
    cie->has_augmentation_data = true;
    const uint64_t data_length = cursor.Uleb();
    const uint8_t* data_end = cursor.position() + data_length;
    // Letters in order, each with its data; an unknown one ends the walk (the length covers
    // what follows it).
    bool known = true;
    for (const char* letter = augmentation + 1; known && *letter != '\0'; ++letter) {
      switch (*letter) {
        case 'R':
          cie->fde_encoding = cursor.Fixed<uint8_t>();
          break;
        case 'L':
          cursor.Fixed<uint8_t>();
          break;
        case 'P':
          cursor.Pointer(cursor.Fixed<uint8_t>() & 0x7f);
          break;  // never dereferenced
        case 'S':
          cie->signal_frame = true;
          break;
        default:
          known = false;
      }
    }
    cursor.SkipTo(data_end);
  } else if (augmentation[0] != '\0') {
    return false;  // e.g. "eh": a format from before 'z'
  }
  cie->instructions = cursor.position();
  return cursor.ok();
}

// How one register is restored in the caller.
struct RegisterRule {
  enum Type : uint8_t { kUnchanged, kAtOffset, kAtRbpOffset, kUndefined, kOther } type = kUnchanged;
  int64_t offset = 0;
};

struct Row {
  uint64_t cfa_register = kRsp;
  int64_t cfa_offset = 8;
  bool cfa_is_expression = false;  // one this unwinder cannot evaluate
  bool cfa_at_rbp_offset = false;  // the word at rbp + cfa_offset
  RegisterRule rbp;
  RegisterRule return_address;

  // The rule of a register this unwinder follows; null for the others.
  RegisterRule* Of(uint64_t reg) {
    if (reg == kRbp) return &rbp;
    if (reg == kReturnAddress) return &return_address;
    return nullptr;
  }
};

// The one DWARF expression shape this unwinder evaluates, `DW_OP_breg6 (rbp) offset`, optionally
// followed by `DW_OP_deref`: what GCC emits around a stack realignment. False for anything else.
bool RbpExpression(Cursor* cursor, int64_t* offset, bool* deref) {
  const uint64_t length = cursor->Uleb();
  Cursor expression = *cursor;  // read apart; the program goes on after the block
  const uint8_t* start = cursor->position();
  cursor->Skip(length);
  if (!cursor->ok() || length == 0 || expression.Fixed<uint8_t>() != 0x76) return false;
  *offset = expression.Sleb();
  auto read = [&] { return static_cast<uint64_t>(expression.position() - start); };
  *deref = expression.ok() && read() < length && expression.Fixed<uint8_t>() == 0x06;
  return expression.ok() && read() == length;
}

// What one CFA instruction leaves the run to do.
enum class Step : uint8_t { kNext, kReachedTarget, kUnreadable };

// One run of a CFA program, from `location` until the row that covers `target`. `initial` is the
// row after the CIE's instructions (what DW_CFA_restore returns to). Each group of instructions
// (moving the location, defining the CFA, a register's rule, the remembered rows) is a step of
// its own.
class CfaProgram {
 public:
  CfaProgram(Cursor cursor, const Cie& cie, uint64_t location, uint64_t target, const Row& initial,
             Row* row)
      : cursor_(cursor),
        cie_(cie),
        location_(location),
        target_(target),
        initial_(initial),  // a copy: the CIE's own run builds `initial` through `row`
        row_(row) {}

  // False on what it cannot read.
  bool Run() {
    while (!cursor_.AtEnd()) {
      const Step step = Execute(cursor_.Fixed<uint8_t>());
      if (step != Step::kNext) return step == Step::kReachedTarget;
    }
    return cursor_.ok();
  }

 private:
  static constexpr int kMaxRemembered = 8;

  Step Execute(uint8_t opcode) {
    const uint8_t operand = opcode & 0x3f;
    switch (opcode >> 6) {
      case 1:  // DW_CFA_advance_loc
        return Advance(operand);
      case 2:  // DW_CFA_offset
        SetRule(operand, RegisterRule::kAtOffset, ScaledUleb());
        return Step::kNext;
      case 3:  // DW_CFA_restore
        Restore(operand);
        return Step::kNext;
      default:
        break;
    }
    switch (opcode) {
      case 0x00:  // DW_CFA_nop
        return Step::kNext;
      case 0x01:  // DW_CFA_set_loc
        location_ = cursor_.Pointer(cie_.fde_encoding);
        return location_ > target_ ? Step::kReachedTarget : Step::kNext;
      case 0x02:  // DW_CFA_advance_loc1
        return Advance(cursor_.Fixed<uint8_t>());
      case 0x03:  // DW_CFA_advance_loc2
        return Advance(cursor_.Fixed<uint16_t>());
      case 0x04:  // DW_CFA_advance_loc4
        return Advance(cursor_.Fixed<uint32_t>());
      case 0x0a:  // DW_CFA_remember_state
        if (remembered_count_ == kMaxRemembered) return Step::kUnreadable;
        remembered_[remembered_count_++] = *row_;
        return Step::kNext;
      case 0x0b:  // DW_CFA_restore_state: the whole row, CFA included (as GCC's epilogues need)
        if (remembered_count_ == 0) return Step::kUnreadable;
        *row_ = remembered_[--remembered_count_];
        return Step::kNext;
      case 0x0c:
      case 0x0d:
      case 0x0e:
      case 0x0f:
      case 0x12:
      case 0x13:
        DefineCfa(opcode);
        return Step::kNext;
      case 0x2e:  // DW_CFA_GNU_args_size: only landing pads need it
        cursor_.Uleb();
        return Step::kNext;
      default:
        return DefineRegisterRule(opcode) ? Step::kNext : Step::kUnreadable;
    }
  }

  Step Advance(uint64_t delta) {
    location_ += delta * cie_.code_alignment;
    return location_ <= target_ ? Step::kNext : Step::kReachedTarget;
  }

  // The CFA's register, offset or expression (DW_CFA_def_cfa*).
  void DefineCfa(uint8_t opcode) {
    switch (opcode) {
      case 0x0c:  // DW_CFA_def_cfa
        row_->cfa_register = cursor_.Uleb();
        row_->cfa_offset = static_cast<int64_t>(cursor_.Uleb());
        row_->cfa_is_expression = row_->cfa_at_rbp_offset = false;
        break;
      case 0x0d:  // DW_CFA_def_cfa_register
        row_->cfa_register = cursor_.Uleb();
        row_->cfa_is_expression = row_->cfa_at_rbp_offset = false;
        break;
      case 0x0e:  // DW_CFA_def_cfa_offset
        row_->cfa_offset = static_cast<int64_t>(cursor_.Uleb());
        break;
      case 0x0f: {  // DW_CFA_def_cfa_expression
        int64_t offset = 0;
        bool deref = false;
        const bool known = RbpExpression(&cursor_, &offset, &deref) && deref;
        row_->cfa_is_expression = !known;
        row_->cfa_at_rbp_offset = known;
        row_->cfa_register = kRbp;
        row_->cfa_offset = offset;
        break;
      }
      case 0x12:  // DW_CFA_def_cfa_sf
        row_->cfa_register = cursor_.Uleb();
        row_->cfa_offset = cursor_.Sleb() * cie_.data_alignment;
        row_->cfa_is_expression = row_->cfa_at_rbp_offset = false;
        break;
      case 0x13:  // DW_CFA_def_cfa_offset_sf
        row_->cfa_offset = cursor_.Sleb() * cie_.data_alignment;
        break;
      default:
        break;
    }
  }

  // The extended instructions that give one register its rule; false for an unknown opcode.
  bool DefineRegisterRule(uint8_t opcode) {
    switch (opcode) {
      case 0x05: {  // DW_CFA_offset_extended
        const uint64_t reg = cursor_.Uleb();
        SetRule(reg, RegisterRule::kAtOffset, ScaledUleb());
        return true;
      }
      case 0x06:  // DW_CFA_restore_extended
        Restore(cursor_.Uleb());
        return true;
      case 0x07:  // DW_CFA_undefined
        SetRule(cursor_.Uleb(), RegisterRule::kUndefined, 0);
        return true;
      case 0x08:  // DW_CFA_same_value
        SetRule(cursor_.Uleb(), RegisterRule::kUnchanged, 0);
        return true;
      case 0x09: {  // DW_CFA_register
        const uint64_t reg = cursor_.Uleb();
        cursor_.Uleb();
        SetRule(reg, RegisterRule::kOther, 0);
        return true;
      }
      case 0x10: {  // DW_CFA_expression: the register is saved at the address it computes
        const uint64_t reg = cursor_.Uleb();
        int64_t offset = 0;
        bool deref = false;
        const bool known = RbpExpression(&cursor_, &offset, &deref) && !deref;
        SetRule(reg, known ? RegisterRule::kAtRbpOffset : RegisterRule::kOther, offset);
        return true;
      }
      case 0x11: {  // DW_CFA_offset_extended_sf
        const uint64_t reg = cursor_.Uleb();
        SetRule(reg, RegisterRule::kAtOffset, cursor_.Sleb() * cie_.data_alignment);
        return true;
      }
      case 0x14:    // DW_CFA_val_offset
      case 0x15: {  // DW_CFA_val_offset_sf
        const uint64_t reg = cursor_.Uleb();
        if (opcode == 0x14) {
          cursor_.Uleb();
        } else {
          cursor_.Sleb();
        }
        SetRule(reg, RegisterRule::kOther, 0);
        return true;
      }
      case 0x16: {  // DW_CFA_val_expression
        const uint64_t reg = cursor_.Uleb();
        cursor_.Skip(cursor_.Uleb());
        SetRule(reg, RegisterRule::kOther, 0);
        return true;
      }
      case 0x2f: {  // DW_CFA_GNU_negative_offset_extended
        const uint64_t reg = cursor_.Uleb();
        SetRule(reg, RegisterRule::kAtOffset, -ScaledUleb());
        return true;
      }
      default:
        return false;
    }
  }

  // An unsigned factored offset, scaled by the CIE's data alignment.
  int64_t ScaledUleb() { return static_cast<int64_t>(cursor_.Uleb()) * cie_.data_alignment; }

  void SetRule(uint64_t reg, RegisterRule::Type type, int64_t offset) {
    if (RegisterRule* rule = row_->Of(reg)) *rule = {type, offset};
  }
  void Restore(uint64_t reg) {
    if (RegisterRule* rule = row_->Of(reg)) *rule = *initial_.Of(reg);
  }

  Cursor cursor_;
  const Cie& cie_;
  uint64_t location_;
  const uint64_t target_;
  Row initial_;
  Row* row_;
  Row remembered_[kMaxRemembered];
  int remembered_count_ = 0;
};

using FindObjectFn = int (*)(void*, dl_find_object*);
// glibc 2.35's lock-free lookup of an address's module.
GPUMEM_HOT_DATA FindObjectFn g_find_object = nullptr;

// The FDE covering `pc` through the module's .eh_frame_hdr search table; null if none.
const uint8_t* FindFde(uintptr_t pc) {
  dl_find_object object{};
  if (g_find_object(reinterpret_cast<void*>(pc), &object) != 0 || object.dlfo_eh_frame == nullptr) {
    return nullptr;
  }
  const auto* header = static_cast<const uint8_t*>(object.dlfo_eh_frame);
  const auto base = reinterpret_cast<uintptr_t>(header);
  if (header[0] != 1 || header[3] != kDatarelSdata4) return nullptr;
  Cursor cursor(header + 4, header + 4 + 2 * 9);
  cursor.Pointer(header[1], base);  // .eh_frame itself: not needed with the table
  const uint64_t count = header[2] == kEncodingOmit ? 0 : cursor.Pointer(header[2], base);
  if (!cursor.ok() || count == 0) return nullptr;
  const uint8_t* table = cursor.position();
  auto entry = [&](uint64_t index, int column) {
    int32_t value;
    memcpy(&value, table + index * 8 + column * 4, sizeof(value));
    return base + static_cast<uintptr_t>(static_cast<intptr_t>(value));
  };
  // The last entry whose start is at or below pc.
  uint64_t low = 0;
  uint64_t high = count;
  while (high - low > 1) {
    const uint64_t middle = low + (high - low) / 2;
    if (entry(middle, 0) <= pc) {
      low = middle;
    } else {
      high = middle;
    }
  }
  if (entry(low, 0) > pc) return nullptr;
  return reinterpret_cast<const uint8_t*>(entry(low, 1));
}

Rule ComputeRule(uintptr_t pc) {
  Rule unsupported;
  auto fail = [&](Reason reason, uint8_t detail = 0) {
    NoteUnsupported(pc, reason, detail);
    return unsupported;
  };
  const uint8_t* fde = FindFde(pc);
  if (fde == nullptr) return fail(kNoFde);
  Cursor cursor(nullptr, nullptr);
  const uint8_t* fde_end = nullptr;
  if (!EntryBounds(fde, &cursor, &fde_end)) return fail(kUnreadableFde);
  const uint8_t* cie_pointer_field = cursor.position();
  const uint32_t cie_offset = cursor.Fixed<uint32_t>();
  if (cie_offset == 0) return fail(kUnreadableFde);  // that is a CIE, not an FDE
  Cie cie;
  if (!ParseCie(cie_pointer_field - cie_offset, &cie)) return fail(kUnreadableFde);
  if (cie.signal_frame) return fail(kSignalFrame);
  const uint64_t pc_begin = cursor.Pointer(cie.fde_encoding);
  const uint64_t pc_range = cursor.Pointer(cie.fde_encoding & 0x0f);
  if (cie.has_augmentation_data) cursor.Skip(cursor.Uleb());
  if (!cursor.ok() || pc < pc_begin || pc - pc_begin >= pc_range) return fail(kNoFde);

  Row initial;
  if (!CfaProgram(Cursor(cie.instructions, cie.end), cie, 0, ~uint64_t{0}, initial, &initial)
           .Run()) {
    return fail(kUnreadableProgram);
  }
  Row row = initial;
  if (!CfaProgram(cursor, cie, pc_begin, pc, initial, &row).Run()) return fail(kUnreadableProgram);

  Rule rule;
  if (row.return_address.type == RegisterRule::kUndefined) {
    rule.kind = kEndOfStack;  // _start, a thread's clone: the outermost frame
    return rule;
  }
  if (row.cfa_is_expression) return fail(kCfaExpression);
  if (row.cfa_register != kRsp && row.cfa_register != kRbp) {
    return fail(kCfaRegister, static_cast<uint8_t>(row.cfa_register));
  }
  if (row.return_address.type != RegisterRule::kAtOffset) {
    return fail(kReturnAddressRule, row.return_address.type);
  }
  if (row.rbp.type == RegisterRule::kOther || row.rbp.type == RegisterRule::kUndefined) {
    return fail(kRbpRule);
  }
  if (row.cfa_offset < INT32_MIN || row.cfa_offset > INT32_MAX ||
      row.return_address.offset < INT8_MIN || row.return_address.offset > INT8_MAX ||
      row.rbp.offset < INT16_MIN || row.rbp.offset > INT16_MAX) {
    return fail(kOffsetRange);
  }
  rule.kind = kFrame;
  rule.cfa = row.cfa_at_rbp_offset      ? kCfaAtRbpOffset
             : row.cfa_register == kRbp ? kCfaRbpOffset
                                        : kCfaRspOffset;
  rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
  rule.return_address_offset = static_cast<int8_t>(row.return_address.offset);
  rule.rbp = row.rbp.type == RegisterRule::kAtOffset      ? kRbpAtCfaOffset
             : row.rbp.type == RegisterRule::kAtRbpOffset ? kRbpAtRbpOffset
                                                          : kRbpUnchanged;
  rule.rbp_offset = static_cast<int16_t>(row.rbp.offset);
  return rule;
}

// The rules by address, shared by all threads: a slot's address is published before its rule,
// and a reader that finds the address without the rule yet computes the rule itself.
constexpr int kSlotBits = 15;
constexpr size_t kSlotMask = (size_t{1} << kSlotBits) - 1;
constexpr int kProbes = 8;
struct Slot {
  std::atomic<uint64_t> address{0};
  std::atomic<uint64_t> rule{kNotReady};
};
Slot g_rules[size_t{1} << kSlotBits];

uint64_t CachedRule(uintptr_t address) {
  size_t slot = static_cast<size_t>((address * 0x9e3779b97f4a7c15ull) >> (64 - kSlotBits));
  for (int probe = 0; probe < kProbes; ++probe, slot = (slot + 1) & kSlotMask) {
    const uint64_t key = g_rules[slot].address.load(std::memory_order_acquire);
    if (key == address) {
      const uint64_t rule = g_rules[slot].rule.load(std::memory_order_acquire);
      if (rule != kNotReady) return rule;
      break;
    }
    if (key == 0) {
      const uint64_t rule = ComputeRule(address).Pack();
      uint64_t expected = 0;
      if (g_rules[slot].address.compare_exchange_strong(expected, address,
                                                        std::memory_order_acq_rel)) {
        g_rules[slot].rule.store(rule, std::memory_order_release);
      }
      return rule;
    }
  }
  return ComputeRule(address).Pack();  // a crowded neighbourhood: not cached
}

// The calling thread's stack, so that no read strays outside it whatever a rule says.
struct StackBounds {
  uintptr_t low = 0;
  uintptr_t high = 0;  // 0: not asked yet; 1: unknown
};

// Replaying an earlier unwind. Within a thread the same stacks recur (a training loop runs the
// same lines every step), and an unwind is a function of its starting registers and of the words
// it reads from the stack: an earlier unwind from the same registers whose every read still finds
// the same word gives the same frames. Checking that reads the same stack words but none of the
// rule cache, whose lookups were most of an unwind's cost inside PyTorch on the H100 machine (a
// cache miss a frame).
// 256 memos a thread (~270 KiB, in a 2 MiB huge page where the kernel gives one), 16 ways to a set
// chosen by the stack pointer: a training step's call sites from one thread fit with room to spare.
// Many call paths reach a hook at one stack pointer (PyTorch's generated operator wrappers have
// equal frames), and they must fit in one set: with 4 ways to 64 sets, 13,253 of the 144,448
// stacks of a 300-step transformer run under --tensors missed (paths evicting each other at one
// stack pointer), each a full unwind at several times a replay's cost; with 16 ways, 75. A memo
// holds a stack of up to 80 frames, two reads a frame (frame-pointer code restores rbp).
constexpr int kMemoWays = 16;
constexpr int kMemoSets = 16;
constexpr int kMemoSlots = kMemoWays * kMemoSets;
constexpr int kMaxMemoReads = 160;
constexpr int kMaxMemoFrames = 80;
// A stack word's part of a memo's hash: mixed with its place in the walk, so that words moved
// between places change the sum. Each word's term is independent of the others': a replay's
// terms are computed side by side, not in a chain.
inline uint64_t WordTerm(uintptr_t value, int index) {
  uint64_t term =
      (value ^ (static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ull)) * 0xd6e8feb86659fd93ull;
  return term ^ (term >> 32);
}
// What a replay checks first, and the note, in the first cache line (PrefetchReplay fetches it).
// The words the unwind read are kept as their places (in words above sp, two bytes each: a memo
// holds stacks of up to 512 KiB) and one hash of their values: a replay reads each place again
// and compares the hash. With the values themselves (sixteen bytes a read) a replay of a 30-frame
// stack touched 16 lines of its memo, each a cache miss inside a framework; now 3. A word changed
// always changes the hash (each term is a bijection of its word); several words changed leave it
// alike by a chance of about 2^-64, where a wrong stack would be replayed.
struct alignas(64) Memo {
  uintptr_t sp;  // 0: empty
  uintptr_t bp;  // compared only when bp_used: some rule read the starting rbp
  uint32_t generation;
  uint16_t capacity;
  uint16_t depth;
  uint16_t reads;
  bool bp_used;
  ReplayNote note;
  uint64_t words_hash;                // the sum of WordTerm() over the reads
  uint16_t read_word[kMaxMemoReads];  // where each word was, in words above sp, in walk order
  void* frames[kMaxMemoFrames];
};
static_assert(offsetof(Memo, words_hash) == 64, "a memo's head is one cache line");
// The low halves of a set's memos' stack pointers (SpTag) in one cache line, so that finding the
// candidates does not touch the memos that cannot match (a candidate's whole sp is in its head).
struct alignas(64) MemoSet {
  uint32_t sp_tag[kMemoWays];  // 0: empty
};
static_assert(sizeof(MemoSet) == 64);
inline uint32_t SpTag(uintptr_t sp) { return static_cast<uint32_t>(sp); }
// Per set, the way that replayed last (tried first, and its head fetched ahead) and the way the
// next unwind that fits no way replaces: one line for every set.
struct alignas(64) MemoWayHints {
  uint8_t last_replayed[kMemoSets];
  uint8_t next_victim[kMemoSets];
};
struct ThreadMemoTable {
  MemoWayHints hints;
  MemoSet sets[kMemoSets];
  Memo memos[kMemoSlots];
};
// ForgetRules and SetStop make every memo stale.
GPUMEM_HOT_DATA std::atomic<uint32_t> g_rules_generation{1};
// Anchor - stack pointer in Backtrace (0: unknown).
GPUMEM_HOT_DATA std::atomic<uintptr_t> g_anchor_offset{0};
pthread_key_t g_memo_key;
bool g_memo_key_created = false;

// One transparent huge page per thread, where the kernel gives them (THP "always" or "madvise"):
// a replay touches its memo on pages of its own, and on 4 KiB pages each was a TLB miss (the
// prefetch of the memos took 0.15 % of a PyTorch step's samples on the H100).
constexpr size_t kHugePage = size_t{2} << 20;
static_assert(sizeof(ThreadMemoTable) <= kHugePage);

void FreeMemos(void* memos) {
  if (memos != nullptr && memos != MAP_FAILED) munmap(memos, kHugePage);
}

// kHugePage bytes at a kHugePage boundary (what a huge page needs), advised to be one.
void* MapMemos() {
  void* raw =
      mmap(nullptr, 2 * kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return MAP_FAILED;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + kHugePage;
  if (start + 2 * kHugePage > end)
    munmap(reinterpret_cast<void*>(end), start + 2 * kHugePage - end);
  madvise(reinterpret_cast<void*>(aligned), kHugePage, MADV_HUGEPAGE);  // a hint: may be refused
  return reinterpret_cast<void*>(aligned);
}

// The thread's memos, mapped at its first unwind (never in a thread that records no stack) and
// unmapped when it exits; null when that failed.
ThreadMemoTable* ThreadMemos(ThreadLocals& locals) {
  if (locals.memos == nullptr) {
    void* memory = g_memo_key_created ? MapMemos() : MAP_FAILED;
    locals.memos = memory;
    if (memory != MAP_FAILED) pthread_setspecific(g_memo_key, memory);
  }
  return locals.memos == MAP_FAILED ? nullptr : static_cast<ThreadMemoTable*>(locals.memos);
}

// The set of memos for this stack pointer.
int MemoSetIndex(uintptr_t sp) {
  const uint64_t hash = (sp >> 4) * 0x9e3779b97f4a7c15ull;
  return static_cast<int>((hash >> 40) % kMemoSets);
}

// The memo's depth if every word it read is still there, its frames copied unless `copy` is
// false; -1 otherwise.
int Replay(const Memo& memo, uintptr_t sp, uintptr_t bp, int capacity, void** frames, bool copy) {
  if (memo.sp != sp || (memo.bp_used && memo.bp != bp) || memo.capacity != capacity ||
      memo.generation != g_rules_generation.load(std::memory_order_relaxed)) {
    return -1;
  }
  uint64_t hash = 0;
  for (int i = 0; i < memo.reads; ++i) {
    hash += WordTerm(reinterpret_cast<const uintptr_t*>(sp)[memo.read_word[i]], i);
  }
  if (hash != memo.words_hash) return -1;
  if (copy) memcpy(frames, memo.frames, static_cast<size_t>(memo.depth) * sizeof(void*));
  return memo.depth;
}

StackBounds ThreadStack(ThreadLocals& locals) {
  if (locals.stack_high == 0) {
    locals.stack_high = 1;
    pthread_attr_t attributes;
    if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
      void* address = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attributes, &address, &size) == 0 && size > 0) {
        locals.stack_low = reinterpret_cast<uintptr_t>(address);
        locals.stack_high = locals.stack_low + size;
      }
      pthread_attr_destroy(&attributes);
    }
  }
  return {locals.stack_low, locals.stack_high};
}

// The memo an unwind fills: a way of its stack pointer's set, emptied until the unwind completes.
struct MemoToFill {
  Memo* memo = nullptr;
  MemoSet* set = nullptr;
  int way = -1;
};

// Replays a memo of this stack pointer whose every read still holds and returns its depth; else
// picks the way this unwind will fill and returns -1.
__attribute__((always_inline)) inline int ReplayOrPickMemo(ThreadMemoTable* memos, uintptr_t sp,
                                                           uintptr_t bp, int capacity,
                                                           void** frames, ReplayNote** note,
                                                           MemoToFill* fill) {
  const int set_index = MemoSetIndex(sp);
  MemoSet* set = &memos->sets[set_index];
  Memo* ways = &memos->memos[set_index * kMemoWays];
  uint8_t& last_replayed = memos->hints.last_replayed[set_index];
  bool sp_seen = false;
  // The way that replayed last first, then the others in order.
  for (int i = 0; i < kMemoWays; ++i) {
    const int way = (last_replayed + i) % kMemoWays;
    if (set->sp_tag[way] != SpTag(sp)) continue;
    Memo& candidate = ways[way];
    sp_seen = sp_seen || candidate.sp == sp;
    const bool noted = note != nullptr && candidate.note.word[0] != 0;
    const int replayed = Replay(candidate, sp, bp, capacity, frames, !noted);
    if (replayed >= 0) {
      self_timing::Count(self_timing::kUnwindReplayed);
      if (note != nullptr) *note = &candidate.note;
      last_replayed = static_cast<uint8_t>(way);
      return replayed;
    }
  }
  self_timing::Count(sp_seen ? self_timing::kUnwindMemoChanged : self_timing::kUnwindMemoAbsent);
  // An empty way, else the next in turn: two paths through one stack pointer (sibling call sites
  // of the same depth) both stay.
  int way_to_fill = -1;
  for (int way = 0; way < kMemoWays && way_to_fill < 0; ++way) {
    if (set->sp_tag[way] == 0) way_to_fill = way;
  }
  if (way_to_fill < 0) {
    uint8_t& victim = memos->hints.next_victim[set_index];
    way_to_fill = victim % kMemoWays;
    victim = static_cast<uint8_t>((way_to_fill + 1) % kMemoWays);
  }
  fill->memo = &ways[way_to_fill];
  fill->set = set;
  fill->way = way_to_fill;
  set->sp_tag[way_to_fill] = 0;  // rewritten by SaveMemo, kept only if the unwind completes
  fill->memo->sp = 0;
  fill->memo->reads = 0;
  return -1;
}

// One unwind's walk up the thread's stack by the cached rules, logging each stack word it reads
// into `memo` (when there is one) so that a later unwind from the same registers can replay it.
class StackWalk {
 public:
  StackWalk(uintptr_t stack_high, uintptr_t sp, uintptr_t bp, Memo* memo)
      : stack_high_(stack_high),
        start_sp_(sp),
        sp_(sp),
        bp_(bp),
        memo_(memo),
        memo_fits_(memo != nullptr) {}

  // The return addresses from the frame whose rule `pc` looks up, at most `capacity`; -1 when a
  // rule cannot be followed.
  __attribute__((always_inline)) int Run(uintptr_t pc, void** frames, int capacity) {
    const uintptr_t stop_start = g_stop_start.load(std::memory_order_relaxed);
    const uintptr_t stop_size = g_stop_size.load(std::memory_order_relaxed);
    int depth = 0;
    uintptr_t lookup = pc;  // then return address - 1: the call, not what follows it
    while (depth < capacity) {
      const Rule rule = Rule::Unpack(CachedRule(lookup));
      if (rule.kind == kEndOfStack) break;
      if (rule.kind != kFrame) return -1;
      uintptr_t return_address = 0;
      if (!StepToCaller(rule, lookup, &return_address)) return -1;
      if (return_address == 0) break;
      frames[depth++] = reinterpret_cast<void*>(return_address);
      if (return_address - stop_start < stop_size) break;
      lookup = return_address - 1;
    }
    return depth;
  }

  // Whether every read was logged (a memo holds kMaxMemoReads, word-aligned, within 512 KiB).
  bool memo_fits() const { return memo_fits_; }
  // Whether some rule read the starting rbp: a replay must then find the same.
  bool start_bp_used() const { return start_bp_used_; }
  // The hash of the words read, as Replay() computes it.
  uint64_t words_hash() const { return words_hash_; }

 private:
  // Moves sp and bp to the caller's as `rule` says and reads the return address there. False,
  // noted, when a read would leave the stack.
  __attribute__((always_inline)) bool StepToCaller(const Rule& rule, uintptr_t lookup,
                                                   uintptr_t* return_address) {
    uintptr_t cfa =
        (rule.cfa == kCfaRspOffset ? sp_ : UseBp()) + static_cast<intptr_t>(rule.cfa_offset);
    if (rule.cfa == kCfaAtRbpOffset) {
      if (!Readable(cfa)) {
        NoteUnsupported(lookup, kOutsideStack, 3);
        return false;
      }
      cfa = Load(cfa);
    }
    const uintptr_t return_address_at = cfa + static_cast<intptr_t>(rule.return_address_offset);
    if (cfa <= sp_ || cfa > stack_high_ || !Readable(return_address_at)) {
      NoteUnsupported(lookup, kOutsideStack, static_cast<uint8_t>(rule.cfa));
      return false;
    }
    *return_address = Load(return_address_at);
    if (rule.rbp != kRbpUnchanged) {
      const uintptr_t rbp_at =
          (rule.rbp == kRbpAtCfaOffset ? cfa : UseBp()) + static_cast<intptr_t>(rule.rbp_offset);
      if (!Readable(rbp_at)) {
        NoteUnsupported(lookup, kOutsideStack, 4);
        return false;
      }
      bp_ = *reinterpret_cast<const uintptr_t*>(rbp_at);
      bp_is_start_ = false;
      bp_read_pending_ = true;
      bp_read_address_ = rbp_at;
    }
    sp_ = cfa;
    return true;
  }

  bool Readable(uintptr_t address) const {
    return address >= sp_ && address <= stack_high_ - sizeof(uintptr_t);
  }
  void Log(uintptr_t address, uintptr_t value) {
    if (!memo_fits_) return;
    const uintptr_t offset = address - start_sp_;  // reads are at or above sp
    if (memo_->reads == kMaxMemoReads || offset % sizeof(uintptr_t) != 0 ||
        offset / sizeof(uintptr_t) > UINT16_MAX) {
      memo_fits_ = false;
      return;
    }
    words_hash_ += WordTerm(value, memo_->reads);
    memo_->read_word[memo_->reads++] = static_cast<uint16_t>(offset / sizeof(uintptr_t));
  }
  uintptr_t Load(uintptr_t address) {
    const uintptr_t value = *reinterpret_cast<const uintptr_t*>(address);
    Log(address, value);
    return value;
  }
  // rbp is logged only once a rule uses it: a saved rbp that nothing uses does not change the
  // stack, and in code built without frame pointers it holds data that differs call to call.
  uintptr_t UseBp() {
    if (bp_is_start_) {
      start_bp_used_ = true;
    } else if (bp_read_pending_) {
      Log(bp_read_address_, bp_);
      bp_read_pending_ = false;
    }
    return bp_;
  }

  const uintptr_t stack_high_;
  const uintptr_t start_sp_;
  uintptr_t sp_;
  uintptr_t bp_;
  Memo* const memo_;
  bool memo_fits_;           // and, at the end, no deeper than kMaxMemoFrames
  bool bp_is_start_ = true;  // still the starting register
  bool start_bp_used_ = false;
  uint64_t words_hash_ = 0;
  bool bp_read_pending_ = false;  // the read that gave bp its value, not logged yet
  uintptr_t bp_read_address_ = 0;
};

// Keeps a completed walk from `start_sp`/`start_bp` in its memo when it fits; the stack pointer is
// written last, so that a replay never finds a memo half-written.
__attribute__((always_inline)) inline void SaveMemo(const MemoToFill& fill, const StackWalk& walk,
                                                    uintptr_t start_sp, uintptr_t start_bp,
                                                    void** frames, int depth, int capacity,
                                                    ReplayNote** note) {
  if (fill.memo == nullptr) return;
  if (!walk.memo_fits() || depth > kMaxMemoFrames) {
    self_timing::Count(self_timing::kUnwindTooDeepToReplay);
    return;
  }
  Memo* memo = fill.memo;
  memcpy(memo->frames, frames, static_cast<size_t>(depth) * sizeof(void*));
  memo->bp = start_bp;
  memo->bp_used = walk.start_bp_used();
  memo->words_hash = walk.words_hash();
  memo->generation = g_rules_generation.load(std::memory_order_relaxed);
  memo->capacity = static_cast<uint16_t>(capacity);
  memo->depth = static_cast<uint16_t>(depth);
  memo->note = {};
  memo->sp = start_sp;  // last: the memo is whole
  fill.set->sp_tag[fill.way] = SpTag(start_sp);
  if (note != nullptr) *note = &memo->note;
}

#endif

}  // namespace

#if defined(__x86_64__) && defined(DLFO_EH_SEGMENT_TYPE)

bool Init(void* (*real_dlsym)(void*, const char*)) {
  if (!g_memo_key_created) g_memo_key_created = pthread_key_create(&g_memo_key, FreeMemos) == 0;
  g_find_object = reinterpret_cast<FindObjectFn>(real_dlsym(RTLD_DEFAULT, "_dl_find_object"));
  return g_find_object != nullptr;
}

GPUMEM_HOT void PrefetchReplay(uintptr_t anchor) {
  const uintptr_t offset = g_anchor_offset.load(std::memory_order_relaxed);
  const auto* memos = static_cast<const ThreadMemoTable*>(Locals().memos);
  if (offset == 0 || memos == nullptr || memos == MAP_FAILED) return;
  const int set_index = MemoSetIndex(anchor - offset);
  __builtin_prefetch(&memos->sets[set_index]);
  // The head of the way that replayed last (the hints' one line is read by every unwind, so it is
  // rarely far): which way matches is not known without the set's line, and fetching all sixteen
  // heads would stall on the core's few line-fill buffers. The reads stream in behind the head.
  __builtin_prefetch(&memos->memos[set_index * kMemoWays + memos->hints.last_replayed[set_index]]);
}

GPUMEM_HOT __attribute__((noinline)) int Backtrace(void** frames, int capacity, ReplayNote** note,
                                                   uintptr_t anchor) {
  if (note != nullptr) *note = nullptr;
  if (g_find_object == nullptr) return -1;
  ThreadLocals& locals = Locals();  // once: each look-up is a call into libc
  const StackBounds bounds = ThreadStack(locals);
  uintptr_t pc;
  uintptr_t sp;
  uintptr_t bp;
  // This frame's own state; the rule of the instruction after the lea describes it.
  asm volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"
               : "=r"(pc), "=r"(sp), "=r"(bp));
  if (sp < bounds.low || sp >= bounds.high) return -1;
  if (anchor > sp && g_anchor_offset.load(std::memory_order_relaxed) != anchor - sp) {
    g_anchor_offset.store(anchor - sp, std::memory_order_relaxed);
  }
  MemoToFill fill;
  if (ThreadMemoTable* memos = ThreadMemos(locals)) {
    const int replayed = ReplayOrPickMemo(memos, sp, bp, capacity, frames, note, &fill);
    if (replayed >= 0) return replayed;
  }
  StackWalk walk(bounds.high, sp, bp, fill.memo);
  const int depth = walk.Run(pc, frames, capacity);
  if (depth >= 0) SaveMemo(fill, walk, sp, bp, frames, depth, capacity, note);
  return depth;
}

void PrintUnsupported() {
  const int count = std::min(g_note_count.load(std::memory_order_acquire), kMaxNotes);
  for (int i = 0; i < count; ++i) {
    const uintptr_t address = g_notes[i].address.load(std::memory_order_acquire);
    if (address == 0) continue;
    Dl_info info{};
    const bool known = dladdr(reinterpret_cast<void*>(address), &info) != 0;
    char line[512];
    const int n =
        snprintf(line, sizeof(line), "gpumem:   left to libunwind: %s+0x%lx (%s) %s [%d]\n",
                 known && info.dli_fname != nullptr ? info.dli_fname : "?",
                 static_cast<unsigned long>(
                     address - reinterpret_cast<uintptr_t>(known ? info.dli_fbase : nullptr)),
                 known && info.dli_sname != nullptr ? info.dli_sname : "?",
                 kReasonNames[g_notes[i].reason.load(std::memory_order_relaxed)],
                 g_notes[i].detail.load(std::memory_order_relaxed));
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(std::min(n, 511)));
  }
}

void SetStop(uintptr_t start, uintptr_t end) {
  StoreStop(start, end);
  g_rules_generation.fetch_add(1, std::memory_order_relaxed);
}

void ForgetRules() {
  g_rules_generation.fetch_add(1, std::memory_order_relaxed);
  for (Slot& slot : g_rules) {
    slot.rule.store(kNotReady, std::memory_order_relaxed);
    slot.address.store(0, std::memory_order_release);
  }
}

#else

bool Init(void* (*)(void*, const char*)) { return false; }
int Backtrace(void**, int, ReplayNote** note, uintptr_t) {
  if (note != nullptr) *note = nullptr;
  return -1;
}
void PrefetchReplay(uintptr_t) {}
void PrintUnsupported() {}
void SetStop(uintptr_t start, uintptr_t end) { StoreStop(start, end); }
void ForgetRules() {}

#endif

int CutAtStop(void** frames, int depth) {
  const uintptr_t start = g_stop_start.load(std::memory_order_relaxed);
  const uintptr_t size = g_stop_size.load(std::memory_order_relaxed);
  for (int i = 0; i < depth; ++i) {
    if (reinterpret_cast<uintptr_t>(frames[i]) - start < size) return i + 1;
  }
  return depth;
}

}  // namespace gpumem::eh_frame_unwinder
