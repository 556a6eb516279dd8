#!/usr/bin/env python3
"""Reads back what `gpumem export` wrote, with Python's own pickle and json, and checks it.

    check_export.py memory-viz SNAPSHOT [--report REPORT_JSON] [--counts COUNTS] [--expect K=V ...]
    check_export.py chrome-json TRACE_JSON --report REPORT_JSON [--counts COUNTS]
    check_export.py speedscope FILE --report REPORT_JSON --what peak|leaks
    check_export.py folded FILE --report REPORT_JSON --what peak|leaks

REPORT_JSON is `gpumem report --json` of the same trace, COUNTS `gpumem dump --counts`: the
figures the export must agree with. --expect names exact values for memory-viz
(live_segments, live_bytes, live_active_bytes, alloc, free_completed, segment_alloc,
segment_free, segment_map, segment_unmap, oom, python_frames (1: some frame is Python's)).
Prints one line per failure and a last line "ok" or "N failure(s)"; exit 0 when all held.
Used by tests/report/cli/cmd_export_test.cc and, on the GPU machine, by tests/gpu/run.sh.
"""
import argparse
import collections
import json
import pickle
import sys

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom"}
SEGMENT_KEYS = {"device": int, "address": int, "total_size": int, "allocated_size": int,
                "active_size": int, "requested_size": int, "stream": int, "segment_type": str,
                "segment_pool_id": tuple, "is_expandable": bool, "frames": list, "blocks": list}
BLOCK_KEYS = {"address": int, "size": int, "requested_size": int, "state": str, "frames": list}


def check_frames(frames, where):
    if not check(isinstance(frames, list), "%s: frames is %r, not a list" % (where, type(frames))):
        return
    for frame in frames:
        check(isinstance(frame, dict) and set(frame) >= {"filename", "line", "name"},
              "%s: frame %r lacks filename/line/name" % (where, frame))
        if isinstance(frame, dict):
            check(isinstance(frame.get("filename"), str) and frame.get("filename") != "",
                  "%s: filename %r" % (where, frame.get("filename")))
            check(isinstance(frame.get("line"), int), "%s: line %r" % (where, frame.get("line")))
            check(isinstance(frame.get("name"), str), "%s: name %r" % (where, frame.get("name")))


def report_places(report, section):
    """{device: bytes} of the report's peak ("peak") or never-freed ("leaks") per place."""
    trace = report["traces"][0]
    if section == "peak":
        return {(p["memory"], p["device"]): p["peak_bytes"] for p in trace["peak"]}
    return {(p["memory"], p["device"]): p["bytes"] for p in trace["leaks"]["places"]}


def counts_of(path):
    """`gpumem dump --counts`: {(action, api): count}, and launches."""
    counts = collections.Counter()
    launches = 0
    with open(path) as f:
        for line in f:
            parts = line.split()
            fields = dict(p.split("=", 1) for p in parts if "=" in p)
            if parts[0] in ("alloc", "free", "alloc_failed", "free_failed"):
                counts[(parts[0], parts[1])] += int(fields["count"])
            elif parts[0] == "launch":
                launches += int(fields["count"])
    return counts, launches


VMM_APIS = {"cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap",
            "cuMemUnmap", "cuMemImportFromShareableHandle", "cuMemRetainAllocationHandle"}
HOST_APIS = {"cudaMallocHost", "cudaHostAlloc", "cudaFreeHost", "cuMemHostAlloc", "cuMemFreeHost",
             "cuMemAllocHost"}


