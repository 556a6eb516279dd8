// `gpumem whatif`: the flags, the trace replayed through the allocator models at the limit, and
// the answers (report/allocator/whatif.h) written as text or JSON. Exit 0 when it fits under every
// allocator asked, 1 when one runs out (a CI gate), 2 for bad input.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "report/allocator/whatif.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem whatif --device-memory SIZE [--allocator native|expandable|async|all]
                     [--top N] [--stacks short|full] [--json] TRACE

Replays the tensors of a trace recorded at tensor level (gpumem record --tensors, or
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) through models of PyTorch's allocators and says,
per allocator and device, whether the run would have fitted in SIZE, where it would have run out
and what was live then by call site, what the allocator reserves at its peak, and the smallest
device memory on which it fits (searched in 2 MiB steps).
)usage";

constexpr char kEpilogue[] = R"usage(
A trace of a plain CUDA program (no PyTorch allocator in its stacks) is replayed as its own
allocations served by the async pool model only: native and expandable model PyTorch's allocator,
which such a program does not use. A trace recorded under PyTorch's caching allocator shows only
its segments, not its tensors, and cannot be replayed.

Exit status: 0 it fits under every allocator asked; 1 it runs out under one; 2 bad usage, a
trace that is missing, not a trace, or not replayable, or standard output that could not be
written.
)usage";

constexpr size_t kDefaultTop = 10;

struct Options {
  std::optional<uint64_t> device_memory;  // required
  std::vector<AllocatorKind> kinds;       // empty: all that apply to the trace
  size_t top = kDefaultTop;
  StackStyle stacks = StackStyle::kShort;
  bool json = false;
};

// --allocator: one of kAllAllocators by name, or all.
Flag AllocatorFlag(std::vector<AllocatorKind>* kinds) {
  std::vector<std::string> words;
  for (const AllocatorKind kind : kAllAllocators) words.push_back(AllocatorKindName(kind));
  words.push_back("all");
  return ChoiceOf({"--allocator"}, words,
                  "native: PyTorch's caching allocator; expandable: the same with\n"
                  "expandable_segments:True; async: the cudaMallocAsync pool (default: all)",
                  [words, kinds](size_t chosen) {
                    kinds->clear();
                    AllocatorKind kind = AllocatorKind::kNative;
                    if (ParseAllocatorKind(words[chosen], &kind)) kinds->push_back(kind);
                  });
}

CommandLine WhatifCommandLine(Options* options) {
  return CommandLine{
      .command = "whatif",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 15,
      .flags = {
          Size({"--device-memory"},
               "what the allocator may reserve on each device: 8GiB, 8G, 1.5GiB, 8589934592 (the\n"
               "limit torch.cuda.set_per_process_memory_fraction sets, fraction x total memory;\n"
               "the CUDA context and memory other libraries allocate directly come on top)",
               &options->device_memory)
              .Required(),
          AllocatorFlag(&options->kinds),
          Number({"--top"}, "call sites shown at an out-of-memory error (default 10; 0: all)",
                 &options->top),
          StacksFlag(&options->stacks),
          Switch({"--json"}, "one JSON object instead of text (schema: report/whatif.schema.json)",
                 &options->json),
      }};
}

}  // namespace

std::string WhatifUsage() { return UsageOf(WhatifCommandLine); }

int RunWhatif(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseCommandLine(WhatifCommandLine(&options), args, &inputs, &done)) {
    return done;
  }
  if (inputs.size() != 1) return UsageError("whatif: give exactly one trace file", "whatif");
  const std::string& path = inputs[0];
  if (absl::Status status = RefuseOutputOverInputs(kStandardOutput, inputs); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }

  // The replay at the limit reads this file, so its tables are complete for symbolizing after.
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) {
    PrintError(file.status().message());
    return kExitBadInput;
  }
  std::vector<AllocatorReplayResult> limited = ReplayThroughAllocators(
      **file, {std::begin(kAllAllocators), std::end(kAllAllocators)}, *options.device_memory);
  if ((*file)->end().damaged()) {
    PrintError((*file)->end().ErrorLine(path));
    return kExitBadInput;
  }
  const WhatifRequest request{*options.device_memory, options.kinds, options.top};
  const absl::StatusOr<std::vector<AllocatorAnswers>> all =
      AnswerWhatif(path, std::move(limited), request);
  if (!all.ok()) {
    PrintError(all.status().message());
    return kExitBadInput;
  }
  Symbolizer symbolizer(file->get());
  CallSites sites(&symbolizer, GroupBy::kUser, false, options.stacks);
  WriteOutput(options.json ? WhatifJson(path, *all, **file, sites, request)
                           : WhatifText(path, *all, **file, sites, request));
  for (const AllocatorAnswers& answers : *all) {
    if (!answers.Fits()) return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace gpumem::report
