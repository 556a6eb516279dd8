// `gpumem advise`: the flags, the traces read (report/advise/advise_trace.h), and the advice
// (report/advise/advice.h) written as text or JSON. Exit 0 when the run fits under the allocator
// it ran with, 1 when it does not, 2 for bad input.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "report/advise/advice.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem advise [--device-memory SIZE] [--batch-sizes A,B] [--top N]
                     [--stacks short|full] [--json] TRACE [SECOND_TRACE]

Says whether a run recorded at tensor level (gpumem record --tensors) fits SIZE, and ranks the
changes that would make it fit or bring it closer by the peak each would leave, modelled from the
recorded tensors: PyTorch's allocator settings, releasing memory that grows every iteration,
freeing memory held at the peak after its last use, and, given SECOND_TRACE (the same script at
another batch size), the largest batch that fits under each allocator and the
gradient-accumulation steps that keep TRACE's batch.
)usage";

constexpr char kEpilogue[] = R"usage(
Exit status: 0 the run fits under the allocator it ran with; 1 it does not; 2 bad usage, a trace
that is missing, damaged, not a trace or not recorded at tensor level, batch sizes that cannot be
told, or standard output that could not be written.
)usage";

struct Options {
  std::optional<uint64_t> device_memory;
  std::optional<std::pair<int64_t, int64_t>> batch_sizes;
  size_t top = 5;
  StackStyle stacks = StackStyle::kShort;
  bool json = false;
};

Flag BatchSizesFlag(std::optional<std::pair<int64_t, int64_t>>* out) {
  Flag flag{.names = {"--batch-sizes"},
            .value_name = "A,B",
            .needs = "two batch sizes, A,B",
            .help =
                "the batch sizes of TRACE and SECOND_TRACE (default: the one number that\n"
                "differs between their recorded command lines)"};
  flag.take = [out](absl::string_view value) {
    const std::vector<std::string> parts = absl::StrSplit(value, ',');
    int64_t first = 0;
    int64_t second = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &first) ||
        !absl::SimpleAtoi(parts[1], &second) || first <= 0 || second <= 0 || first == second) {
      return absl::InvalidArgumentError(
          absl::StrCat("not two different positive batch sizes: '", std::string(value), "'"));
    }
    *out = std::make_pair(first, second);
    return absl::OkStatus();
  };
  return flag;
}

CommandLine AdviseCommandLine(Options* options) {
  return CommandLine{
      .command = "advise",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 15,
      .flags = {
          AdviseDeviceMemoryFlag(&options->device_memory),
          BatchSizesFlag(&options->batch_sizes),
          Number({"--top"},
                 "call sites holding memory idle at the peak that are modelled (default 5; 0: "
                 "all)",
                 &options->top),
          StacksFlag(&options->stacks),
          Switch({"--json"}, "one JSON object instead of text (schema: report/advise.schema.json)",
                 &options->json),
      }};
}

}  // namespace

std::string AdviseUsage() { return UsageOf(AdviseCommandLine); }

int RunAdvise(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseCommandLine(AdviseCommandLine(&options), args, &inputs, &done)) {
    return done;
  }
  if (inputs.empty() || inputs.size() > 2) {
    return UsageError("advise: give one trace, or two of one script at two batch sizes", "advise");
  }
  if (options.batch_sizes && inputs.size() != 2) {
    return UsageError("advise: --batch-sizes needs two traces", "advise");
  }
  if (absl::Status status = RefuseOutputOverInputs(kStandardOutput, inputs); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }
  std::vector<AdviseTrace> traces;
  for (const std::string& path : inputs) {
    absl::StatusOr<AdviseTrace> trace = LoadAdviseTrace(path, options.stacks);
    if (!trace.ok()) {
      PrintError(trace.status().message());
      return kExitBadInput;
    }
    traces.push_back(*std::move(trace));
  }
  AdviseRequest request;
  request.device_memory = options.device_memory;
  request.batch_sizes = options.batch_sizes;
  request.top = options.top;
  if (!request.device_memory && traces.front().smallest_device_total == 0) {
    return UsageError("advise: the trace names no device: give --device-memory", "advise");
  }
  absl::StatusOr<Advice> advice =
      Advise(traces.front(), traces.size() == 2 ? &traces.back() : nullptr, request);
  if (!advice.ok()) {
    PrintError(advice.status().message());
    return kExitBadInput;
  }
  WriteOutput(options.json ? AdviceJson(*advice, traces.front())
                           : AdviceText(*advice, traces.front()));
  return advice->fits ? kExitOk : kExitCheckFailed;
}

}  // namespace gpumem::report
