// report/advise/batch_scaling.h: two recordings at two batch sizes matched, fitted, synthesized at
// another batch and searched for the largest batch that fits.
#include "report/advise/batch_scaling.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Builds a BatchTrace tensor by tensor, each at the next seq.
class TraceBuilder {
 public:
  explicit TraceBuilder(int64_t batch) { trace_.batch = batch; }

  // Returns the tensor's index, to free it later.
  size_t Allocate(const std::string& key, uint32_t iteration, int64_t size, uint64_t stream = 7) {
    ReplayedTensor tensor;
    tensor.size = size > 0 ? static_cast<uint64_t>(size) : 0;
    tensor.stream = stream;
    tensor.stack_id = trace_.tensors.size() + 100;
    tensor.allocated_at = PositionOf(++seq_);
    trace_.tensors.push_back(tensor);
    trace_.keys.push_back(key);
    trace_.iterations.push_back(iteration);
    return trace_.tensors.size() - 1;
  }
  void Free(size_t tensor) { trace_.tensors[tensor].freed_at = PositionOf(++seq_); }
  const BatchTrace& trace() const { return trace_; }

 private:
  BatchTrace trace_;
  uint64_t seq_ = 0;
};

// A training script whose every size is exactly constant + per-sample x batch: weights and
// optimizer state, then per iteration an input, three activations of one layer (the same
// allocation point), a gradient freed early and a tensor that only exists from batch 2 on
// (its size constant is negative).
BatchTrace LinearTrace(int64_t batch) {
  TraceBuilder builder(batch);
  builder.Allocate("model.py:10 Linear.__init__", 0, 24 * kMiB);
  builder.Allocate("optim.py:40 Adam.step", 0, 48 * kMiB + 512);
  for (uint32_t iteration = 1; iteration <= 3; ++iteration) {
    const size_t input = builder.Allocate("data.py:5 load", iteration, 4096 + 300'000 * batch);
    std::vector<size_t> activations;
    for (int64_t layer = 0; layer < 3; ++layer) {
      activations.push_back(
          builder.Allocate("model.py:22 forward", iteration, 1000 * layer + 1'500'000 * batch));
    }
    const size_t gradient = builder.Allocate("model.py:30 backward", iteration, 77 + 65536 * batch);
    builder.Free(gradient);
    const size_t padded =
        builder.Allocate("model.py:31 pad", iteration, -1'000'000 + 600'000 * batch);
    builder.Free(padded);
    for (auto it = activations.rbegin(); it != activations.rend(); ++it) builder.Free(*it);
    builder.Free(input);
  }
  return builder.trace();
}

void ExpectSameTensors(const std::vector<ReplayedTensor>& actual,
                       const std::vector<ReplayedTensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(actual[i].size, expected[i].size);
    EXPECT_EQ(actual[i].allocated_at, expected[i].allocated_at);
    EXPECT_EQ(actual[i].freed_at, expected[i].freed_at);
    EXPECT_EQ(actual[i].last_use_at, expected[i].last_use_at);
    EXPECT_EQ(actual[i].stream, expected[i].stream);
    EXPECT_EQ(actual[i].device, expected[i].device);
    EXPECT_EQ(actual[i].stack_id, expected[i].stack_id);
  }
}

TEST(FitBatchModel, MatchesByKeyIterationAndOccurrence) {
  TraceBuilder first(4);
  first.Allocate("w", 0, 100);
  first.Allocate("a", 1, 40);
  first.Allocate("a", 1, 80);
  first.Allocate("b", 1, 7);
  first.Allocate("a", 1, 120);  // a third "a" of iteration 1: the second run has two
  first.Allocate("a", 2, 44);
  first.Allocate("a", 5, 999);  // iteration 5: only in this run
  first.Allocate("c", 1, 555);  // only in this run
  TraceBuilder second(8);       // the same allocations in another order
  second.Allocate("a", 1, 80);
  second.Allocate("w", 0, 100);
  second.Allocate("b", 1, 7);
  second.Allocate("a", 1, 160);
  second.Allocate("a", 2, 84);
  second.Allocate("a", 3, 1);  // iteration 3: only in this run

  const absl::StatusOr<BatchModel> model = FitBatchModel(first.trace(), second.trace());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->first_batch, 4);
  EXPECT_EQ(model->second_batch, 8);
  EXPECT_EQ(model->matched, 5u);
  EXPECT_EQ(model->per_sample, (std::vector<double>{0, 10, 20, 0, 0, 10, 0, 0}));
  EXPECT_EQ(model->constant, (std::vector<double>{100, 0, 0, 7, 120, 4, 999, 555}));
}

