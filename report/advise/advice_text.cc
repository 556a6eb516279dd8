// `gpumem advise` as text: the verdict, the changes that help (largest saving first), the largest
// batch that fits, and what a second recording would add.
#include <string>

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
  absl::StrAppend(out, "\ndevice memory: ", SizeText(advice.device_memory),
                  advice.device_memory_recorded
                      ? ", the recorded device's (--device-memory asks about another)"
                      : "",
                  "; ", kWhatifLimitNote, "\n");
  absl::StrAppend(out, "the run, under ", RunAllocatorText(advice), ": peak ",
                  SizeText(advice.peak),
                  " reserved (modelled): ", advice.fits ? "fits" : "DOES NOT FIT", "\n");
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
    absl::StrAppend(out, "   ", FormatBytes(remedy.bytes),
                    remedy.kind == RemedyKind::kReleaseGrowing
                        ? " more each iteration, allocated at:\n"
                        : " held at the peak that no later kernel used, allocated at:\n");
    first.sites().AppendStackText(remedy.site, out, "     ");
  }
  if (remedy.holder_stack_id != 0) {
    absl::StrAppend(out, "   kept by Python references (list.append) taken at:\n");
    first.sites().AppendStackText(remedy.holder_stack_id, out, "     ");
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
  absl::StrAppend(out,
                  "\nwith a second recording of the same script at another batch size, advise also "
                  "finds the largest batch that fits and the gradient-accumulation steps that keep "
                  "this run's batch:\n");
  if (advice.second_recording) {
    absl::StrAppend(out, "  ", Printable(*advice.second_recording), "\n");
  } else {
    absl::StrAppend(out,
                    "  gpumem record --tensors -o second.trace -- <the same command, another batch "
                    "size>\n");
  }
  absl::StrAppend(out, "  gpumem advise --device-memory ", SizeArgument(advice.device_memory), " ",
                  Printable(advice.paths.front()), " second.trace\n");
}

}  // namespace

std::string AdviceText(const Advice& advice, AdviseTrace& first) {
  std::string out;
  AppendVerdict(advice, first, &out);
  if (advice.remedies.empty()) {
    absl::StrAppend(&out, "\nno change the models cover lowers the peak\n");
  } else {
    absl::StrAppend(&out, "\nwhat would lower the peak, the largest saving first:\n");
  }
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