def memory_viz(args):
    with open(args.file, "rb") as f:
        raw = f.read()
    check(raw[:1] == b"\x80" and 2 <= raw[1] <= 4, "protocol header %r: not 2..4" % raw[:2])
    snapshot = pickle.loads(raw)
    if not check(isinstance(snapshot, dict) and {"segments", "device_traces"} <= set(snapshot),
                 "top level: %r" % (type(snapshot),)):
        return
    segments = snapshot["segments"]
    traces = snapshot["device_traces"]
    check(isinstance(segments, list) and isinstance(traces, list), "segments/device_traces types")
    live_bytes = 0
    live_active = 0
    python_frames = False
    for i, segment in enumerate(segments):
        where = "segment %d" % i
        for key, kind in SEGMENT_KEYS.items():
            check(isinstance(segment.get(key), kind),
                  "%s: %s is %r, not %s" % (where, key, segment.get(key), kind.__name__))
        check(segment["segment_type"] in ("small", "large"), "%s: segment_type" % where)
        check_frames(segment["frames"], where)
        address = segment["address"]
        active = 0
        for j, block in enumerate(segment["blocks"]):
            for key, kind in BLOCK_KEYS.items():
                check(isinstance(block.get(key), kind), "%s block %d: %s is %r" %
                      (where, j, key, block.get(key)))
            check(block["address"] == address, "%s block %d: not where the previous ended" %
                  (where, j))
            check(block["state"] in ("active_allocated", "inactive"), "%s: state" % where)
            check_frames(block["frames"], "%s block %d" % (where, j))
            address += block["size"]
            if block["state"] == "active_allocated":
                active += block["size"]
        check(address == segment["address"] + segment["total_size"],
              "%s: blocks do not tile the segment" % where)
        check(segment["active_size"] == active and segment["allocated_size"] == active,
              "%s: active/allocated size %d/%d, blocks say %d" %
              (where, segment["active_size"], segment["allocated_size"], active))
        live_bytes += segment["total_size"]
        live_active += active
    actions = collections.Counter()
    for device, entries in enumerate(traces):
        check(isinstance(entries, list), "device %d: trace not a list" % device)
        last = 0
        live = {}
        for k, entry in enumerate(entries):
            where = "device %d entry %d" % (device, k)
            action = entry.get("action")
            check(action in ACTIONS, "%s: action %r" % (where, action))
            actions[action] += 1
            for key in ("size", "stream", "time_us"):
                check(isinstance(entry.get(key), int), "%s: %s is %r" % (where, key, entry.get(key)))
            if action == "oom":
                check(isinstance(entry.get("device_free"), int), "%s: device_free" % where)
            else:
                check(isinstance(entry.get("addr"), int), "%s: addr" % where)
            check_frames(entry.get("frames"), where)
            python_frames = python_frames or any(
                f.get("filename", "").endswith(".py") for f in entry.get("frames") or [])
            check(entry["time_us"] >= last, "%s: time_us goes back" % where)
            last = entry["time_us"]
            if action == "alloc":
                live[entry["addr"]] = entry["size"]
            elif action == "free_completed":
                check(live.pop(entry["addr"], None) == entry["size"],
                      "%s: free_completed of no live alloc at %#x" % (where, entry["addr"]))
    expect = dict(kv.split("=", 1) for kv in args.expect or [])
    measured = dict(actions)
    measured.update(live_segments=len(segments), live_bytes=live_bytes,
                    live_active_bytes=live_active, python_frames=int(python_frames))
    for key, value in expect.items():
        check(measured.get(key, 0) == int(value),
              "%s: %s, expected %s" % (key, measured.get(key, 0), value))
    if args.counts:
        counts, _ = counts_of(args.counts)
        plain_allocs = sum(n for (action, api), n in counts.items()
                           if action == "alloc" and api not in VMM_APIS | HOST_APIS)
        failed = sum(n for (action, api), n in counts.items()
                     if action == "alloc_failed" and api not in HOST_APIS)
        maps = counts[("alloc", "cuMemMap")]
        # Mappings of other processes' memory (imported handles: NCCL's peers) are not this
        # process's segments; the counts do not say how many of the maps they are.
        imports = counts[("alloc", "cuMemImportFromShareableHandle")]
        check(actions["segment_alloc"] == plain_allocs,
              "segment_alloc %d, the trace has %d plain allocations" %
              (actions["segment_alloc"], plain_allocs))
        check(actions["segment_map"] == maps or (imports and actions["segment_map"] < maps),
              "segment_map %d, cuMemMap %d (%d imported handles)" %
              (actions["segment_map"], maps, imports))
        # Failures that are not out of memory (error 800: a refused fabric handle) are no oom
        # entries: the report counts them apart.
        if args.report:
            traces = json.load(open(args.report)).get("traces", [])
            failed -= sum(trace.get("failed_calls", 0) for trace in traces)
        check(actions["oom"] == failed, "oom %d, failed allocations %d" % (actions["oom"], failed))
    if args.report:
        # The report's live memory at the end (leaks) is what the segments hold, less the VMM
        # physical memory that the segments show as mappings (same bytes where each is mapped once).
        leaks = report_places(json.load(open(args.report)), "leaks")
        device_live = sum(b for (memory, _), b in leaks.items() if memory == "device")
        check(live_bytes == device_live, "segments hold %d bytes, the report's leaks %d" %
              (live_bytes, device_live))


