#!/usr/bin/env python3
"""Parse `pt-decode --format text` output into slice trees and match them against hand-written
golden trees (tests/e2e/slices/golden/*.tree).

Golden syntax (two spaces of indentation per level, '#' starts a comment line):
  name                a slice with exactly the children listed below it (none if none listed)
  name …              a slice whose children are not checked
  …                   any number (zero or more) of arbitrary sibling slices
  name ×N             N consecutive slices, each matching `name` with the children listed below
  name ⤓N             a chain of N slices nested in each other; the children listed below
                      belong to the innermost one
  a|b                 either name (symbol aliases such as printf|_IO_printf)
  name [inlined]      the slice must carry the decoder's (inlined) flag; without [inlined] it
                      must not. (inferred) is ignored: it only says the entry was not seen.
Every golden file has one or more roots; each root is matched against the first slice in the
trace with that name (searching every thread), and two roots may not come from the same thread
(one track per thread).
"""
import re
import sys

SLICE_RE = re.compile(r'^( *)\[(\d+) \+(\d+)\] (.*)$')
INSTANT_RE = re.compile(r'^( *)\[(\d+)\] ! (.*)$')
THREAD_RE = re.compile(r'^thread (\d+)/(\d+) ')  # thread PID/TID
ELLIPSIS = '…'


class Slice:
    def __init__(self, name, flags, start, dur, location, tid):
        self.name, self.flags, self.start, self.dur = name, flags, start, dur
        self.location, self.tid, self.children = location, tid, []

    def __repr__(self):
        return f'{self.name} [{self.start} +{self.dur}]'


def parse_slice_text(text):
    """(name, flags, location) from the part after '] ' of a slice line."""
    flags = set()
    if text.endswith(' (unfinished)'):
        flags.add('unfinished')
        text = text[:-len(' (unfinished)')]
    name, _, location = text.partition('  ')
    for flag in ('inferred', 'inlined'):
        if name.endswith(f' ({flag})'):
            flags.add(flag)
            name = name[:-len(f' ({flag})')]
    return name, flags, location


def parse_text(path):
    """Returns (threads, instants): threads = [(tid, pid, roots)], instants = [(tid, time, text)]."""
    threads, instants, stack, tid = [], [], [], None
    with open(path, encoding='utf-8') as f:
        for raw in f:
            line = raw.rstrip('\n')
            m = THREAD_RE.match(line)
            if m:
                tid = int(m.group(2))  # 'thread PID/TID'
                threads.append((tid, int(m.group(1)), []))
                stack = []
                continue
            m = INSTANT_RE.match(line)
            if m:
                instants.append((tid, int(m.group(2)), m.group(3)))
                continue
            m = SLICE_RE.match(line)
            if not m:
                raise ValueError(f'{path}: cannot parse line: {line!r}')
            depth = len(m.group(1)) // 2 - 1
            name, flags, location = parse_slice_text(m.group(4))
            node = Slice(name, flags, int(m.group(2)), int(m.group(3)), location, tid)
            del stack[depth:]
            (stack[-1].children if stack else threads[-1][2]).append(node)
            stack.append(node)
    return threads, instants


def find_first(nodes, name):
    for node in nodes:
        if node.name == name:
            return node
        found = find_first(node.children, name)
        if found:
            return found
    return None


class Golden:
    def __init__(self, names, inlined, any_children, repeat, chain, children):
        self.names, self.inlined, self.any_children = names, inlined, any_children
        self.repeat, self.chain, self.children = repeat, chain, children


