#include "report/advise/batch_scaling.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"

namespace gpumem::report {
namespace {

// A tensor's identity across two runs: allocation point, iteration, occurrence within both.
using MatchKey = std::tuple<absl::string_view, uint32_t, uint32_t>;

absl::Status CheckTrace(const BatchTrace& trace) {
  if (trace.batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", trace.batch, " is not positive"));
  }
  if (trace.keys.size() != trace.tensors.size() ||
      trace.iterations.size() != trace.tensors.size()) {
    return absl::InvalidArgumentError("a trace's tensors, keys and iterations differ in number");
  }
  return absl::OkStatus();
}

// Each tensor's match key: its occurrence counted among the tensors of its key and iteration.
std::vector<MatchKey> MatchKeys(const BatchTrace& trace) {
  std::map<std::pair<absl::string_view, uint32_t>, uint32_t> seen;
  std::vector<MatchKey> keys;
  keys.reserve(trace.tensors.size());
  for (size_t i = 0; i < trace.tensors.size(); ++i) {
    const uint32_t occurrence = seen[{trace.keys[i], trace.iterations[i]}]++;
    keys.emplace_back(trace.keys[i], trace.iterations[i], occurrence);
  }
  return keys;
}

// The probes' outcome at one batch.
struct Probe {
  bool fits = false;
  uint64_t peak = 0;
};

Probe ProbeBatch(const BatchModel& model, int64_t batch, AllocatorKind kind,
                 const NativeAllocatorConfig& config) {
  const TensorReplayOutcome outcome = ReplayTensors(TensorsAtBatch(model, batch), kind, config);
  return {outcome.Fits(), outcome.ReservedPeak()};
}

// An argument that carries a positive integer: "16", "--batch=16" or "batch_size=16". `name` is
// what comes before the '=' (empty for a bare number).
struct IntegerArgument {
  absl::string_view name;
  int64_t value = 0;
};

std::optional<IntegerArgument> ParseIntegerArgument(absl::string_view argument) {
  const size_t equals = argument.find('=');
  IntegerArgument parsed;
  absl::string_view digits = argument;
  if (equals != absl::string_view::npos) {
    if (equals == 0) return std::nullopt;
    parsed.name = argument.substr(0, equals);
    digits = argument.substr(equals + 1);
  }
  const bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return absl::ascii_isdigit(c);
  });
  if (!all_digits || !absl::SimpleAtoi(digits, &parsed.value) || parsed.value <= 0) {
    return std::nullopt;
  }
  return parsed;
}

bool NamesBatch(absl::string_view name) {
  return absl::StrContains(absl::AsciiStrToLower(name), "batch");
}

// Where a command line says its batch: the index of the argument holding the number, and the
// number. "--batch-size 16" (an option naming batch, then a number) or "NAME=16" with NAME naming
// batch ("--batch=16", "--per_device_train_batch_size=16", "batch_size=16"); the first one wins.
std::optional<std::pair<size_t, IntegerArgument>> FindBatchArgument(
    const std::vector<std::string>& command_line) {
  for (size_t i = 0; i < command_line.size(); ++i) {
    const absl::string_view argument = command_line[i];
    const std::optional<IntegerArgument> inline_value = ParseIntegerArgument(argument);
    if (inline_value && NamesBatch(inline_value->name)) return std::pair(i, *inline_value);
    const bool option = absl::StartsWith(argument, "-") && !absl::StrContains(argument, '=');
    if (!option || !NamesBatch(argument) || i + 1 == command_line.size()) continue;
    const std::optional<IntegerArgument> next = ParseIntegerArgument(command_line[i + 1]);
    if (next && next->name.empty()) return std::pair(i + 1, *next);
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<BatchModel> FitBatchModel(const BatchTrace& first, const BatchTrace& second) {
  for (const BatchTrace* trace : {&first, &second}) {
    if (absl::Status status = CheckTrace(*trace); !status.ok()) return status;
  }
  if (first.batch == second.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("both traces ran at batch size ", first.batch, ": nothing to fit"));
  }
  std::map<MatchKey, size_t> second_by_key;
  const std::vector<MatchKey> second_keys = MatchKeys(second);
  for (size_t i = 0; i < second_keys.size(); ++i) second_by_key.emplace(second_keys[i], i);

  BatchModel model;
  model.first_batch = first.batch;
  model.second_batch = second.batch;
  model.tensors = first.tensors;
  const std::vector<MatchKey> first_keys = MatchKeys(first);
  for (size_t i = 0; i < first_keys.size(); ++i) {
    const double size = static_cast<double>(first.tensors[i].size);
    double per_sample = 0;
    if (auto found = second_by_key.find(first_keys[i]); found != second_by_key.end()) {
      const double other = static_cast<double>(second.tensors[found->second].size);
      per_sample = (size - other) / static_cast<double>(first.batch - second.batch);
      ++model.matched;
    }
    model.per_sample.push_back(per_sample);
    model.constant.push_back(size - per_sample * static_cast<double>(first.batch));
  }
  if (model.matched == 0) {
    return absl::InvalidArgumentError(
        "no allocation of the first trace has a counterpart in the second: are they recordings "
        "of the same script?");
  }
  return model;
}

std::vector<ReplayedTensor> TensorsAtBatch(const BatchModel& model, int64_t batch) {
  std::vector<ReplayedTensor> tensors = model.tensors;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const double size = model.constant[i] + model.per_sample[i] * static_cast<double>(batch);
    // Past what any device holds the model refuses it anyway; clamped, llround stays defined.
    const double clamped = std::min(size, static_cast<double>(kMaxAllocationBytes) * 2);
    const long long rounded = std::llround(clamped);
    tensors[i].size = rounded > 0 ? static_cast<uint64_t>(rounded) : 0;
  }
  return tensors;
}

