#!/usr/bin/env python3
"""Fails when a file includes a header of a layer it must not use.

The recorder: core <- cupti <- interpose (the preload library); nothing of it includes the
analyzer's headers. The analyzer is built in stages, each a library that may use only the stages
before it: format <- trace <- replay <- stacks <- allocator <- analysis <- advise <- export <- viewer <- cli;
it uses nothing of the recorder but core/ (the trace's schema and reader).
Usage: check_layering.py SOURCE_DIR. Prints one line per wrong include.
"""
import pathlib
import re
import sys

RECORDER = ["core", "cupti", "interpose"]
STAGES = ["report/format", "report/trace", "report/replay", "report/stacks", "report/allocator",
          "report/analysis", "report/advise", "report/export", "viewer", "report/cli"]
INCLUDE = re.compile(r'^#include "((?:core|cupti|interpose|report|viewer)/[^"]+)"', re.M)


def stage_of(path):
    for rank, stage in enumerate(STAGES):
        if path.startswith(stage + "/"):
            return rank
    return None


def recorder_layer(path):
    top = path.split("/", 1)[0]
    return RECORDER.index(top) if top in RECORDER else None


def check_recorder(root, wrong):
    for folder in RECORDER:
        for source in sorted((root / folder).rglob("*")):
            if source.suffix not in (".h", ".cc"):
                continue
            relative = source.relative_to(root).as_posix()
            rank = recorder_layer(relative)
            for included in INCLUDE.findall(source.read_text(encoding="utf-8")):
                other = recorder_layer(included)
                if other is None or other > rank:
                    wrong.append(f"{relative}: includes {included}, of a later layer")


def main():
    root = pathlib.Path(sys.argv[1])
    wrong = []
    check_recorder(root, wrong)
    for folder in ("report", "viewer"):
        for source in sorted((root / folder).rglob("*")):
            if source.suffix not in (".h", ".cc"):
                continue
            relative = source.relative_to(root).as_posix()
            rank = stage_of(relative)
            if rank is None:
                wrong.append(f"{relative}: not in any stage folder")
                continue
            for included in INCLUDE.findall(source.read_text(encoding="utf-8")):
                if included.startswith("core/"):
                    continue
                if included.startswith(("interpose/", "cupti/")):
                    wrong.append(f"{relative}: includes the recorder's {included}")
                    continue
                other = stage_of(included)
                if other is None or other > rank:
                    wrong.append(f"{relative}: includes {included}, of a later stage")
    for line in wrong:
        print(line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
