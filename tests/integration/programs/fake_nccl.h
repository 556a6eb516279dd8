// libnccl.so.2 of the tests (fake_nccl.cc): NCCL's cuMem* allocation and free sequences.
#pragma once

extern "C" int fake_nccl_run(bool peer, bool keep, bool double_release);
