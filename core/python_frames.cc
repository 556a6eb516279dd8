#include "core/python_frames.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "core/hot_path.h"
#include "core/spin_lock.h"
#include "core/trace_ids.h"
#include "core/wire_writer.h"

namespace gpumem {
namespace {

// Offsets every CPython 3.x build without Py_TRACE_REFS shares (PyObject_HEAD, PyASCIIObject).
constexpr uint32_t kObType = 8;
constexpr uint32_t kUnicodeLength = 16;
constexpr uint32_t kUnicodeState = 32;
constexpr uint32_t kStateKindShift = 2;
constexpr uint32_t kStateKindMask = 7;
constexpr uint32_t kStateCompact = 0x20;
constexpr uint32_t kStateAscii = 0x40;
constexpr uint32_t kStateReady = 0x80;  // 3.10 and 3.11 only
constexpr int32_t kCodeUnitBytes = 2;   // sizeof(_Py_CODEUNIT)

struct Python {
  std::atomic<bool> available{false};
  PythonLayout layout;
  void* (*thread_state)() = nullptr;  // PyGILState_GetThisThreadState
  uintptr_t code_type = 0;            // &PyCode_Type
  uintptr_t unicode_type = 0;         // &PyUnicode_Type
  PythonCodeTable::Addr2Line addr2line = nullptr;
};
GPUMEM_HOT_DATA constinit Python g_python;

template <typename T>
T Load(uintptr_t address) {
  T value;
  memcpy(&value, reinterpret_cast<const void*>(address), sizeof(value));
  return value;
}

bool PointerOk(uintptr_t p) { return p >= 4096 && (p & 7) == 0; }

uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value;
  hash *= 0xff51afd7ed558ccdull;
  return hash ^ (hash >> 32);
}

uint64_t CodeHash(const PythonFrame& frame) {
  uint64_t hash = Mix(0x9e3779b97f4a7c15ull, frame.code);
  hash = Mix(hash, frame.filename ^ (frame.name << 1));
  hash = Mix(hash, static_cast<uint32_t>(frame.first_line));
  return hash == 0 ? 1 : hash;
}

// "3.12.3" and its minor version from Py_Version (3.11+), else from Py_GetVersion()'s text.
// False for an alpha or beta (their layouts moved during development).
bool ReadVersion(void* (*real_dlsym)(void*, const char*), PythonStatusInfo* info, int* minor) {
  if (const auto* hex = static_cast<const unsigned long*>(real_dlsym(RTLD_DEFAULT, "Py_Version"))) {
    const unsigned long v = *hex;
    const unsigned level = (v >> 4) & 0xF;
    snprintf(info->version, sizeof(info->version), "%lu.%lu.%lu%s", (v >> 24) & 0xFF,
             (v >> 16) & 0xFF, (v >> 8) & 0xFF,
             level == 0xA   ? "a"
             : level == 0xB ? "b"
             : level == 0xC ? "rc"
                            : "");
    *minor = (v >> 24) == 3 ? static_cast<int>((v >> 16) & 0xFF) : 0;
    return level == 0xC || level == 0xF;
  }
  auto get_version = reinterpret_cast<const char* (*)()>(real_dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  if (get_version == nullptr) return false;
  const char* text = get_version();  // formats into a static buffer: no allocation
  size_t n = 0;
  while (n + 1 < sizeof(info->version) && text[n] != '\0' && text[n] != ' ') {
    info->version[n] = text[n];
    ++n;
  }
  info->version[n] = '\0';
  unsigned major = 0, minor_number = 0, micro = 0;
  char rest[8] = {};
  if (sscanf(info->version, "%u.%u.%u%7s", &major, &minor_number, &micro, rest) < 3) return false;
  *minor = major == 3 ? static_cast<int>(minor_number) : 0;
  return rest[0] == '\0' || strncmp(rest, "rc", 2) == 0 || rest[0] == '+';
}

// 3.13 describes its own layout for debuggers (_Py_DebugOffsets at the start of _PyRuntime):
// the offsets used here must be the ones it gives.
bool CheckDebugOffsets(uintptr_t runtime, const PythonLayout& layout, char* detail,
                       size_t capacity) {
  if (runtime == 0 || memcmp(reinterpret_cast<const void*>(runtime), "xdebugpy", 8) != 0) {
    snprintf(detail, capacity, "_PyRuntime has no debug offsets to check the layout against");
    return false;
  }
  struct Expected {
    uint32_t at;
    uint64_t value;
    const char* name;
  };
  const Expected expected[] = {
      {16, 0, "free_threaded"},
      {184, layout.thread_frame, "thread_state.current_frame"},
      {232, layout.frame_previous, "interpreter_frame.previous"},
      {240, layout.frame_code, "interpreter_frame.executable"},
      {248, layout.frame_instr, "interpreter_frame.instr_ptr"},
      {264, static_cast<uint64_t>(layout.frame_owner), "interpreter_frame.owner"},
      {280, layout.code_filename, "code_object.filename"},
      {296, layout.code_name, "code_object.qualname"},
      {312, layout.code_first_line, "code_object.firstlineno"},
      {344, static_cast<uint64_t>(layout.code_bytecode), "code_object.co_code_adaptive"},
      {360, kObType, "pyobject.ob_type"},
  };
  for (const Expected& e : expected) {
    const uint64_t actual = Load<uint64_t>(runtime + e.at);
    if (actual != e.value) {
      snprintf(detail, capacity, "_Py_DebugOffsets.%s is %llu, the 3.13 layout has %llu", e.name,
               static_cast<unsigned long long>(actual), static_cast<unsigned long long>(e.value));
      return false;
    }
  }
  return true;
}

// One character of a str: UTF-8, except a lone surrogate U+DC80..U+DCFF, which is how Python
// holds a byte of a file name that is not UTF-8 (os.fsdecode, surrogateescape): that byte again,
// so a co_filename names the file as the file system does.
void AppendUtf8(uint32_t c, char* out, size_t capacity, size_t* n) {
  char bytes[4];
  size_t size;
  if (c >= 0xDC80 && c <= 0xDCFF) {
    bytes[0] = static_cast<char>(c - 0xDC00);
    size = 1;
  } else if (c < 0x80) {
    bytes[0] = static_cast<char>(c);
    size = 1;
  } else if (c < 0x800) {
    bytes[0] = static_cast<char>(0xC0 | (c >> 6));
    bytes[1] = static_cast<char>(0x80 | (c & 0x3F));
    size = 2;
  } else if (c < 0x10000) {
    bytes[0] = static_cast<char>(0xE0 | (c >> 12));
    bytes[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    bytes[2] = static_cast<char>(0x80 | (c & 0x3F));
    size = 3;
  } else {
    if (c > 0x10FFFF) c = 0xFFFD;
    bytes[0] = static_cast<char>(0xF0 | (c >> 18));
    bytes[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    bytes[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    bytes[3] = static_cast<char>(0x80 | (c & 0x3F));
    size = 4;
  }
  if (*n + size >= capacity) {
    *n = capacity;  // full: the caller stops
    return;
  }
  memcpy(out + *n, bytes, size);
  *n += size;
}

}  // namespace

PythonLayout PythonLayoutFor(int minor) {
  PythonLayout l;
#if defined(__x86_64__)
  switch (minor) {
    case 10:  // Include/cpython/pystate.h, cpython/frameobject.h, cpython/code.h of 3.10
      l.thread_frame = 24;
      l.frame_objects = true;
      l.frame_code = 32;
      l.frame_previous = 24;  // f_back
      l.frame_instr = 96;     // f_lasti
      l.code_first_line = 40;
      l.code_filename = 104;
      l.code_name = 112;  // co_name
      l.ascii_data = 48;
      l.compact_data = 72;
      l.ready_bit = true;
      break;
    case 11:                // + Include/internal/pycore_frame.h: _PyCFrame, _PyInterpreterFrame
      l.thread_frame = 56;  // cframe
      l.cframe_frame = 8;   // current_frame, after uint8_t use_tracing
      l.frame_code = 32;
      l.frame_previous = 48;
      l.frame_instr = 56;  // prev_instr
      l.frame_is_entry = 68;
      l.frame_owner = 69;
      l.code_first_line = 72;
      l.code_filename = 112;
      l.code_name = 128;  // co_qualname
      l.code_bytecode = 184;
      l.ascii_data = 48;
      l.compact_data = 72;
      l.ready_bit = true;
      break;
    case 12:  // the same headers of 3.12 (and DESIGN's measurement on the GPU machine)
      l.thread_frame = 56;
      l.cframe_frame = 0;
      l.frame_code = 0;
      l.frame_previous = 8;
      l.frame_instr = 56;
      l.frame_owner = 70;
      l.cstack_owner = 3;  // FRAME_OWNED_BY_CSTACK
      l.code_first_line = 68;
      l.code_filename = 112;
      l.code_name = 128;
      l.code_bytecode = 192;
      l.ascii_data = 40;
      l.compact_data = 56;
      break;
    case 13:                // of 3.13: no _PyCFrame; checked against _Py_DebugOffsets at run time
      l.thread_frame = 72;  // current_frame
      l.frame_code = 0;     // f_executable
      l.frame_previous = 8;
      l.frame_instr = 56;  // instr_ptr
      l.frame_owner = 70;
      l.cstack_owner = 3;
      l.code_first_line = 68;
      l.code_filename = 112;
      l.code_name = 128;
      l.code_bytecode = 200;
      l.ascii_data = 40;
      l.compact_data = 56;
      break;
    default:
      return l;
  }
  l.minor = minor;
#else
  (void)minor;
#endif
  return l;
}

bool FindPython(void* (*real_dlsym)(void*, const char*), PythonStatusInfo* info) {
  *info = PythonStatusInfo{};
  // Symbols looked for and missing leave an error for the host's next dlerror(): clear it.
  struct ClearDlError {
    ~ClearDlError() { dlerror(); }
  } clear_dlerror;
  auto symbol = [&](const char* name) { return real_dlsym(RTLD_DEFAULT, name); };
  void* thread_state = symbol("PyGILState_GetThisThreadState");
  if (thread_state == nullptr) return false;
  info->found = true;
  int minor = 0;
  const bool released = ReadVersion(real_dlsym, info, &minor);
  if (info->version[0] == '\0') snprintf(info->version, sizeof(info->version), "unknown");
  const PythonLayout layout = PythonLayoutFor(minor);
  void* code_type = symbol("PyCode_Type");
  void* unicode_type = symbol("PyUnicode_Type");
  void* type_type = symbol("PyType_Type");
  void* addr2line = symbol("PyCode_Addr2Line");
#if !defined(__x86_64__)
  snprintf(info->detail, sizeof(info->detail), "Python frame layouts are known for x86-64 only");
  return true;
#endif
  if (!released || layout.minor == 0) {
    snprintf(info->detail, sizeof(info->detail),
             "no frame layout for Python %s (known: 3.10 to 3.13 releases)", info->version);
    return true;
  }
  if (code_type == nullptr || unicode_type == nullptr || type_type == nullptr ||
      addr2line == nullptr) {
    snprintf(info->detail, sizeof(info->detail),
             "PyCode_Type, PyUnicode_Type, PyType_Type or PyCode_Addr2Line not found");
    return true;
  }
  // A free-threaded or Py_TRACE_REFS build has a longer object header: ob_type moves.
  const auto type = reinterpret_cast<uintptr_t>(type_type);
  if (Load<uintptr_t>(reinterpret_cast<uintptr_t>(code_type) + kObType) != type ||
      Load<uintptr_t>(reinterpret_cast<uintptr_t>(unicode_type) + kObType) != type) {
    snprintf(info->detail, sizeof(info->detail),
             "object header of an unknown size (free-threaded or trace-refs build)");
    return true;
  }
  if (layout.minor == 13 && !CheckDebugOffsets(reinterpret_cast<uintptr_t>(symbol("_PyRuntime")),
                                               layout, info->detail, sizeof(info->detail))) {
    return true;
  }
  g_python.layout = layout;
  g_python.thread_state = reinterpret_cast<void* (*)()>(thread_state);
  g_python.code_type = reinterpret_cast<uintptr_t>(code_type);
  g_python.unicode_type = reinterpret_cast<uintptr_t>(unicode_type);
  g_python.addr2line = reinterpret_cast<PythonCodeTable::Addr2Line>(addr2line);
  g_python.available.store(true, std::memory_order_release);
  info->supported = true;
  snprintf(info->detail, sizeof(info->detail),
           "CPython 3.%d frame layout (x86-64)%s; frames read without the GIL", minor,
           minor == 13 ? ", checked against _Py_DebugOffsets" : "");
  return true;
}

bool EvalLoopRange(void* (*real_dlsym)(void*, const char*), uintptr_t* start, uintptr_t* end) {
  void* eval = real_dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  dlerror();  // a miss leaves an error for the host's next dlerror()
  Dl_info info{};
  void* symbol_entry = nullptr;
  if (eval == nullptr || dladdr1(eval, &info, &symbol_entry, RTLD_DL_SYMENT) == 0) return false;
  const auto* symbol = static_cast<const ElfW(Sym)*>(symbol_entry);
  if (symbol == nullptr || symbol->st_size == 0) {
    return false;
  }
  *start = reinterpret_cast<uintptr_t>(eval);
  *end = *start + symbol->st_size;
  return true;
}

bool PythonFramesAvailable() { return g_python.available.load(std::memory_order_acquire); }

GPUMEM_HOT size_t ReadPythonFrames(PythonFrame* frames, size_t capacity, bool* truncated) {
  *truncated = false;
  if (!g_python.available.load(std::memory_order_acquire)) return 0;
  const PythonLayout& l = g_python.layout;
  const auto thread = reinterpret_cast<uintptr_t>(g_python.thread_state());
  if (!PointerOk(thread)) return 0;
  uintptr_t frame = Load<uintptr_t>(thread + l.thread_frame);
  if (l.cframe_frame >= 0) {
    if (!PointerOk(frame)) return 0;
    frame = Load<uintptr_t>(frame + static_cast<uint32_t>(l.cframe_frame));
  }
  size_t count = 0;
  uint32_t group = 0;
  // Shim frames do not count towards the depth; the walk is bounded all the same.
  for (size_t steps = 0; PointerOk(frame) && steps < 2 * kMaxPythonFrames + 16;
       ++steps, frame = Load<uintptr_t>(frame + l.frame_previous)) {
    if (l.frame_owner >= 0) {
      const int owner = Load<int8_t>(frame + static_cast<uint32_t>(l.frame_owner));
      if (owner == l.cstack_owner) {
        ++group;  // the entry frame of a C-level eval: older frames run in the next activation
        continue;
      }
      if (owner < 0 || owner > 3) break;  // not a frame this layout knows
    }
    const uintptr_t code = Load<uintptr_t>(frame + l.frame_code);
    if (!PointerOk(code) || Load<uintptr_t>(code + kObType) != g_python.code_type) break;
    if (count == capacity) {
      *truncated = true;
      break;
    }
    PythonFrame& out = frames[count++];
    out = PythonFrame{};  // the caller's array is left uninitialised
    out.code = code;
    out.filename = Load<uintptr_t>(code + l.code_filename);
    out.name = Load<uintptr_t>(code + l.code_name);
    out.first_line = Load<int32_t>(code + l.code_first_line);
    out.byte_offset = -1;
    if (l.frame_objects) {
      const int32_t lasti = Load<int32_t>(frame + l.frame_instr);
      if (lasti >= 0 && lasti < (1 << 28)) out.byte_offset = lasti * kCodeUnitBytes;
      out.group = static_cast<uint32_t>(count - 1);  // 3.10: one eval call per frame
    } else {
      const uintptr_t instr = Load<uintptr_t>(frame + l.frame_instr);
      const uintptr_t bytecode = code + static_cast<uint32_t>(l.code_bytecode);
      const int64_t units = Load<int64_t>(code + l.code_size);
      if (instr >= bytecode && units > 0 && instr - bytecode < static_cast<uint64_t>(units) * 2) {
        out.byte_offset = static_cast<int32_t>(instr - bytecode);
      }
      out.group = group;
      if (l.frame_is_entry >= 0 && Load<uint8_t>(frame + static_cast<uint32_t>(l.frame_is_entry))) {
        ++group;  // 3.11: the first frame its C-level eval ran
      }
    }
  }
  return count;
}

GPUMEM_HOT uint64_t HashPythonFrames(uint64_t hash, const PythonFrame* frames, size_t count,
                                     bool truncated) {
  hash = Mix(hash, (uint64_t{count} << 1) | (truncated ? 1 : 0));
  for (size_t i = 0; i < count; ++i) {
    const PythonFrame& f = frames[i];
    // Two independent products, one serial step per frame.
    const uint64_t a = (f.code ^ (uint64_t{static_cast<uint32_t>(f.byte_offset)} << 47) ^
                        (uint64_t{f.group} << 40)) *
                       0x9e3779b97f4a7c15ull;
    const uint64_t b =
        (f.filename ^ (f.name << 7) ^ (uint64_t{static_cast<uint32_t>(f.first_line)} << 45)) *
        0xc2b2ae3d27d4eb4full;
    hash = Mix(hash, a ^ (b >> 1));
  }
  return hash == 0 ? 1 : hash;
}

size_t DecodePythonString(uintptr_t str, const PythonLayout& layout, uintptr_t unicode_type,
                          char* out, size_t capacity) {
  if (capacity == 0) return 0;
  auto unknown = [&]() -> size_t {
    const size_t n = capacity > 1 ? 1 : 0;
    if (n) out[0] = '?';
    out[n] = '\0';
    return n;
  };
  if (!PointerOk(str) || Load<uintptr_t>(str + kObType) != unicode_type) return unknown();
  const int64_t length = Load<int64_t>(str + kUnicodeLength);
  const uint32_t state = Load<uint32_t>(str + kUnicodeState);
  if (length < 0 || !(state & kStateCompact) || (layout.ready_bit && !(state & kStateReady))) {
    return unknown();
  }
  if (state & kStateAscii) {
    size_t n =
        static_cast<uint64_t>(length) < capacity - 1 ? static_cast<size_t>(length) : capacity - 1;
    memcpy(out, reinterpret_cast<const void*>(str + layout.ascii_data), n);
    out[n] = '\0';
    return n;
  }
  const uint32_t kind = (state >> kStateKindShift) & kStateKindMask;
  if (kind != 1 && kind != 2 && kind != 4) return unknown();
  const uintptr_t data = str + layout.compact_data;
  size_t n = 0;
  for (int64_t i = 0; i < length; ++i) {
    uint32_t c = kind == 1   ? Load<uint8_t>(data + i)
                 : kind == 2 ? Load<uint16_t>(data + 2 * i)
                             : Load<uint32_t>(data + 4 * i);
    size_t before = n;
    AppendUtf8(c, out, capacity, &n);
    if (n == capacity) {
      n = before;
      break;
    }
  }
  out[n] = '\0';
  return n;
}

bool PythonCodeTable::Init() {
  if (codes_ != nullptr) return true;
  void* codes = mmap(nullptr, kCodeSlots * sizeof(CodeSlot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (codes == MAP_FAILED) return false;
  void* lines = mmap(nullptr, kLineSlots * sizeof(LineSlot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (lines == MAP_FAILED) {
    munmap(codes, kCodeSlots * sizeof(CodeSlot));
    return false;
  }
  codes_ = static_cast<CodeSlot*>(codes);
  lines_ = static_cast<LineSlot*>(lines);
  return true;
}

void PythonCodeTable::Reset() {
  code_lock_.clear();
  line_lock_.clear();
  next_id_.store(1);
  line_count_.store(0);
  if (codes_ != nullptr) madvise(codes_, kCodeSlots * sizeof(CodeSlot), MADV_DONTNEED);
  if (lines_ != nullptr) madvise(lines_, kLineSlots * sizeof(LineSlot), MADV_DONTNEED);
}

void PythonCodeTable::Configure(const PythonLayout& layout, uintptr_t unicode_type,
                                Addr2Line addr2line) {
  layout_ = layout;
  unicode_type_ = unicode_type;
  addr2line_ = addr2line;
}

void PythonCodeTable::UseFoundPython() {
  Configure(g_python.layout, g_python.unicode_type, g_python.addr2line);
}

uint64_t PythonCodeTable::Intern(const PythonFrame& frame, PacketSink& sink) {
  if (codes_ == nullptr) return 0;
  const uint64_t hash = CodeHash(frame);
  auto find = [&]() -> uint64_t {
    for (size_t i = hash & (kCodeSlots - 1);; i = (i + 1) & (kCodeSlots - 1)) {
      const uint64_t slot_hash = codes_[i].hash.load(std::memory_order_acquire);
      if (slot_hash == 0) return 0;
      const CodeSlot& s = codes_[i];
      if (slot_hash == hash && s.code == frame.code && s.filename == frame.filename &&
          s.name == frame.name && s.first_line == frame.first_line) {
        return s.id;
      }
    }
  };
  if (uint64_t id = find(); id != 0) return id;

  SpinGuard guard(code_lock_);
  if (uint64_t id = find(); id != 0) return id;  // another thread won the race
  const uint64_t id = next_id_.load(std::memory_order_relaxed);
  if (id > kCodeSlots / 4 * 3) return 0;

  constexpr size_t kMaxText = 1024;
  char filename[kMaxText];
  char name[kMaxText];
  DecodePythonString(frame.filename, layout_, unicode_type_, filename, sizeof(filename));
  DecodePythonString(frame.name, layout_, unicode_type_, name, sizeof(name));
  uint8_t buffer[2 * kMaxText + 64];
  wire::Writer writer(buffer, sizeof(buffer));
  const size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  const size_t code = writer.BeginNested(proto::packet_field::kPythonCode);
  writer.Varint(proto::python_code_field::kId, id);
  writer.String(proto::python_code_field::kFilename, filename);
  writer.String(proto::python_code_field::kFunction, name);
  writer.Varint(proto::python_code_field::kFirstLine,
                static_cast<uint32_t>(frame.first_line > 0 ? frame.first_line : 0));
  writer.EndNested(code);
  writer.EndNested(packet);
  if (writer.overflowed() || !sink.AppendPacket(writer.data(), writer.size())) return 0;

  size_t i = hash & (kCodeSlots - 1);
  while (codes_[i].hash.load(std::memory_order_relaxed) != 0) i = (i + 1) & (kCodeSlots - 1);
  CodeSlot& slot = codes_[i];
  slot.code = frame.code;
  slot.filename = frame.filename;
  slot.name = frame.name;
  slot.first_line = frame.first_line;
  slot.id = id;
  slot.hash.store(hash, std::memory_order_release);  // published after the packet is written
  next_id_.store(id + 1, std::memory_order_relaxed);
  return id;
}

uint32_t PythonCodeTable::Line(uint64_t code_id, const PythonFrame& frame) {
  if (frame.byte_offset < 0) return frame.first_line > 0 ? frame.first_line : 0;
  if (code_id == 0 || lines_ == nullptr || addr2line_ == nullptr) return 0;
  const uint64_t key = code_id << 32 | (static_cast<uint32_t>(frame.byte_offset) + 1);
  const size_t start = static_cast<size_t>(Mix(0, key) & (kLineSlots - 1));
  for (size_t i = start;; i = (i + 1) & (kLineSlots - 1)) {
    const uint64_t slot_key = lines_[i].key.load(std::memory_order_acquire);
    if (slot_key == key) return lines_[i].line;
    if (slot_key == 0) break;
  }
  // Reads only the code object's immutable line table: no GIL needed, no object allocated.
  const int computed = addr2line_(reinterpret_cast<void*>(frame.code), frame.byte_offset);
  const uint32_t line = computed > 0 ? static_cast<uint32_t>(computed) : 0;
  if (line_count_.load(std::memory_order_relaxed) >= kLineSlots / 4 * 3) return line;  // full
  SpinGuard guard(line_lock_);
  size_t i = start;
  for (;; i = (i + 1) & (kLineSlots - 1)) {
    const uint64_t slot_key = lines_[i].key.load(std::memory_order_relaxed);
    if (slot_key == key) return line;  // another thread cached it
    if (slot_key == 0) break;
  }
  lines_[i].line = line;
  lines_[i].key.store(key, std::memory_order_release);
  line_count_.fetch_add(1, std::memory_order_relaxed);
  return line;
}

}  // namespace gpumem