def chrome_json(args):
    document = json.load(open(args.file))
    check(set(document) >= {"traceEvents", "displayTimeUnit", "metadata"}, "top-level keys")
    check(document.get("displayTimeUnit") == "ns", "displayTimeUnit")
    events = document["traceEvents"]
    maxima = collections.defaultdict(int)
    phases = collections.Counter()
    names = set()
    for i, event in enumerate(events):
        where = "event %d (%s)" % (i, event.get("ph"))
        phase = event.get("ph")
        phases[phase] += 1
        required = {"ph", "pid", "name"} | ({"ts", "tid"} if phase != "M" else {"tid"})
        if phase == "X":
            required |= {"dur"}
        if phase in ("C", "M"):
            required |= {"args"}
        check(required <= set(event), "%s lacks %s" % (where, sorted(required - set(event))))
        if phase in ("X", "i", "C"):
            check(isinstance(event.get("ts"), (int, float)) and event["ts"] >= 0, "%s: ts" % where)
        if phase == "X":
            check(event["dur"] > 0, "%s: dur %r" % (where, event["dur"]))
            check(event["args"].get("time") in ("gpu", "host launch"), "%s: args.time" % where)
        if phase == "i":
            check(event.get("s") in ("t", "p", "g"), "%s: scope" % where)
        if phase == "C" and event["name"] == "live bytes":
            maxima[event["pid"]] = max(maxima[event["pid"]], event["args"]["bytes"])
        if phase == "M" and event["name"] == "process_name":
            names.add(event["pid"])
    for pid in maxima:
        check(pid in names, "pid %d has no process_name" % pid)
    if args.report:
        peaks = report_places(json.load(open(args.report)), "peak")
        expected = {}
        for (memory, device), peak in peaks.items():
            pid = 100001 if memory == "host" else (device + 1 if device >= 0 else 100000)
            expected[pid] = peak
        check(dict(maxima) == expected, "counter maxima %s, report peaks %s" %
              (dict(maxima), expected))
    if args.counts:
        _, launches = counts_of(args.counts)
        check(phases["X"] == launches, "%d slices, the trace has %d launches" %
              (phases["X"], launches))
        check(document["metadata"].get("launches") == launches, "metadata launches")


def speedscope(args):
    document = json.load(open(args.file))
    check(document.get("$schema") == "https://www.speedscope.app/file-format-schema.json",
          "$schema")
    frames = document["shared"]["frames"]
    check(all(isinstance(f.get("name"), str) for f in frames), "frame names")
    totals = {}
    for profile in document["profiles"]:
        check(profile.get("type") == "sampled" and profile.get("unit") == "bytes",
              "profile %r: type/unit" % profile.get("name"))
        check(len(profile["samples"]) == len(profile["weights"]), "samples/weights lengths")
        for sample in profile["samples"]:
            check(all(0 <= i < len(frames) for i in sample), "frame index out of range")
        total = sum(profile["weights"])
        check(profile["endValue"] == total, "endValue %d, weights %d" % (profile["endValue"], total))
        totals[profile["name"]] = total
    expected = report_places(json.load(open(args.report)), args.what)
    check(sorted(totals.values()) == sorted(b for b in expected.values() if b > 0),
          "weights %s, report %s" % (totals, expected))


def folded(args):
    total = 0
    lines = 0
    with open(args.file, encoding="utf-8") as f:
        for line in f:
            stack, _, weight = line.rstrip("\n").rpartition(" ")
            check(stack != "" and weight.isdigit(), "line %r" % line)
            total += int(weight)
            lines += 1
    report = json.load(open(args.report))
    expected = report_places(report, args.what)
    check(total == sum(expected.values()), "weights %d, report %d" % (total, sum(expected.values())))
    # The report's largest call site of each place ends one of the stacks, as the report names it.
    trace = report["traces"][0]
    places = trace["peak"] if args.what == "peak" else trace["leaks"]["places"]
    innermost = {line.rstrip("\n").rpartition(" ")[0].split(";")[-1]
                 for line in open(args.file, encoding="utf-8")}
    for place in places:
        if place.get("sites") and place["sites"][0]["frames"]:
            text = place["sites"][0]["frames"][0]["text"].replace(";", ",").replace("\n", " ")
            check(text in innermost, "the report's site %r ends no folded stack" % text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("format", choices=["memory-viz", "chrome-json", "speedscope", "folded"])
    parser.add_argument("file")
    parser.add_argument("--report")
    parser.add_argument("--counts")
    parser.add_argument("--what", default="peak", choices=["peak", "leaks"])
    parser.add_argument("--expect", nargs="*")
    args = parser.parse_args()
    try:
        {"memory-viz": memory_viz, "chrome-json": chrome_json, "speedscope": speedscope,
         "folded": folded}[args.format](args)
    except Exception as error:  # a crash reading it back is a failure, said on one line
        failures.append("%s: %s" % (type(error).__name__, error))
    for failure in failures[:30]:
        print(failure)
    print("ok" if not failures else "%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
