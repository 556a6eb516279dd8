#include "report/stacks/user_frames.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "report/format/printable.h"
#include "report/stacks/python_stacks.h"

namespace gpumem::report {
namespace {

bool StartsWithAny(absl::string_view text, std::initializer_list<absl::string_view> prefixes) {
  for (absl::string_view prefix : prefixes) {
    if (absl::StartsWith(text, prefix)) return true;
  }
  return false;
}

// CUDA's driver and runtime and gpumem's own library: what every allocation passes through, so
// naming them says nothing.
bool IsCudaOrGpumemModule(absl::string_view basename) {
  return StartsWithAny(basename, {"libcuda", "libgpumem", "libnvidia"});
}

// The C and C++ runtime and the dynamic loader.
bool IsRuntimeModule(absl::string_view basename) {
  return StartsWithAny(basename, {"libc.so", "libc-", "libm.so", "libm-", "libstdc++", "libgcc_s",
                                  "ld-linux", "libpthread", "libdl.so", "librt.so"});
}

// The basenames of libraries that are never the user's, wherever they lie (the test suite's fake
// CUDA libraries live in the build tree).
bool IsFrameworkModule(absl::string_view basename) {
  return IsCudaOrGpumemModule(basename) || IsRuntimeModule(basename) ||
         StartsWithAny(basename, {"libcublas", "libcudnn", "libnccl", "libcupti", "libnvrtc"});
}

// The innermost library module in frames[0, end): the basename of a native frame's module that is
// neither the user's, nor CUDA's, nor the runtime's or the interpreter's. Empty when none.
absl::string_view InnermostLibrary(const std::vector<Frame>& frames, size_t end) {
  for (size_t i = 0; i < end; ++i) {
    const Frame& frame = frames[i];
    if (frame.python || frame.module.empty() || IsUserModule(frame.module)) continue;
    const absl::string_view basename = PathBasename(frame.module);
    if (IsCudaOrGpumemModule(basename) || IsRuntimeModule(basename) ||
        IsInterpreterModule(frame.module) || absl::StartsWith(basename, "[")) {
      continue;
    }
    return basename;
  }
  return "";
}

// The library in a via line: a tensor that PyTorch's allocator asked the driver for on its own
// (the cudaMallocAsync backend: no segment holds it) reads as a tensor, not as the allocator's
// module.
std::string LibraryLabel(absl::string_view library) {
  if (absl::StartsWith(library, "libc10_cuda.so")) return "PyTorch tensor";
  return std::string(library);
}

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Calls visit(word, end) for each identifier or number in `text`, `end` the index just past it.
template <typename Visit>
void ForEachWord(absl::string_view text, Visit&& visit) {
  for (size_t i = 0; i < text.size();) {
    if (!IsIdentifierChar(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && IsIdentifierChar(text[end])) ++end;
    visit(text.substr(i, end - i), end);
    i = end;
  }
}

// Where `name` has an operator's name at `at` ("operator<<", "operator()"): its length; else 0.
size_t OperatorLength(absl::string_view name, size_t at) {
  constexpr absl::string_view kOperator = "operator";
  if (name.substr(at, kOperator.size()) != kOperator) return 0;
  if (at > 0 && IsIdentifierChar(name[at - 1])) {
    return 0;
  }
  size_t end = at + kOperator.size();
  if (name.substr(end, 2) == "()" || name.substr(end, 2) == "[]") return end + 2 - at;
  while (end < name.size() &&
         absl::string_view("+-*/%^&|~!=<>,").find(name[end]) != absl::string_view::npos) {
    ++end;
  }
  return end - at;
}

// The index just past the bracket that closes the one at `open`, counting nested <> and ().
size_t Closing(absl::string_view name, size_t open) {
  int depth = 0;
  for (size_t i = open; i < name.size(); ++i) {
    if (const size_t op = OperatorLength(name, i); op > 0) {
      i += op - 1;
      continue;
    }
    if (name[i] == '<' || name[i] == '(') ++depth;
    if (name[i] == '>' || name[i] == ')') --depth;
    if (depth == 0) return i + 1;
  }
  return name.size();
}

// The function without its parameter list ("f(…) const" -> "f").
std::string WithoutParameters(absl::string_view name) {
  std::string shortened = ShortCppName(name);
  const size_t params = shortened.rfind('(');
  if (params != std::string::npos && params > 0 &&
      shortened.find(')', params) != std::string::npos &&
      !absl::StrContains(shortened.substr(params), "anonymous")) {
    shortened.resize(params);
  }
  return shortened;
}

// "at::_ops::addmm::call(...)" or "...::redispatch(...)" -> "aten::addmm"; else empty.
std::string AtenOperator(absl::string_view function) {
  constexpr absl::string_view kOps = "at::_ops::";
  if (!absl::ConsumePrefix(&function, kOps)) return "";
  const size_t end = function.find("::");
  if (end == absl::string_view::npos) return "";
  const absl::string_view name = function.substr(0, end);
  absl::string_view method = function.substr(end + 2);
  if (!absl::ConsumePrefix(&method, "call") && !absl::ConsumePrefix(&method, "redispatch")) {
    return "";
  }
  if (!method.empty() && method.front() != '(') return "";
  return absl::StrCat("aten::", name);
}

// What common autograd nodes are the gradient of.
constexpr std::pair<absl::string_view, absl::string_view> kGradientOf[] = {
    {"AddmmBackward0", "a Linear"},
    {"MmBackward0", "a Linear"},
    {"LinearBackward0", "a Linear"},
    {"ConvolutionBackward0", "a convolution"},
    {"CudnnConvolutionBackward0", "a convolution"},
    {"NativeLayerNormBackward0", "a LayerNorm"},
    {"NativeBatchNormBackward0", "a BatchNorm"},
    {"CudnnBatchNormBackward0", "a BatchNorm"},
    {"EmbeddingBackward0", "an Embedding"},
    {"EmbeddingDenseBackward0", "an Embedding"},
    {"ScaledDotProductEfficientAttentionBackward0", "attention"},
    {"ScaledDotProductFlashAttentionBackward0", "attention"},
    {"BmmBackward0", "a batched matmul"},
    {"ReluBackward0", "a ReLU"},
    {"GeluBackward0", "a GELU"},
    {"SoftmaxBackward0", "a softmax"},
    {"LogSoftmaxBackward0", "a log-softmax"},
    {"NllLossBackward0", "a loss"},
};

// "torch::autograd::generated::AddmmBackward0::apply(...)" -> "AddmmBackward0 (gradient of a
// Linear)"; else empty.
std::string AutogradNode(absl::string_view function) {
  if (!absl::StartsWith(function, "torch::autograd::")) return "";
  const size_t apply = function.find("::apply");
  if (apply == absl::string_view::npos) return "";
  absl::string_view node = function.substr(0, apply);
  node = node.substr(node.rfind("::") + 2);
  absl::string_view stem = node;
  while (!stem.empty() && absl::ascii_isdigit(stem.back())) stem.remove_suffix(1);
  if (!absl::EndsWith(stem, "Backward")) return "";
  for (const auto& [name, of] : kGradientOf) {
    if (name == node) return absl::StrCat(node, " (gradient of ", of, ")");
  }
  return std::string(node);
}

// The innermost function in frames[0, end) that `name_of` names.
std::string Innermost(const std::vector<Frame>& frames, size_t end,
                      std::string (*name_of)(absl::string_view)) {
  for (size_t i = 0; i < end; ++i) {
    if (frames[i].python) continue;
    std::string name = name_of(frames[i].function);
    if (!name.empty()) return name;
  }
  return "";
}

// Where the user's code called into a framework: the innermost Python frame when it is a library
// frame; for a native user frame, the library function it called.
std::string FrameworkEntry(const std::vector<Frame>& frames, size_t user) {
  for (size_t i = 0; i < user; ++i) {
    if (frames[i].python) return IsUserFrame(frames[i]) ? "" : DottedPythonName(frames[i]);
  }
  if (user == 0 || user >= frames.size() || frames[user].python) return "";
  const Frame& called = frames[user - 1];
  if (called.python || called.function.empty()) return "";
  return WithoutParameters(called.function);
}

// UserFrameText, not escaped yet.
std::string RawUserFrameText(const Frame& frame) {
  std::string text;
  const std::string function = frame.python ? frame.function : ShortCppName(frame.function);
  if (!frame.file.empty()) {
    text = std::string(PathBasename(frame.file));
    if (frame.line > 0) absl::StrAppend(&text, ":", frame.line);
  } else {
    text = absl::StrFormat("%s+%#x", PathBasename(frame.module), frame.module_offset);
  }
  if (!function.empty()) absl::StrAppend(&text, " in ", function);
  return text;
}

}  // namespace

bool IsInterpreterModule(absl::string_view module) {
  absl::string_view basename = PathBasename(module);
  if (absl::StartsWith(basename, "libpython")) return true;
  if (!absl::ConsumePrefix(&basename, "python")) return false;
  for (const char c : basename) {
    if (!absl::ascii_isdigit(c) && c != '.') return false;
  }
  return true;
}

bool IsUserModule(absl::string_view module) {
  if (module.empty() || absl::StartsWith(module, "[")) return false;
  if (StartsWithAny(module, {"/usr/lib", "/lib", "/usr/local/cuda", "/opt/nvidia"})) return false;
  // Installed packages, the standard library's extension modules (lib-dynload) and Python
  // distributions installed in a home or /opt directory (pyenv, conda).
  if (InPythonInstallation(module)) return false;
  for (absl::string_view part : {"/.pyenv/", "conda", "/miniforge", "/mambaforge"}) {
    if (absl::StrContains(module, part)) return false;
  }
  return !IsInterpreterModule(module) && !IsFrameworkModule(PathBasename(module));
}

bool IsUserFrame(const Frame& frame) {
  if (frame.left_out > 0) return false;
  return frame.python ? !IsLibraryPythonFile(frame.file) : IsUserModule(frame.module);
}

const Frame* UserFrame(const std::vector<Frame>& frames) {
  for (const Frame& frame : frames) {
    if (IsUserFrame(frame)) return &frame;
  }
  return nullptr;
}

std::string ShortCppName(absl::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (const size_t op = OperatorLength(name, i); op > 0) {
      absl::StrAppend(&out, name.substr(i, op));
      i += op;
      continue;
    }
    const char c = name[i];
    if (c != '<' && c != '(') {
      out.push_back(c);
      ++i;
      continue;
    }
    const size_t end = Closing(name, i);
    const absl::string_view inside = name.substr(i + 1, end - i - 2);
    if (c == '<') {
      absl::StrAppend(&out, "<…>");
    } else if (inside.empty() || inside == "void" || inside == "anonymous namespace") {
      absl::StrAppend(&out, name.substr(i, end - i));
    } else {
      absl::StrAppend(&out, "(…)");
    }
    i = end;
  }
  return out;
}

namespace {

constexpr absl::string_view kAnonymousNamespace = "(anonymous namespace)";

// `name` without its namespace qualifiers: every "identifier::" and "(anonymous namespace)::"
// dropped ("std::array<at::native::Foo<float>, 2ul>" -> "array<Foo<float>, 2ul>"); "> >" closes
// as ">>". A class's member ("Foo<int>::bar") keeps its class.
std::string WithoutNamespaces(absl::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (name.substr(i, kAnonymousNamespace.size()) == kAnonymousNamespace &&
        name.substr(i + kAnonymousNamespace.size(), 2) == "::") {
      i += kAnonymousNamespace.size() + 2;
      continue;
    }
    if (IsIdentifierChar(name[i]) && (i == 0 || !IsIdentifierChar(name[i - 1]))) {
      size_t end = i;
      while (end < name.size() && IsIdentifierChar(name[end])) ++end;
      if (name.substr(end, 2) == "::") {
        i = end + 2;  // a namespace (or a class without template arguments)
        continue;
      }
      absl::StrAppend(&out, name.substr(i, end - i));
      i = end;
      continue;
    }
    if (name.substr(i, 3) == "> >") {
      out.push_back('>');
      i += 2;  // the space too
      continue;
    }
    out.push_back(name[i++]);
  }
  return out;
}

// The last identifier in `args` that names what a kernel computes: a functor or op type, or the
// function a lambda was written in (an identifier followed by its parameters); empty if none.
std::string ComputeHint(absl::string_view args) {
  std::string hint;
  ForEachWord(args, [&](absl::string_view word, size_t end) {
    size_t after = end;
    if (after < args.size() && args[after] == '<') after = Closing(args, after);
    const bool function = after < args.size() && args[after] == '(' && word != "operator" &&
                          word != "lambda" && !std::isdigit(static_cast<unsigned char>(word[0]));
    if (function || absl::EndsWith(word, "Functor") || absl::EndsWith(word, "functor") ||
        absl::EndsWith(word, "Op")) {
      hint = std::string(word);
    }
  });
  return hint;
}

// Whether every word of `args` is a number or a built-in type or value ("<float, float, 4, true,
// 5ul>"): a kernel's tuning, not what it computes.
bool OnlyBuiltinArguments(absl::string_view args) {
  static constexpr absl::string_view kBuiltins[] = {
      "bool",    "char",    "short",    "int",           "long",     "unsigned", "signed",
      "float",   "double",  "void",     "true",          "false",    "const",    "half",
      "__half",  "Half",    "BFloat16", "__nv_bfloat16", "size_t",   "int8_t",   "int16_t",
      "int32_t", "int64_t", "uint8_t",  "uint16_t",      "uint32_t", "uint64_t"};
  bool builtin = true;
  ForEachWord(args, [&](absl::string_view word, size_t) {
    builtin = builtin &&
              (std::isdigit(static_cast<unsigned char>(word[0])) ||
               std::find(std::begin(kBuiltins), std::end(kBuiltins), word) != std::end(kBuiltins));
  });
  return builtin;
}

// A C kernel name longer than kShortKernelName, as cuBLAS's spell out their tiling
// ("sm80_xmma_gemm_f32f32_..._execute_kernel__5x_cublas"): its first three words and its last,
// "sm80_xmma_gemm_…_cublas". Shorter ones, and names without such words, as they are.
std::string ShortCKernelName(absl::string_view name) {
  if (name.size() <= kShortKernelName || name.find(' ') != absl::string_view::npos) {
    return std::string(name);
  }
  const std::vector<absl::string_view> words = absl::StrSplit(name, '_', absl::SkipEmpty());
  if (words.size() < 5) return std::string(name);
  return absl::StrCat(words[0], "_", words[1], "_", words[2], "_…_", words.back());
}

}  // namespace

