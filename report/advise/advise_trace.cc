#include "report/advise/advise_trace.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "report/allocator/allocator_replay.h"
#include "report/allocator/tensor_mode.h"
#include "report/analysis/summary_table.h"
#include "report/format/printable.h"

namespace gpumem::report {
namespace {

// The tensors, kept by a replay of their own over the file opened again, with backward passes
// credited as the report's pass credited them (so stack ids agree with its call sites).
absl::StatusOr<AllocatorReplayResult> KeepTensors(const std::string& path,
                                                  const TraceFile& analysed) {
  absl::StatusOr<std::unique_ptr<TraceFile>> again = TraceFile::Open(path);
  if (!again.ok()) return again.status();
  (*again)->set_autograd_stack_test(analysed.autograd_stack_test());
  AllocatorReplayConfig config;
  config.keep_tensors = true;
  return std::move(ReplayThroughAllocators(**again, {AllocatorKind::kNative}, config).front());
}

// Each tensor's iteration: a new one starts at each allocation of growth's marker.
std::vector<uint32_t> IterationsOf(const std::vector<ReplayedTensor>& tensors,
                                   const std::optional<GrowthReport>& growth, CallSites& sites) {
  std::vector<uint32_t> iterations(tensors.size(), 0);
  if (!growth || !growth->found || growth->rule == GrowthReport::Rule::kLaunches) {
    return iterations;
  }
  uint32_t iteration = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (sites.StackSiteOf(tensors[i].stack_id) == growth->marker_stack_id) ++iteration;
    iterations[i] = iteration;
  }
  return iterations;
}

}  // namespace

RunAllocator RunAllocatorOf(
    SummaryMode mode, const std::function<std::optional<std::string>(const std::string&)>& option) {
  RunAllocator run;
  if (mode == SummaryMode::kPlain) {
    run.kind = AllocatorKind::kAsync;  // a plain CUDA program: its allocations as the pool serves
    return run;
  }
  const std::optional<UserAllocConf> conf = UserAllocConfOf(option);
  if (conf) run.settings = conf->value;
  if (conf && absl::AsciiStrToLower(ParseAllocConf(conf->value)["backend"]) == "cudamallocasync") {
    run.kind = AllocatorKind::kAsync;
    return run;
  }
  const std::optional<SummaryModel> model =
      ChooseSummaryModel(SummaryModelChoice::kFromSettings, option);
  run.kind = model->kind;
  run.config.max_split_size = model->max_split_size;
  return run;
}

absl::StatusOr<AdviseTrace> LoadAdviseTrace(const std::string& path, StackStyle stacks) {
  ReportRequest request;
  request.growth = true;
  request.kernels = true;
  request.stacks = stacks;
  absl::StatusOr<ProcessReport> report = AnalyzeProcess(path, request);
  if (!report.ok()) return report.status();
  const TraceFile& file = *report->replay.file;
  if (file.end().damaged()) return absl::DataLossError(file.end().ErrorLine(path));
  absl::StatusOr<AllocatorReplayResult> kept = KeepTensors(path, file);
  if (!kept.ok()) return kept.status();
  if (kept->mode == SummaryMode::kSegments) {
    return absl::InvalidArgumentError(absl::StrCat(
        Printable(path),
        ": recorded under PyTorch's caching allocator: only its segments are visible; record "
        "with `gpumem record --tensors`"));
  }
  AdviseTrace trace;
  trace.path = path;
  trace.report = *std::move(report);
  trace.mode = kept->mode;
  trace.tensors = std::move(kept->tensors);
  trace.allocator = RunAllocatorOf(
      trace.mode, [&trace](const std::string& name) { return trace.file().HeaderOption(name); });
  trace.iterations = IterationsOf(trace.tensors, trace.report.findings.growth, trace.sites());
  if (const std::optional<KernelReport>& kernels = trace.report.findings.kernels) {
    trace.launches = kernels->launches;
    trace.unscanned_launches = kernels->unscanned_launches;
  }
  for (const Device& device : trace.file().devices()) {
    if (trace.smallest_device_total == 0 || device.total_memory() < trace.smallest_device_total) {
      trace.smallest_device_total = device.total_memory();
    }
  }
  for (const std::string& argument : trace.file().header().command_line()) {
    trace.command_line.push_back(argument);
  }
  return trace;
}

}  // namespace gpumem::report