def parse_golden(path):
    """Returns the list of root Golden nodes (an ELLIPSIS sibling is the string '…')."""
    roots, stack = [], []
    with open(path, encoding='utf-8') as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip('\n')
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            indent = len(line) - len(line.lstrip(' '))
            if indent % 2:
                raise ValueError(f'{path}:{number}: odd indentation')
            depth, text = indent // 2, line.strip()
            if text == ELLIPSIS:
                node = ELLIPSIS
            else:
                repeat = chain = 1
                m = re.search(r' ([×⤓])(\d+)$', text)
                if m:
                    if m.group(1) == '×':
                        repeat = int(m.group(2))
                    else:
                        chain = int(m.group(2))
                    text = text[:m.start()]
                any_children = text.endswith(' ' + ELLIPSIS)
                if any_children:
                    text = text[:-2]
                inlined = text.endswith(' [inlined]')
                if inlined:
                    text = text[:-len(' [inlined]')]
                node = Golden(text.split('|'), inlined, any_children, repeat, chain, [])
            if depth > len(stack):
                raise ValueError(f'{path}:{number}: indentation jumps a level')
            del stack[depth:]
            parent = stack[-1] if stack else None
            if parent == ELLIPSIS:
                raise ValueError(f'{path}:{number}: {ELLIPSIS} cannot have children')
            (parent.children if parent else roots).append(node)
            stack.append(node)
    return roots


def match_node(golden, node, chain_left):
    """None when `node` matches `golden` (a chain with chain_left links still to go), else why not."""
    if node.name not in golden.names:
        return f'expected {"|".join(golden.names)}, found {node.name} at {node.start}'
    if golden.inlined != ('inlined' in node.flags):
        want = 'inlined' if golden.inlined else 'not inlined'
        return f'{node.name} at {node.start}: expected {want}'
    if chain_left > 1:
        if len(node.children) != 1:
            return (f'{node.name} at {node.start}: chain link expects 1 child, found '
                    f'{[c.name for c in node.children]}')
        return match_node(golden, node.children[0], chain_left - 1)
    if golden.any_children:
        return None
    return match_siblings(golden.children, node.children, f'under {node.name} at {node.start}')


def expand(goldens):
    out = []
    for g in goldens:
        out.extend([g] * (1 if g == ELLIPSIS else g.repeat))
    return out


def match_siblings(goldens, nodes, where):
    """Matches a golden sibling list (with … wildcards) against actual children, backtracking."""
    pattern = expand(goldens)
    memo = {}

    def go(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(pattern):
            result = None if j == len(nodes) else (
                f'{where}: unexpected {nodes[j].name} at {nodes[j].start}')
        elif pattern[i] == ELLIPSIS:
            result = go(i + 1, j)
            k = j
            while result is not None and k < len(nodes):
                k += 1
                result = go(i + 1, k)
        elif j == len(nodes):
            result = f'{where}: missing {"|".join(pattern[i].names)}'
        else:
            result = match_node(pattern[i], nodes[j], pattern[i].chain) or go(i + 1, j + 1)
        memo[key] = result
        return result

    return go(0, 0)


def match_trace(golden_path, text_path):
    """Returns a list of problems (empty when the trace matches the golden tree)."""
    threads, _ = parse_text(text_path)
    problems, used_tids = [], {}
    for root in parse_golden(golden_path):
        found = None
        for tid, _, roots in threads:
            for name in root.names:
                found = found or find_first(roots, name)
        if found is None:
            problems.append(f'no slice named {"|".join(root.names)} in {text_path}')
            continue
        if found.tid in used_tids:
            problems.append(f'{found.name} and {used_tids[found.tid]} share thread {found.tid}')
        used_tids[found.tid] = found.name
        why = match_node(root, found, root.chain)
        if why:
            problems.append(why)
    return problems


def dump(nodes, depth=0, out=sys.stdout):
    for node in nodes:
        flag = ' [inlined]' if 'inlined' in node.flags else ''
        print(f'{"  " * depth}{node.name}{flag}  [{node.start} +{node.dur}]', file=out)
        dump(node.children, depth + 1, out)


def main(argv):
    if len(argv) == 3 and argv[1] == '--dump':
        for tid, pid, roots in parse_text(argv[2])[0]:
            print(f'thread {tid}/{pid}')
            dump(roots, 1)
        return 0
    if len(argv) != 3:
        print('usage: slice_tree.py GOLDEN.tree TRACE.txt | --dump TRACE.txt', file=sys.stderr)
        return 2
    problems = match_trace(argv[1], argv[2])
    for p in problems:
        print(f'{argv[1]}: {p}', file=sys.stderr)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
