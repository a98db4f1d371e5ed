#!/usr/bin/env python3
"""Which stage of decode/src may include which: fails on an include against the table.

decode/src is cut into stage folders (decode/README.md). Their includes must point one way, so
that each stage can be read, tested and changed knowing only the stages below it; a cycle
(flow/ and parallel/ once included each other) makes two stages one. ALLOWED lists, for each
folder, the other folders its files may include; the table itself must have no cycle. The files
at the top of decode/src (events.h, flat_map.h, work_unit.h, ...) are the value types every stage
shares: they include no stage. pipeline.cpp wires the stages together and may include all of them.

usage: stage_includes.py [DECODE_SRC]   (default: decode/src beside this repository's tests/)
"""
import pathlib
import re
import sys

ALLOWED = {
    "capture": set(),
    "stack": set(),
    "sink": set(),
    "flow": {"capture"},
    "names": {"capture", "sink"},
    "parallel": {"capture", "flow"},  # parallel/ drives flow/'s decoders (decode_units.h)
    "join": {"capture", "flow", "stack"},
    "listing": {"capture", "flow", "sink"},  # writes its file as sinks do (output_file.h)
}
WIRING = {"pipeline.cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def table_cycle():
    """A cycle in ALLOWED as a list of folders, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(ALLOWED.get(node, ())):
            if state.get(nxt) == "open":
                return path + [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(ALLOWED):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parents[2] / "decode" / "src")
    if not root.is_dir():
        print(f"FAIL: {root} is not a directory")
        return 1
    cycle = table_cycle()
    if cycle:
        print("FAIL: the table itself has a cycle: " + " -> ".join(cycle))
        return 1
    folders = {p.name for p in root.iterdir() if p.is_dir()}
    errors = []
    for unknown in sorted(folders - ALLOWED.keys()):
        errors.append(f"{unknown}/: a stage folder the table does not know; add it to ALLOWED")
    checked = 0
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        rel = path.relative_to(root)
        stage = rel.parts[0] if len(rel.parts) > 1 else None
        for target in INCLUDE.findall(path.read_text()):
            checked += 1
            if ".." in target.split("/"):
                errors.append(f"{rel}: includes \"{target}\": name the stage folder instead")
                continue
            to = target.split("/")[0] if "/" in target else None
            if to not in folders or to == stage:
                continue  # same stage, a top-level type, or another library's header
            if stage is None:
                if rel.name not in WIRING:
                    errors.append(f"{rel}: a shared type at the top of decode/src includes "
                                  f"\"{target}\"; only {', '.join(sorted(WIRING))} includes stages")
            elif to not in ALLOWED.get(stage, set()):
                errors.append(f"{rel}: {stage}/ includes \"{target}\", but {stage}/ may include "
                              f"only {sorted(ALLOWED.get(stage, set())) or 'no other stage'}; "
                              f"move the shared type down (as work_unit.h) or change the table "
                              f"and decode/README.md together")
    if checked == 0:
        print(f"FAIL: no includes found under {root}")
        return 1
    for error in errors:
        print("FAIL: " + error)
    if not errors:
        print(f"PASS: {checked} includes in {root}, every one along the table")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