TEST(FitBatchModel, UnmatchedTensorsKeepTheirSizeAndEveryTensorItsLifetime) {
  TraceBuilder first(16);
  const size_t matched = first.Allocate("a", 1, 1600, /*stream=*/3);
  const size_t unmatched = first.Allocate("only here", 1, 5000, /*stream=*/9);
  first.Free(unmatched);
  first.Free(matched);
  BatchTrace first_trace = first.trace();
  first_trace.tensors[matched].device = 1;
  first_trace.tensors[matched].last_use_at = JustAfter(2);
  TraceBuilder second(8);
  second.Allocate("x", 0, 1);  // shifts every position of the second run
  second.Free(second.Allocate("a", 1, 800, /*stream=*/5));

  const absl::StatusOr<BatchModel> model = FitBatchModel(first_trace, second.trace());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->matched, 1u);
  std::vector<ReplayedTensor> expected = first_trace.tensors;
  expected[matched].size = 3200;
  ExpectSameTensors(TensorsAtBatch(*model, 32), expected);
  expected[matched].size = 100;
  ExpectSameTensors(TensorsAtBatch(*model, 1), expected);
}

TEST(FitBatchModel, SynthesizesAnotherBatchExactlyWhenSizesAreLinear) {
  const BatchTrace at12 = LinearTrace(12);
  for (const auto& [a, b] : {std::pair(4, 8), std::pair(8, 4)}) {
    SCOPED_TRACE(a);
    const absl::StatusOr<BatchModel> model = FitBatchModel(LinearTrace(a), LinearTrace(b));
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(model->matched, at12.tensors.size());
    ExpectSameTensors(TensorsAtBatch(*model, 12), at12.tensors);
  }
}

