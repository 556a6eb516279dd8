#include "viewer/page_advice.h"

#include <utility>

#include "absl/status/statusor.h"
#include "report/advise/advice.h"

namespace gpumem::viewer {
namespace {

PageRemedy PageRemedyOf(const report::Advice& advice, const report::Remedy& remedy, size_t rank,
                        report::AdviseTrace& trace) {
  PageRemedy page;
  page.rank = rank;
  page.kind = report::RemedyKindName(remedy.kind);
  page.change = remedy.change;
  page.allocator = report::AllocatorKindName(remedy.allocator);
  page.peak = remedy.peak;
  page.saving = advice.peak - remedy.peak;
  page.fits = remedy.fits;
  page.extrapolated = remedy.extrapolated;
  if (remedy.site != 0) {
    page.site_heading = report::RemedySiteHeading(remedy);
    page.site_lines = trace.sites().Lines(remedy.site);
  }
  if (remedy.holder_stack_id != 0) {
    page.holder_heading = report::kRemedyHolderHeading;
    page.holder_lines = {trace.sites().Label(remedy.holder_stack_id)};
  }
  return page;
}

PageAdvice PageAdviceOf(const report::Advice& advice, report::AdviseTrace& trace) {
  PageAdvice page;
  page.device_memory = advice.device_memory;
  page.device_memory_recorded = advice.device_memory_recorded;
  page.allocator = report::AllocatorKindName(advice.allocator.kind);
  page.peak = advice.peak;
  page.fits = advice.fits;
  page.verdict = {report::DeviceMemoryLine(advice), report::RunVerdictLine(advice)};
  page.heading = report::RemediesHeading(advice);
  for (size_t i = 0; i < advice.remedies.size(); ++i) {
    page.remedies.push_back(PageRemedyOf(advice, advice.remedies[i], i + 1, trace));
  }
  page.second_recording = report::SecondRecordingLines(advice);
  page.notes = advice.notes;
  return page;
}

PageAdvice Refused(std::string reason) {
  PageAdvice page;
  page.refused = std::move(reason);
  return page;
}

}  // namespace

PageAdvice BuildPageAdvice(const std::string& path, std::optional<uint64_t> device_memory) {
  absl::StatusOr<report::AdviseTrace> trace =
      report::LoadAdviseTrace(path, report::StackStyle::kShort);
  if (!trace.ok()) return Refused(std::string(trace.status().message()));
  if (!device_memory && trace->smallest_device_total == 0) {
    return Refused("the trace names no device: give --device-memory");
  }
  report::AdviseRequest request;
  request.device_memory = device_memory;
  absl::StatusOr<report::Advice> advice = report::Advise(*trace, nullptr, request);
  if (!advice.ok()) return Refused(std::string(advice.status().message()));
  return PageAdviceOf(*advice, *trace);
}

}  // namespace gpumem::viewer
