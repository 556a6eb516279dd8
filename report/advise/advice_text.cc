// `gpumem advise` as text: the verdict, the changes that help (largest saving first), the largest
// batch that fits, and what a second recording would add.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "report/advise/advice.h"
#include "report/allocator/whatif.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"

namespace gpumem::report {
namespace {

std::string CommandLineText(const std::vector<std::string>& command_line) {
  std::vector<std::string> printable;
  for (const std::string& argument : command_line) printable.push_back(Printable(argument));
  return absl::StrJoin(printable, " ");
}

std::string RunAllocatorText(const Advice& advice) {
  std::string text = AllocatorKindDescription(advice.allocator.kind);
  if (!advice.allocator.settings.empty()) {
    absl::StrAppend(&text, ", PYTORCH_CUDA_ALLOC_CONF='", Printable(advice.allocator.settings),
                    "'");
  }
  return text;
}

void AppendVerdict(const Advice& advice, AdviseTrace& first, std::string* out) {
  absl::StrAppend(out, "advise: ", Printable(first.path));
  if (!first.command_line.empty())
    absl::StrAppend(out, " (", CommandLineText(first.command_line), ")");
  absl::StrAppend(out, "\n", DeviceMemoryLine(advice), "\n", RunVerdictLine(advice), "\n");
}

std::string Outcome(const Advice& advice, const Remedy& remedy) {
  return absl::StrCat("peak ", FormatBytes(remedy.peak), ", ",
                      FormatBytes(advice.peak - remedy.peak),
                      " less: ", remedy.fits ? "fits" : "does not fit",
                      remedy.extrapolated ? " (extrapolated from two batch sizes)" : " (modelled)");
}

void AppendRemedy(const Advice& advice, const Remedy& remedy, size_t rank, AdviseTrace& first,
                  std::string* out) {
  absl::StrAppend(out, "\n", rank, ". ", remedy.change, "\n");
  if (remedy.site != 0) {
    absl::StrAppend(out, "   ", RemedySiteHeading(remedy), "\n");
    first.sites().AppendStackText(remedy.site, out, "     ");
  }
  if (remedy.holder_stack_id != 0) {
    // The line of the append alone: how it got there (the interpreter) says nothing more.
    absl::StrAppend(out, "   ", kRemedyHolderHeading, "\n     ",
                    first.sites().Label(remedy.holder_stack_id), "\n");
  }
  absl::StrAppend(out, "   ", Outcome(advice, remedy), "\n");
}

void AppendBatch(const Advice& advice, std::string* out) {
  const BatchAdvice& batch = *advice.batch;
  absl::StrAppend(out, "\nlargest batch that fits ", FormatBytes(advice.device_memory),
                  " (extrapolated from batch sizes ", batch.first_batch, " and ",
                  batch.second_batch, "; ", batch.matched, " of ", batch.tensors,
                  " allocations matched between the two runs):\n");
  for (const LargestBatch& largest : batch.largest) {
    absl::StrAppend(out, "  ", AllocatorKindName(largest.kind), ": ");
    if (largest.batch == 0) {
      absl::StrAppend(out, "none, not even 1 (peak ", FormatBytes(largest.peak), " at 1)\n");
    } else {
      absl::StrAppend(out, largest.unbounded ? "at least " : "", largest.batch, " (peak ",
                      FormatBytes(largest.peak), ")\n");
    }
  }
  const Accumulation& accumulation = batch.accumulation;
  if (accumulation.steps > 1) {
    absl::StrAppend(out, "  to keep the batch of ", accumulation.effective_batch, ": ",
                    accumulation.steps, " gradient-accumulation steps of ",
                    accumulation.micro_batch, "\n");
  }
}

// A size as --device-memory takes it back: "8GiB", "60MiB", or bytes.
std::string SizeArgument(uint64_t bytes) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  if (bytes != 0 && bytes % kGiB == 0) return absl::StrCat(bytes / kGiB, "GiB");
  if (bytes != 0 && bytes % kMiB == 0) return absl::StrCat(bytes / kMiB, "MiB");
  return absl::StrCat(bytes);
}

void AppendSecondRecording(const Advice& advice, std::string* out) {
  const std::vector<std::string> lines = SecondRecordingLines(advice);
  absl::StrAppend(out, "\n", lines.front(), ":\n");
  for (size_t i = 1; i < lines.size(); ++i) absl::StrAppend(out, "  ", lines[i], "\n");
}

}  // namespace

std::string DeviceMemoryLine(const Advice& advice) {
  return absl::StrCat("device memory: ", SizeText(advice.device_memory),
                      advice.device_memory_recorded
                          ? ", the recorded device's (--device-memory asks about another)"
                          : "",
                      "; ", kWhatifLimitNote);
}

std::string RunVerdictLine(const Advice& advice) {
  return absl::StrCat("the run, under ", RunAllocatorText(advice), ": peak ", SizeText(advice.peak),
                      " reserved (modelled): ", advice.fits ? "fits" : "DOES NOT FIT");
}

const char* RemediesHeading(const Advice& advice) {
  return advice.remedies.empty() ? "no change the models cover lowers the peak"
                                 : "what would lower the peak, the largest saving first:";
}

std::string RemedySiteHeading(const Remedy& remedy) {
  return absl::StrCat(FormatBytes(remedy.bytes),
                      remedy.kind == RemedyKind::kReleaseGrowing
                          ? " more each iteration, allocated at:"
                          : " held at the peak that no later kernel used, allocated at:");
}

std::vector<std::string> SecondRecordingLines(const Advice& advice) {
  return {
      "with a second recording of the same script at another batch size, advise also finds "
      "the largest batch that fits and the gradient-accumulation steps that keep this run's "
      "batch",
      advice.second_recording ? Printable(*advice.second_recording)
                              : "gpumem record --tensors -o second.trace -- <the same "
                                "command, another batch size>",
      absl::StrCat("gpumem advise --device-memory ", SizeArgument(advice.device_memory), " ",
                   Printable(advice.paths.front()), " second.trace")};
}

std::string AdviceText(const Advice& advice, AdviseTrace& first) {
  std::string out;
  AppendVerdict(advice, first, &out);
  absl::StrAppend(&out, "\n", RemediesHeading(advice), "\n");
  for (size_t i = 0; i < advice.remedies.size(); ++i) {
    AppendRemedy(advice, advice.remedies[i], i + 1, first, &out);
  }
  if (advice.batch) AppendBatch(advice, &out);
  if (advice.paths.size() == 1) AppendSecondRecording(advice, &out);
  if (!advice.notes.empty()) absl::StrAppend(&out, "\n");
  for (const std::string& note : advice.notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

}  // namespace gpumem::report