TEST(FitBatchModel, ASizeThatFallsToZeroOrBelowLeavesTheTensorOut) {
  const absl::StatusOr<BatchModel> model = FitBatchModel(LinearTrace(4), LinearTrace(8));
  ASSERT_TRUE(model.ok()) << model.status();
  // "model.py:31 pad": -1'000'000 + 600'000 x batch, at tensor 7 of each iteration's block.
  const size_t pad = 7;
  ASSERT_EQ(LinearTrace(4).keys[pad], "model.py:31 pad");
  EXPECT_EQ(TensorsAtBatch(*model, 2)[pad].size, 200'000u);
  EXPECT_EQ(TensorsAtBatch(*model, 1)[pad].size, 0u);
  EXPECT_EQ(LinearTrace(1).tensors[pad].size, 0u);
}

TEST(FitBatchModel, RefusesTracesThatCannotBeFitted) {
  EXPECT_FALSE(FitBatchModel(LinearTrace(4), LinearTrace(4)).ok());  // same batch
  BatchTrace zero = LinearTrace(8);
  zero.batch = 0;
  EXPECT_FALSE(FitBatchModel(LinearTrace(4), zero).ok());
  TraceBuilder other(8);  // another script
  other.Allocate("elsewhere.py:1", 0, 10);
  const absl::Status unmatched = FitBatchModel(LinearTrace(4), other.trace()).status();
  EXPECT_FALSE(unmatched.ok());
  EXPECT_NE(unmatched.message().find("same script"), std::string::npos) << unmatched;
  BatchTrace short_keys = LinearTrace(8);
  short_keys.keys.pop_back();
  EXPECT_FALSE(FitBatchModel(LinearTrace(4), short_keys).ok());
}

// The largest batch by trying every one from 1 until one does not fit (-1: all up to 4096 fit).
int64_t LargestByBruteForce(const BatchModel& model, AllocatorKind kind,
                            const NativeAllocatorConfig& config) {
  for (int64_t batch = 1; batch <= 4096; ++batch) {
    if (!ReplayTensors(TensorsAtBatch(model, batch), kind, config).Fits()) return batch - 1;
  }
  return -1;
}

TEST(FindLargestBatch, AgreesWithTryingEveryBatch) {
  const absl::StatusOr<BatchModel> model = FitBatchModel(LinearTrace(16), LinearTrace(8));
  ASSERT_TRUE(model.ok()) << model.status();
  NativeAllocatorConfig config;
  config.device_memory = 400 * kMiB;
  for (AllocatorKind kind : kAllAllocators) {
    SCOPED_TRACE(AllocatorKindName(kind));
    const int64_t expected = LargestByBruteForce(*model, kind, config);
    ASSERT_GT(expected, 8);  // the binary search has work to do
    const LargestBatch largest = FindLargestBatch(*model, kind, config);
    EXPECT_EQ(largest.kind, kind);
    EXPECT_EQ(largest.batch, expected);
    EXPECT_FALSE(largest.unbounded);
    EXPECT_EQ(largest.peak,
              ReplayTensors(TensorsAtBatch(*model, expected), kind, config).ReservedPeak());
  }
}

TEST(FindLargestBatch, NoneFitsWhenTheFixedPartIsTooLarge) {
  const absl::StatusOr<BatchModel> model = FitBatchModel(LinearTrace(16), LinearTrace(8));
  ASSERT_TRUE(model.ok()) << model.status();
  NativeAllocatorConfig config;
  config.device_memory = 60 * kMiB;  // the weights and optimizer state alone take 72 MiB
  const LargestBatch largest = FindLargestBatch(*model, AllocatorKind::kNative, config);
  EXPECT_EQ(largest.batch, 0);
  EXPECT_FALSE(largest.unbounded);
  EXPECT_EQ(
      largest.peak,
      ReplayTensors(TensorsAtBatch(*model, 1), AllocatorKind::kNative, config).ReservedPeak());
  EXPECT_GT(largest.peak, 0u);
}

TEST(FindLargestBatch, UnboundedWhenNothingGrowsWithTheBatch) {
  TraceBuilder first(4);
  first.Allocate("w", 0, 10 * kMiB);
  TraceBuilder second(8);
  second.Allocate("w", 0, 10 * kMiB);
  const absl::StatusOr<BatchModel> model = FitBatchModel(first.trace(), second.trace());
  ASSERT_TRUE(model.ok()) << model.status();
  NativeAllocatorConfig config;
  config.device_memory = 100 * kMiB;
  const LargestBatch largest = FindLargestBatch(*model, AllocatorKind::kAsync, config);
  EXPECT_EQ(largest.batch, kMaxBatch);
  EXPECT_TRUE(largest.unbounded);
  EXPECT_EQ(largest.peak, 10 * kMiB);
}

void ExpectAccumulation(int64_t effective, int64_t largest, int64_t steps, int64_t micro) {
  SCOPED_TRACE(testing::Message() << effective << " with largest " << largest);
  const Accumulation accumulation = AccumulationFor(effective, largest);
  EXPECT_EQ(accumulation.effective_batch, effective);
  EXPECT_EQ(accumulation.steps, steps);
  EXPECT_EQ(accumulation.micro_batch, micro);
}

TEST(AccumulationFor, FewestStepsThatDivideTheEffectiveBatch) {
  ExpectAccumulation(16, 5, 4, 4);
  ExpectAccumulation(12, 5, 3, 4);
  ExpectAccumulation(16, 16, 1, 16);
  ExpectAccumulation(16, 40, 1, 16);
  ExpectAccumulation(13, 5, 13, 1);  // prime: only single samples
  ExpectAccumulation(16, 0, 0, 0);   // not even one sample fits
}

using Args = std::vector<std::string>;

TEST(BatchSizesFromCommandLines, TheOneIntegerArgumentThatDiffers) {
  using Sizes = std::pair<int64_t, int64_t>;
  EXPECT_EQ(*BatchSizesFromCommandLines({"python", "train.py", "--batch-size", "16", "--lr", "3"},
                                        {"python", "train.py", "--batch-size", "8", "--lr", "3"}),
            Sizes(16, 8));
  EXPECT_EQ(*BatchSizesFromCommandLines({"python", "train.py", "--batch=16", "--log=run16.txt"},
                                        {"python", "train.py", "--batch=8", "--log=run8.txt"}),
            Sizes(16, 8));
  EXPECT_EQ(
      *BatchSizesFromCommandLines({"train.py", "batch_size=4"}, {"train.py", "batch_size=32"}),
      Sizes(4, 32));
  EXPECT_EQ(*BatchSizesFromCommandLines({"train.py", "24"}, {"train.py", "12"}), Sizes(24, 12));
}

void ExpectRefused(const Args& first, const Args& second, const std::string& says) {
  const absl::StatusOr<std::pair<int64_t, int64_t>> sizes =
      BatchSizesFromCommandLines(first, second);
  ASSERT_FALSE(sizes.ok());
  EXPECT_NE(sizes.status().message().find("--batch-sizes A,B"), std::string::npos)
      << sizes.status();
  EXPECT_NE(sizes.status().message().find(says), std::string::npos) << sizes.status();
}

TEST(BatchSizesFromCommandLines, RefusesWhenTheBatchCannotBeTold) {
  ExpectRefused({"train.py", "--batch", "16", "--steps", "100"},
                {"train.py", "--batch", "8", "--steps", "200"}, "2 integer arguments");
  ExpectRefused({"train.py", "--batch", "16"}, {"train.py", "--batch", "16"}, "no integer");
  ExpectRefused({"train.py", "--batch=16"}, {"train.py", "--size=8"}, "no integer");
  ExpectRefused({"train.py", "--batch", "0"}, {"train.py", "--batch", "8"}, "no integer");
  ExpectRefused({"train.py", "--batch", "16"}, {"train.py", "--batch", "8", "-v"}, "3 and 4");
}

TEST(SecondRecordingCommand, HalvesTheBatchArgument) {
  const std::string prefix = "gpumem record --tensors -o second.trace -- ";
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--batch-size", "16", "--epochs", "3"}),
            prefix + "python train.py --batch-size 8 --epochs 3");
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--BatchSize", "7"}),
            prefix + "python train.py --BatchSize 3");
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--batch=1"}),
            prefix + "python train.py --batch=2");
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--per_device_train_batch_size=32"}),
            prefix + "python train.py --per_device_train_batch_size=16");
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "epochs=3", "batch_size=64"}),
            prefix + "python train.py epochs=3 batch_size=32");
}

TEST(SecondRecordingCommand, QuotesArgumentsTheShellWouldSplit) {
  EXPECT_EQ(SecondRecordingCommand(
                {"python", "my train.py", "--note", "it's", "--batch", "4", "--lr=1e-3", "a*b"}),
            "gpumem record --tensors -o second.trace -- python 'my train.py' --note 'it'\\''s' "
            "--batch 2 --lr=1e-3 'a*b'");
}

TEST(SecondRecordingCommand, NoneWhenNoArgumentSaysTheBatch) {
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--epochs", "3"}), std::nullopt);
  EXPECT_EQ(SecondRecordingCommand({"python", "batch.py", "16"}), std::nullopt);  // not an option
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--batch=auto"}), std::nullopt);
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--batch"}), std::nullopt);
  EXPECT_EQ(SecondRecordingCommand({"python", "train.py", "--batch", "0"}), std::nullopt);
}

}  // namespace
}  // namespace gpumem::report
