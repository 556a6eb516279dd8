#!/usr/bin/env python3
"""Writes core/trace_ids.h from core/trace.proto: the field numbers and enum values the recorder's
hand-written encoder needs (it cannot include protoc's header: no protobuf in the target process).

Usage: gen_trace_ids.py TRACE_PROTO OUTPUT_HEADER   (run by core/CMakeLists.txt at build time)

Each message's fields become `namespace <message>_field { inline constexpr uint32_t k<Field> }`
(the message name in snake case, a few shortened: TracePacket -> packet_field), each enum an
`enum class` whose values lose the prefix they share (CAPTURE_MODE_GLOBAL -> kGlobal) and whose
zero value loses its own (API_UNKNOWN -> kUnknown). tests/core/wire_format_test.cc checks the
result against libprotobuf's descriptors.
"""

import re
import sys

# Messages whose namespace is shorter than their name, as the recorder has always spelled them.
NAMESPACES = {"TracePacket": "packet", "MemoryEvent": "memory", "LaunchEvent": "launch",
              "CuptiStatus": "cupti"}

FIELD = re.compile(r"^(?:optional\s+|repeated\s+)?[\w.]+\s+(\w+)\s*=\s*(\d+)\s*(?:\[.*\])?;$")
ENUM_VALUE = re.compile(r"^(\w+)\s*=\s*(\d+)\s*;$")


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def camel(words):
    """k + each word capitalised; a word starting with a digit keeps its case (3D)."""
    return "k" + "".join(w if w[0].isdigit() else w[0].upper() + w[1:].lower() for w in words)


def parse(text):
    """[(kind, name, [(entry, number)])] for each top-level message and enum, in order."""
    text = re.sub(r"//[^\n]*", "", text)
    blocks, stack = [], []
    for statement in re.findall(r"[^{};]*[{};]", text):
        statement = " ".join(statement.split())
        if statement.endswith("{"):
            words = statement[:-1].split()
            if words[0] in ("message", "enum") and not stack:
                blocks.append((words[0], words[1], []))
            stack.append(words[0])
        elif statement == "}":
            stack.pop()
        elif stack and statement.endswith(";"):
            pattern = ENUM_VALUE if blocks[-1][0] == "enum" else FIELD
            match = pattern.match(statement)
            if match:
                blocks[-1][2].append((match.group(1), int(match.group(2))))
    if stack:
        sys.exit("gen_trace_ids.py: unbalanced braces in the proto")
    return blocks


def enum_constant(value, zero_prefix, shared):
    if value.startswith(zero_prefix) and (shared or value.endswith(("_UNKNOWN", "_NONE"))):
        value = value[len(zero_prefix):]
    return camel(value.split("_"))


def enum_lines(name, values):
    zero = next(v for v, number in values if number == 0)
    zero_prefix = zero[: zero.rfind("_") + 1]
    shared = all(v.startswith(zero_prefix) for v, _ in values)
    lines = [f"enum class {name} : uint32_t {{"]
    for value, number in values:
        lines.append(f"  {enum_constant(value, zero_prefix, shared)} = {number},")
    return lines + ["};", ""]


def message_lines(name, fields):
    namespace = NAMESPACES.get(name, snake(name)) + "_field"
    lines = [f"namespace {namespace} {{"]
    for field, number in fields:
        lines.append(f"inline constexpr uint32_t {camel(field.split('_'))} = {number};")
    return lines + [f"}}  // namespace {namespace}", ""]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gen_trace_ids.py TRACE_PROTO OUTPUT_HEADER")
    with open(sys.argv[1]) as proto:
        blocks = parse(proto.read())
    lines = [
        "// Generated from core/trace.proto by core/gen_trace_ids.py: do not edit. Field numbers and",
        "// enum values for the recorder's hand-written encoder (no protobuf in the target process).",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace gpumem::proto {",
        "",
    ]
    for kind, name, entries in blocks:
        lines += enum_lines(name, entries) if kind == "enum" else message_lines(name, entries)
    lines.append("}  // namespace gpumem::proto")
    with open(sys.argv[2], "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
