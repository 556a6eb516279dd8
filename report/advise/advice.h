// `gpumem advise`: whether a recorded run fits a device, and the changes that would make it fit or
// bring it closer, ranked by the peak each would leave (report/README.md, "gpumem advise"):
// - allocator settings the models cover (expandable segments, max_split_size_mb, the async
//   backend), each a replay of the run's tensors through that model;
// - growing call sites released each iteration, and memory held idle at the peak freed after its
//   last use (report/advise/lifetime_remedies.h), each a replay of the tensors so changed;
// - with a second recording at another batch size, the largest batch that fits per allocator and
//   the gradient-accumulation steps that keep the first run's batch
//   (report/advise/batch_scaling.h).
// Written as text or as one JSON object (schema: report/advise.schema.json).
#ifndef GPUMEM_REPORT_ADVISE_ADVICE_H_
#define GPUMEM_REPORT_ADVISE_ADVICE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/advise/advise_trace.h"
#include "report/advise/batch_scaling.h"

namespace gpumem::report {

struct AdviseRequest {
  std::optional<uint64_t> device_memory;  // nullopt: the recorded device's total memory
  std::optional<std::pair<int64_t, int64_t>> batch_sizes;  // nullopt: from the command lines
  size_t top = 5;  // idle-at-peak call sites modelled (0: all)
};

enum class RemedyKind { kAllocator, kReleaseGrowing, kFreeAfterLastUse, kBatch };
const char* RemedyKindName(RemedyKind kind);  // as in the JSON

struct Remedy {
  RemedyKind kind = RemedyKind::kAllocator;
  std::string change;  // what to change, in the user's terms
  AllocatorKind allocator = AllocatorKind::kNative;
  uint64_t peak = 0;  // modelled reserved peak after the change (highest device)
  bool fits = false;
  bool extrapolated = false;  // from two batch sizes, not one run's tensors
  // kReleaseGrowing, kFreeAfterLastUse:
  uint64_t bytes = 0;
  uint64_t site = 0;  // stack id standing for the call site (0: none)
  uint64_t holder_stack_id = 0;
  // kBatch:
  int64_t batch = 0;
  Accumulation accumulation;
};

struct BatchAdvice {
  int64_t first_batch = 0;
  int64_t second_batch = 0;
  size_t tensors = 0;
  size_t matched = 0;
  std::vector<LargestBatch> largest;  // per allocator, kAllAllocators order
  Accumulation accumulation;          // for the run's allocator
};

struct Advice {
  std::vector<std::string> paths;
  uint64_t device_memory = 0;
  bool device_memory_recorded = false;  // the recorded device's total, not asked for
  RunAllocator allocator;
  uint64_t peak = 0;  // the run's modelled reserved peak under its allocator (highest device)
  bool fits = false;
  std::vector<Remedy> remedies;  // the largest saving first
  std::optional<BatchAdvice> batch;
  std::optional<std::string> second_recording;  // one trace: the command that records a second
  bool second_recording_guessed = false;        // the command names a batch argument
  std::vector<std::string> notes;               // what limits the answer
};

// The advice for `first` (and `second`, the same script at another batch size, when given).
// Fails, with the error line, when the batch sizes cannot be told or the two runs do not match.
absl::StatusOr<Advice> Advise(AdviseTrace& first, AdviseTrace* second,
                              const AdviseRequest& request);

std::string AdviceText(const Advice& advice, AdviseTrace& first);
std::string AdviceJson(const Advice& advice, AdviseTrace& first);

// The text's words, line by line, for other views of the advice (gpumem view's page):
// "device memory: 8.00 GiB (8589934592 bytes), the recorded device's ...; <the limit's meaning>"
std::string DeviceMemoryLine(const Advice& advice);
// "the run, under <allocator and settings>: peak ... reserved (modelled): fits" (DOES NOT FIT)
std::string RunVerdictLine(const Advice& advice);
// "what would lower the peak, the largest saving first:", or that nothing does.
const char* RemediesHeading(const Advice& advice);
// A remedy with a call site: "4.00 MiB more each iteration, allocated at:" (or held idle at the
// peak), above the site's lines; the holder's lines under kRemedyHolderHeading.
std::string RemedySiteHeading(const Remedy& remedy);
inline constexpr char kRemedyHolderHeading[] = "kept by Python references (list.append) taken at:";
// What a second recording at another batch size adds (one line, no colon), then the commands
// that record it and advise on both.
std::vector<std::string> SecondRecordingLines(const Advice& advice);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ADVISE_ADVICE_H_
