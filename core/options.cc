#include "core/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <initializer_list>

#include "core/option_table.h"

namespace gpumem {
namespace {

bool ParseInt(const char* text, int min, int max, int* out) {
  char* end = nullptr;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < min || value > max) return false;
  *out = static_cast<int>(value);
  return true;
}

bool ParseBool(const char* text, bool* out) {
  if (strcmp(text, "1") == 0 || strcmp(text, "true") == 0 || strcmp(text, "yes") == 0) {
    *out = true;
  } else if (strcmp(text, "0") == 0 || strcmp(text, "false") == 0 || strcmp(text, "no") == 0) {
    *out = false;
  } else {
    return false;
  }
  return true;
}

void CopyString(const char* text, char* out, size_t capacity) {
  size_t n = strnlen(text, capacity - 1);
  memcpy(out, text, n);
  out[n] = '\0';
}

// Sets the option `spec` describes from its variable's value `text`; a bad value keeps the
// default, with a warning.
void ParseOption(const OptionSpec& spec, const char* text, RecorderOptions* options) {
  char* member = reinterpret_cast<char*>(options) + spec.offset;
  char expected[32] = "0 or 1";
  bool parsed = true;
  switch (spec.kind) {
    case OptionKind::kSwitch:
      parsed = ParseBool(text, reinterpret_cast<bool*>(member));
      break;
    case OptionKind::kNumber:
      snprintf(expected, sizeof(expected), "%d..%d", spec.min, spec.max);
      parsed = ParseInt(text, spec.min, spec.max, reinterpret_cast<int*>(member));
      break;
    case OptionKind::kText:
      CopyString(text, member, spec.size);
      break;
    case OptionKind::kOther:
      break;
  }
  if (!parsed) {
    char message[256];
    snprintf(message, sizeof(message), "%s must be %s, got '%.64s'; using %s", spec.name, expected,
             text, spec.default_text);
    Warn(message);
  }
}

// The first of `names` that is set to a number in [0, INT_MAX], or -1.
int FirstIntOf(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    int value = -1;
    if (const char* v = getenv(name); v != nullptr && ParseInt(v, 0, 0x7fffffff, &value)) {
      return value;
    }
  }
  return -1;
}

void LoadDistributedIdentity(RecorderOptions* options) {
  options->rank = FirstIntOf({"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"});
  options->local_rank = FirstIntOf({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
  options->world_size = FirstIntOf({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"});
}

}  // namespace

void Warn(const char* part1, const char* part2, const char* part3) {
  char line[1024] = "gpumem: warning: ";
  strncat(line, part1, sizeof(line) - strlen(line) - 2);
  if (part2 != nullptr) strncat(line, part2, sizeof(line) - strlen(line) - 2);
  if (part3 != nullptr) strncat(line, part3, sizeof(line) - strlen(line) - 2);
  strcat(line, "\n");
  ssize_t ignored = write(STDERR_FILENO, line, strlen(line));
  (void)ignored;
}

void LoadRecorderOptions(RecorderOptions* options) {
  *options = RecorderOptions{};
  for (const OptionSpec& spec : kOptionTable) {
    if (const char* v = getenv(spec.name); v != nullptr) ParseOption(spec, v, options);
  }
  LoadDistributedIdentity(options);
}

const char* OptionValueText(const OptionSpec& spec, const RecorderOptions& options, char* buffer,
                            size_t capacity) {
  const char* member = reinterpret_cast<const char*>(&options) + spec.offset;
  switch (spec.kind) {
    case OptionKind::kSwitch:
      return *reinterpret_cast<const bool*>(member) ? "1" : "0";
    case OptionKind::kNumber:
      snprintf(buffer, capacity, "%d", *reinterpret_cast<const int*>(member));
      return buffer;
    case OptionKind::kText:
      return member[0] != '\0' ? member : nullptr;
    case OptionKind::kOther:
      break;
  }
  return nullptr;
}

}  // namespace gpumem
