#include "report/advise/advice.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "report/advise/lifetime_remedies.h"
#include "report/format/printable.h"

namespace gpumem::report {
namespace {

struct Modelled {
  uint64_t peak = 0;
  bool fits = false;
  uint64_t peak_at = 0;  // where the highest device peaked
  int32_t peak_device = 0;
};

// The peak with no limit, and whether it fits `limit`: when the peak is over the limit, the
// replay at the limit says (emptying the cache before giving up may still make it fit).
Modelled Model(const std::vector<ReplayedTensor>& tensors, AllocatorKind kind,
               NativeAllocatorConfig config, uint64_t limit) {
  config.device_memory = kUnlimitedDeviceMemory;
  const TensorReplayOutcome unlimited = ReplayTensors(tensors, kind, config);
  Modelled modelled;
  for (const TensorReplayDevice& device : unlimited.devices) {
    if (device.reserved_peak > modelled.peak || modelled.peak == 0) {
      modelled.peak = device.reserved_peak;
      modelled.peak_at = device.peak_at;
      modelled.peak_device = device.device;
    }
  }
  modelled.fits = modelled.peak <= limit;
  if (!modelled.fits) {
    config.device_memory = limit;
    modelled.fits = ReplayTensors(tensors, kind, config).Fits();
  }
  return modelled;
}

// max_split_size_mb not set (NativeAllocatorConfig's default).
constexpr uint64_t kNoMaxSplit = std::numeric_limits<uint64_t>::max();

struct Setting {
  AllocatorKind kind = AllocatorKind::kNative;
  uint64_t max_split_size = kNoMaxSplit;
  std::string change;
};

// The allocator settings worth modelling against the run's own.
std::vector<Setting> SettingsToTry(const AdviseTrace& trace) {
  std::vector<Setting> settings;
  if (trace.mode == SummaryMode::kPlain) return settings;  // PyTorch's allocators do not apply
  const RunAllocator& run = trace.allocator;
  if (run.kind != AllocatorKind::kExpandable) {
    settings.push_back({AllocatorKind::kExpandable, kNoMaxSplit,
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"});
  }
  if (run.kind == AllocatorKind::kNative) {
    for (const uint64_t megabytes : {128, 256, 512}) {
      if (run.config.max_split_size == megabytes << 20) continue;
      settings.push_back({AllocatorKind::kNative, megabytes << 20,
                          absl::StrCat("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:", megabytes)});
    }
  }
  if (run.kind != AllocatorKind::kAsync) {
    settings.push_back(
        {AllocatorKind::kAsync, kNoMaxSplit, "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"});
  }
  if (run.kind != AllocatorKind::kNative) {
    settings.push_back({AllocatorKind::kNative, kNoMaxSplit,
                        "PyTorch's default allocator (no expandable_segments, no backend in "
                        "PYTORCH_CUDA_ALLOC_CONF)"});
  }
  return settings;
}

void AddAllocatorRemedies(const AdviseTrace& trace, uint64_t limit, std::vector<Remedy>* out) {
  for (const Setting& setting : SettingsToTry(trace)) {
    NativeAllocatorConfig config;
    config.max_split_size = setting.max_split_size;
    const Modelled modelled = Model(trace.tensors, setting.kind, config, limit);
    Remedy& remedy = out->emplace_back();
    remedy.kind = RemedyKind::kAllocator;
    remedy.change = setting.change;
    remedy.allocator = setting.kind;
    remedy.peak = modelled.peak;
    remedy.fits = modelled.fits;
  }
}

// What to do, in the words of a PyTorch script, or of any program (a plain CUDA one).
std::string LifetimeChangeText(RemedyKind kind, bool plain) {
  if (kind == RemedyKind::kReleaseGrowing) {
    return plain ? "free these allocations each iteration instead of keeping them"
                 : "release these tensors each iteration: keep a number (.item()) or a CPU copy "
                   "(.detach().cpu()) instead of the tensor, or empty what keeps them";
  }
  return plain ? "free it right after its last use"
               : "free it after its last use: `del` it, or compute it under torch.no_grad() when "
                 "no gradient flows back through it";
}

Remedy LifetimeRemedy(const AdviseTrace& trace, const LifetimeChange& change, RemedyKind kind,
                      uint64_t limit) {
  const Modelled modelled =
      Model(Applied(trace.tensors, change), trace.allocator.kind, trace.allocator.config, limit);
  Remedy remedy;
  remedy.kind = kind;
  remedy.change = LifetimeChangeText(kind, trace.mode == SummaryMode::kPlain);
  remedy.allocator = trace.allocator.kind;
  remedy.peak = modelled.peak;
  remedy.fits = modelled.fits;
  remedy.bytes = change.bytes;
  remedy.site = change.site;
  remedy.holder_stack_id = change.holder_stack_id;
  return remedy;
}

BatchTrace BatchTraceOf(AdviseTrace& trace, int64_t batch) {
  BatchTrace out;
  out.batch = batch;
  out.tensors = trace.tensors;
  out.iterations = trace.iterations;
  out.keys.reserve(trace.tensors.size());
  for (const ReplayedTensor& tensor : trace.tensors) {
    out.keys.push_back(trace.sites().StackKey(tensor.stack_id));
  }
  return out;
}

// The batch remedy: the run's batch as micro-batches that fit, accumulated.
std::optional<Remedy> BatchRemedy(const AdviseTrace& trace, const Accumulation& accumulation,
                                  const BatchModel& model, uint64_t limit) {
  if (accumulation.steps <= 1) return std::nullopt;
  const Modelled modelled = Model(TensorsAtBatch(model, accumulation.micro_batch),
                                  trace.allocator.kind, trace.allocator.config, limit);
  Remedy remedy;
  remedy.kind = RemedyKind::kBatch;
  remedy.change = absl::StrCat(
      "batch size ", accumulation.micro_batch, " with ", accumulation.steps,
      " gradient-accumulation steps (keeps the batch of ", accumulation.effective_batch, ")");
  remedy.allocator = trace.allocator.kind;
  remedy.peak = modelled.peak;
  remedy.fits = modelled.fits;
  remedy.extrapolated = true;
  remedy.batch = accumulation.micro_batch;
  remedy.accumulation = accumulation;
  return remedy;
}

// The batch sizes' figures, and the batch remedy added to `remedies` when the run's batch does
// not fit.
absl::StatusOr<BatchAdvice> AdviseBatch(AdviseTrace& first, AdviseTrace& second,
                                        const AdviseRequest& request, uint64_t limit,
                                        std::vector<Remedy>* remedies) {
  std::pair<int64_t, int64_t> sizes;
  if (request.batch_sizes) {
    sizes = *request.batch_sizes;
  } else {
    absl::StatusOr<std::pair<int64_t, int64_t>> found =
        BatchSizesFromCommandLines(first.command_line, second.command_line);
    if (!found.ok()) return found.status();
    sizes = *found;
  }
  absl::StatusOr<BatchModel> model =
      FitBatchModel(BatchTraceOf(first, sizes.first), BatchTraceOf(second, sizes.second));
  if (!model.ok()) return model.status();
  BatchAdvice advice;
  advice.first_batch = sizes.first;
  advice.second_batch = sizes.second;
  advice.tensors = model->tensors.size();
  advice.matched = model->matched;
  for (const AllocatorKind kind : kAllAllocators) {
    if (first.mode == SummaryMode::kPlain && kind != AllocatorKind::kAsync) continue;
    NativeAllocatorConfig config =
        kind == first.allocator.kind ? first.allocator.config : NativeAllocatorConfig{};
    config.device_memory = limit;
    advice.largest.push_back(FindLargestBatch(*model, kind, config));
    if (kind == first.allocator.kind) {
      advice.accumulation = AccumulationFor(sizes.first, advice.largest.back().batch);
    }
  }
  if (std::optional<Remedy> remedy = BatchRemedy(first, advice.accumulation, *model, limit)) {
    remedies->push_back(*std::move(remedy));
  }
  return advice;
}

void AddNotes(const AdviseTrace& trace, Advice* advice) {
  if (trace.mode == SummaryMode::kPlain) {
    advice->notes.push_back(
        "a plain CUDA program (no PyTorch allocator in its stacks): its allocations modelled as "
        "the async pool serves them; PyTorch's allocator settings do not apply");
  }
  if (trace.launches == 0) {
    advice->notes.push_back(
        "the trace has no kernel launches: memory held at the peak that no later kernel used "
        "cannot be told");
  } else if (trace.unscanned_launches > 0) {
    advice->notes.push_back(absl::StrCat(
        trace.unscanned_launches,
        " launches (CUDA graphs, or kernels whose parameters could not be read) may have used "
        "memory that looks unused here"));
  }
  const std::optional<GrowthReport>& growth = trace.report.findings.growth;
  if (!growth || !growth->found) {
    advice->notes.push_back("no iterations found: growth across iterations cannot be told");
  }
}

}  // namespace

const char* RemedyKindName(RemedyKind kind) {
  switch (kind) {
    case RemedyKind::kAllocator:
      return "allocator";
    case RemedyKind::kReleaseGrowing:
      return "release_growing";
    case RemedyKind::kFreeAfterLastUse:
      return "free_after_last_use";
    case RemedyKind::kBatch:
      return "batch";
  }
  return "allocator";
}

absl::StatusOr<Advice> Advise(AdviseTrace& first, AdviseTrace* second,
                              const AdviseRequest& request) {
  Advice advice;
  advice.paths.push_back(first.path);
  if (second != nullptr) advice.paths.push_back(second->path);
  advice.allocator = first.allocator;
  advice.device_memory_recorded = !request.device_memory;
  advice.device_memory = request.device_memory.value_or(first.smallest_device_total);
  const uint64_t limit = advice.device_memory;
  const Modelled run = Model(first.tensors, first.allocator.kind, first.allocator.config, limit);
  advice.peak = run.peak;
  advice.fits = run.fits;

  AddAllocatorRemedies(first, limit, &advice.remedies);
  for (const LifetimeChange& change : ReleaseGrowingSites(first)) {
    advice.remedies.push_back(LifetimeRemedy(first, change, RemedyKind::kReleaseGrowing, limit));
  }
  for (const LifetimeChange& change :
       FreeIdleAtPeak(first, run.peak_device, run.peak_at, request.top)) {
    advice.remedies.push_back(LifetimeRemedy(first, change, RemedyKind::kFreeAfterLastUse, limit));
  }
  if (second != nullptr) {
    absl::StatusOr<BatchAdvice> batch =
        AdviseBatch(first, *second, request, limit, &advice.remedies);
    if (!batch.ok()) return batch.status();
    advice.batch = *std::move(batch);
  } else {
    advice.second_recording = SecondRecordingCommand(first.command_line);
  }
  AddNotes(first, &advice);
  // Only what lowers the peak is advice.
  std::erase_if(advice.remedies,
                [&advice](const Remedy& remedy) { return remedy.peak >= advice.peak; });
  std::stable_sort(advice.remedies.begin(), advice.remedies.end(),
                   [](const Remedy& a, const Remedy& b) { return a.peak < b.peak; });
  return advice;
}

}  // namespace gpumem::report