std::string ShortKernelName(absl::string_view name) {
  // The signature's outer parts, found at bracket depth 0: the return type ends at the last space
  // before the name, the parameters start at the first '(' after it.
  size_t name_start = 0;
  size_t params = name.size();
  for (size_t i = 0; i < name.size();) {
    if (name.substr(i, kAnonymousNamespace.size()) == kAnonymousNamespace) {
      i += kAnonymousNamespace.size();
      continue;
    }
    if (name[i] == '<') {
      i = Closing(name, i);
      continue;
    }
    if (name[i] == '(') {
      params = i;
      break;
    }
    if (name[i] == ' ') name_start = i + 1;
    ++i;
  }
  if (params == name.size() && name.find('<') == absl::string_view::npos) {
    return ShortCKernelName(name);  // a C name, or not a signature at all
  }
  const absl::string_view qualified = name.substr(name_start, params - name_start);
  size_t open = qualified.size();
  for (size_t i = 0; i < qualified.size(); ++i) {
    if (qualified[i] == '<' && OperatorLength(qualified, i) == 0) {
      open = i;
      break;
    }
  }
  const absl::string_view path = qualified.substr(0, open);
  std::vector<absl::string_view> parts = absl::StrSplit(path, "::");
  parts.erase(std::remove(parts.begin(), parts.end(), kAnonymousNamespace), parts.end());
  if (parts.empty() || parts.back().empty()) return std::string(name);
  std::string base(parts.back());
  const bool generic = base.size() <= 8 && base.find('_') == std::string::npos;
  if (generic && parts.size() >= 2) base = absl::StrCat(parts[parts.size() - 2], "::", base);
  if (open == qualified.size()) return base;
  const std::string args = WithoutNamespaces(qualified.substr(open));
  if (OnlyBuiltinArguments(args)) return base;
  std::string whole = absl::StrCat(base, args);
  if (whole.size() <= kShortKernelName) return whole;
  const std::string hint = ComputeHint(args);
  return absl::StrCat(base, "<", hint.empty() ? "…" : hint, ">");
}

