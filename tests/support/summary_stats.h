// A PyTorch-style statistic (report/allocator/allocator_model.h's SummaryStat) checked field by field, so a
// failure names the field and the statistic.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "report/allocator/allocator_model.h"

namespace gpumem::testing {

inline void ExpectStat(const report::SummaryStat& stat, uint64_t current, uint64_t peak,
                       uint64_t allocated, uint64_t freed, const std::string& what) {
  EXPECT_EQ(stat.current, current) << what << ": current";
  EXPECT_EQ(stat.peak, peak) << what << ": peak";
  EXPECT_EQ(stat.allocated, allocated) << what << ": allocated";
  EXPECT_EQ(stat.freed, freed) << what << ": freed";
}

}  // namespace gpumem::testing
