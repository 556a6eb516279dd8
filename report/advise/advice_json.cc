// `gpumem advise --json`: one object (schema: report/advise.schema.json).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "report/advise/advice.h"
#include "report/format/json.h"

namespace gpumem::report {
namespace {

std::string JsonBool(bool value) { return value ? "true" : "false"; }

std::string JsonLifetimeFields(const Remedy& remedy, AdviseTrace& first) {
  std::string out = absl::StrCat(",\"bytes\":", remedy.bytes);
  absl::StrAppend(&out, JsonLabelFields(first.sites().LabelOf(remedy.site)),
                  ",\"frames\":", JsonFrames(first.sites().Shown(remedy.site)));
  if (remedy.holder_stack_id != 0) {
    absl::StrAppend(&out, ",\"holder\":", JsonString(first.sites().Label(remedy.holder_stack_id)),
                    ",\"holder_frames\":", JsonFrames(first.sites().Shown(remedy.holder_stack_id)));
  } else {
    absl::StrAppend(&out, ",\"holder\":null,\"holder_frames\":[]");
  }
  return out;
}

std::string JsonRemedy(const Advice& advice, const Remedy& remedy, size_t rank,
                       AdviseTrace& first) {
  std::string out = absl::StrCat(
      "{\"rank\":", rank, ",\"kind\":", JsonString(RemedyKindName(remedy.kind)),
      ",\"change\":", JsonString(remedy.change),
      ",\"allocator\":", JsonString(AllocatorKindName(remedy.allocator)), ",\"peak\":", remedy.peak,
      ",\"saving\":", advice.peak - remedy.peak, ",\"fits\":", JsonBool(remedy.fits),
      ",\"source\":", JsonString(remedy.extrapolated ? "extrapolated" : "modelled"));
  if (remedy.site != 0) absl::StrAppend(&out, JsonLifetimeFields(remedy, first));
  if (remedy.kind == RemedyKind::kBatch) {
    absl::StrAppend(&out, ",\"batch\":", remedy.batch,
                    ",\"accumulation_steps\":", remedy.accumulation.steps,
                    ",\"micro_batch\":", remedy.accumulation.micro_batch);
  }
  return out + "}";
}

std::string JsonBatch(const BatchAdvice& batch) {
  std::vector<std::string> largest;
  for (const LargestBatch& each : batch.largest) {
    largest.push_back(absl::StrCat("{\"allocator\":", JsonString(AllocatorKindName(each.kind)),
                                   ",\"batch\":", each.batch, ",\"peak\":", each.peak,
                                   ",\"unbounded\":", JsonBool(each.unbounded), "}"));
  }
  return absl::StrCat(
      "{\"sizes\":[", batch.first_batch, ",", batch.second_batch, "],\"tensors\":", batch.tensors,
      ",\"matched\":", batch.matched, ",\"largest\":[", absl::StrJoin(largest, ","),
      "],\"accumulation\":{\"effective_batch\":", batch.accumulation.effective_batch,
      ",\"steps\":", batch.accumulation.steps, ",\"micro_batch\":", batch.accumulation.micro_batch,
      "}}");
}

}  // namespace

std::string AdviceJson(const Advice& advice, AdviseTrace& first) {
  std::vector<std::string> paths;
  for (const std::string& path : advice.paths) paths.push_back(JsonString(path));
  std::vector<std::string> remedies;
  for (size_t i = 0; i < advice.remedies.size(); ++i) {
    remedies.push_back(JsonRemedy(advice, advice.remedies[i], i + 1, first));
  }
  std::vector<std::string> notes;
  for (const std::string& note : advice.notes) notes.push_back(JsonString(note));
  std::string second = "null";
  if (advice.paths.size() == 1) {
    second = absl::StrCat(
        "{\"command\":", advice.second_recording ? JsonString(*advice.second_recording) : "null",
        "}");
  }
  return absl::StrCat("{\"gpumem_advise\":1,\"traces\":[", absl::StrJoin(paths, ","),
                      "],\"device_memory\":", advice.device_memory,
                      ",\"device_memory_recorded\":", JsonBool(advice.device_memory_recorded),
                      ",\"allocator\":", JsonString(AllocatorKindName(advice.allocator.kind)),
                      ",\"allocator_settings\":", JsonString(advice.allocator.settings),
                      ",\"fits\":", JsonBool(advice.fits), ",\"peak\":", advice.peak,
                      ",\"remedies\":[", absl::StrJoin(remedies, ","),
                      "],\"batch\":", advice.batch ? JsonBatch(*advice.batch) : "null",
                      ",\"second_trace\":", second, ",\"notes\":[", absl::StrJoin(notes, ","),
                      "]}\n");
}

}  // namespace gpumem::report
