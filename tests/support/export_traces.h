// Traces the export tests share: the bundled ones (samples/traces/) as a test parameter, and a
// synthetic one with a Python stack and kernel launches with and without GPU times.
#pragma once

#include <cctype>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::testing {

// The bundled traces, for INSTANTIATE_TEST_SUITE_P(..., BundledTraces(), BundledTraceName).
inline ::testing::internal::ParamGenerator<std::string> BundledTraces() {
  return ::testing::Values("leak_loop-h200.trace", "train_mlp-async-h100.trace",
                           "train_mlp-default-h100.trace", "train_mlp-expandable-h100.trace");
}
inline std::string BundledTraceName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.find('.'));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

// Written to `path`: starts at CLOCK_MONOTONIC 1 s and CLOCK_REALTIME 5 s; two allocations of 1
// MiB on device 0 (seq 1 and 2, at 5 us) from stack 7, whose only frame is a Python function
// named with ';' and a line break (/home/me/train.py:12); two launches of kernel(int*) on stream
// 0x55 at 10 and 11 us, the first with GPU times (KernelTiming, CUPTI's CLOCK_REALTIME: from 20
// us for 3.5 us), the second without.
inline void WriteSyntheticExportTrace(const std::string& path) {
  std::vector<TracePacket> packets;
  TracePacket header = HeaderPacket();
  header.mutable_header()->set_start_time_mono_ns(1000000000);
  header.mutable_header()->set_start_time_unix_ns(5000000000);
  packets.push_back(header);
  TracePacket code;
  code.mutable_python_code()->set_id(1);
  code.mutable_python_code()->set_filename("/home/me/train.py");
  code.mutable_python_code()->set_function("step;inner\nline");
  packets.push_back(code);
  TracePacket stack;
  stack.mutable_stack()->set_id(7);
  stack.mutable_stack()->add_python_code(1);
  stack.mutable_stack()->add_python_line(12);
  stack.mutable_stack()->add_python_group(0);
  packets.push_back(stack);
  TracePacket name;
  name.mutable_kernel_name()->set_id(3);
  name.mutable_kernel_name()->set_name("_Z6kernelPi");
  packets.push_back(name);
  for (int i = 0; i < 2; ++i) {
    TracePacket alloc;
    MemoryEvent* event = alloc.mutable_memory();
    event->set_seq(1 + i);
    event->set_timestamp_ns(1000000000 + 5000);
    event->set_device(0);
    event->set_api(CUDA_MALLOC);
    event->set_kind(DEVICE);
    event->set_action(ALLOC);
    event->set_size(1 << 20);
    event->set_address(0x7f0000000000 + (static_cast<uint64_t>(i) << 20));
    event->set_stack_id(7);
    packets.push_back(alloc);
  }
  for (int i = 0; i < 2; ++i) {
    TracePacket launch;
    LaunchEvent* l = launch.mutable_launch();
    l->set_seq(3 + i);
    l->set_timestamp_ns(1000000000 + 10000 + 1000 * i);
    l->set_device(0);
    l->set_api(CU_LAUNCH_KERNEL);
    l->set_kernel_id(3);
    l->set_stream(0x55);
    l->set_correlation_id(i == 0 ? 42 : 0);
    packets.push_back(launch);
  }
  TracePacket timing;
  timing.mutable_kernel_timing()->set_correlation_id(42);
  timing.mutable_kernel_timing()->set_start_ns(5000000000 + 20000);  // 20 us after the start
  timing.mutable_kernel_timing()->set_end_ns(5000000000 + 23500);
  packets.push_back(timing);
  packets.push_back(FooterPacket(4));
  std::ofstream(path, std::ios::binary) << FramedAll(packets);
}

}  // namespace gpumem::testing