std::string UserFrameText(const Frame& frame) { return Printable(RawUserFrameText(frame)); }

std::string DottedPythonName(const Frame& frame) {
  absl::string_view path = frame.file;
  bool found = false;
  for (absl::string_view marker : {"/site-packages/", "/dist-packages/"}) {
    const size_t at = path.rfind(marker);
    if (at == absl::string_view::npos) continue;
    path = path.substr(at + marker.size());
    found = true;
    break;
  }
  if (!found) {
    const size_t at = path.rfind("/python3.");
    const size_t slash = at == absl::string_view::npos ? at : path.find('/', at + 1);
    if (slash == absl::string_view::npos) return frame.function;
    path = path.substr(slash + 1);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  std::vector<absl::string_view> names;
  if (parts.size() == 1) {
    absl::string_view module = parts.front();
    absl::ConsumeSuffix(&module, ".py");
    names.push_back(module);
  }
  for (size_t i = 0; i + 1 < parts.size() && i < 2; ++i) names.push_back(parts[i]);
  std::vector<absl::string_view> kept;
  for (absl::string_view name : names) {
    if (!name.empty() && name.front() != '_') kept.push_back(name);
  }
  kept.push_back(frame.function);
  return absl::StrJoin(kept, ".");
}

SiteLabel LabelOf(const std::vector<Frame>& frames, const MemoryHolder* holder) {
  SiteLabel label;
  const Frame* user = UserFrame(frames);
  const size_t end = user == nullptr ? frames.size() : static_cast<size_t>(user - frames.data());
  const absl::string_view library = InnermostLibrary(frames, end);
  std::vector<std::string> via = {FrameworkEntry(frames, end), Innermost(frames, end, AutogradNode),
                                  Innermost(frames, end, AtenOperator)};
  if (user != nullptr) {
    label.user_frame = *user;
    label.first_line = RawUserFrameText(*user);
    via.push_back(holder != nullptr ? std::string(holder->label) : LibraryLabel(library));
  } else if (frames.empty()) {
    label.first_line = "(no stack recorded)";
  } else {
    label.first_line = "(no frame of your code)";
    if (holder != nullptr) {
      absl::StrAppend(&label.first_line, " allocated by ", holder->name,
                      library.empty() ? "" : absl::StrCat(" (", library, ")"));
    } else if (!library.empty()) {
      absl::StrAppend(&label.first_line, " allocated by ", library);
    } else {
      absl::StrAppend(&label.first_line, " at ", frames.front().ToString());
    }
  }
  std::erase_if(via, [](const std::string& part) { return part.empty(); });
  label.via = absl::StrJoin(via, " → ");
  return label;
}

std::vector<std::string> FullStackLines(const std::vector<Frame>& frames) {
  const bool has_python = HasPythonFrames(frames);
  std::vector<std::string> lines;
  for (const Frame& frame : frames) {
    if (has_python && !frame.python && IsInterpreterModule(frame.module)) continue;
    if (frame.python || frame.function.empty()) {
      lines.push_back(frame.ToString());
      continue;
    }
    Frame shortened = frame;
    shortened.function = ShortCppName(frame.function);
    lines.push_back(shortened.ToString());
  }
  return lines;
}

std::vector<std::string> SiteLines(const std::vector<Frame>& frames, const SiteLabel& label,
                                   StackStyle style) {
  if (frames.empty()) return {"(no stack recorded)"};
  if (style == StackStyle::kFull) return FullStackLines(frames);
  std::vector<std::string> lines = {Printable(label.first_line)};
  if (!label.via.empty()) lines.push_back(Printable(absl::StrCat("via ", label.via)));
  return lines;
}

}  // namespace gpumem::report