LargestBatch FindLargestBatch(const BatchModel& model, AllocatorKind kind,
                              const NativeAllocatorConfig& config) {
  LargestBatch largest;
  largest.kind = kind;
  Probe fitting = ProbeBatch(model, 1, kind, config);
  largest.peak = fitting.peak;
  if (!fitting.fits) return largest;
  // Doubling finds a batch that fits (low) and one that does not (high), then halving closes in.
  int64_t low = 1;
  int64_t high = 0;
  while (high == 0 && low < kMaxBatch) {
    const Probe probe = ProbeBatch(model, 2 * low, kind, config);
    if (!probe.fits) {
      high = 2 * low;
    } else {
      low *= 2;
      fitting = probe;
    }
  }
  largest.unbounded = high == 0;
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    const Probe probe = ProbeBatch(model, middle, kind, config);
    (probe.fits ? low : high) = middle;
    if (probe.fits) fitting = probe;
  }
  largest.batch = low;
  largest.peak = fitting.peak;
  return largest;
}

Accumulation AccumulationFor(int64_t effective_batch, int64_t largest) {
  Accumulation accumulation;
  accumulation.effective_batch = effective_batch;
  if (largest <= 0 || effective_batch <= 0) return accumulation;
  for (int64_t steps = 1; steps <= effective_batch; ++steps) {
    if (effective_batch % steps == 0 && effective_batch / steps <= largest) {
      accumulation.steps = steps;
      accumulation.micro_batch = effective_batch / steps;
      break;
    }
  }
  return accumulation;
}

absl::StatusOr<std::pair<int64_t, int64_t>> BatchSizesFromCommandLines(
    const std::vector<std::string>& first, const std::vector<std::string>& second) {
  constexpr absl::string_view kHint = ": pass their batch sizes with --batch-sizes A,B";
  if (first.size() != second.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the two traces' command lines have ",
                                                   first.size(), " and ", second.size(),
                                                   " arguments", kHint));
  }
  std::vector<std::pair<int64_t, int64_t>> differing;
  std::vector<std::string> shown;
  for (size_t i = 0; i < first.size(); ++i) {
    if (first[i] == second[i]) continue;
    const std::optional<IntegerArgument> a = ParseIntegerArgument(first[i]);
    const std::optional<IntegerArgument> b = ParseIntegerArgument(second[i]);
    if (!a || !b || a->name != b->name) continue;  // not a number both times: not the batch
    differing.emplace_back(a->value, b->value);
    shown.push_back(absl::StrCat(Printable(first[i]), " / ", Printable(second[i])));
  }
  if (differing.size() == 1) return differing.front();
  if (differing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the two traces' command lines differ in no integer argument", kHint));
  }
  return absl::InvalidArgumentError(absl::StrCat("the two traces' command lines differ in ",
                                                 differing.size(), " integer arguments (",
                                                 absl::StrJoin(shown, ", "), ")", kHint));
}

std::optional<std::string> SecondRecordingCommand(const std::vector<std::string>& command_line) {
  const auto found = FindBatchArgument(command_line);
  if (!found) return std::nullopt;
  const auto& [index, argument] = *found;
  const int64_t other = argument.value == 1 ? 2 : argument.value / 2;
  std::vector<std::string> words;
  for (size_t i = 0; i < command_line.size(); ++i) {
    std::string word = command_line[i];
    if (i == index)
      word = argument.name.empty() ? absl::StrCat(other) : absl::StrCat(argument.name, "=", other);
    words.push_back(ShellWord(word));
  }
  return absl::StrCat("gpumem record --tensors -o second.trace -- ", absl::StrJoin(words, " "));
}

}  // namespace gpumem::report
