#!/usr/bin/env python3
"""Self-test of slice_tree.py: the matcher accepts the right tree and rejects each kind of
wrong one (a name, the order, a count, a missing or extra slice, the inlined flag, threads)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slice_tree  # noqa: E402

TRACE = '''thread 7/7 "p" "p"
  [0 +50] __libc_start_call_main (inferred)  a.c:1
    [0 +40] main (inferred)  p.c:3
      [2 +9] top  p.c:4
        [3 +2] leaf  p.c:5
        [6 +2] leaf  p.c:5
        [8 +2] helper (inlined)  p.c:6
      [12 +3] printf@plt
      [15 +9] _IO_printf  printf.c:28
        [16 +1] [syscall]
      [20] ! [gap] decode error: x
thread 7/8 "p" "p"
  [30 +5] worker  p.c:9
'''

CASES = [
    ('main\n  top\n    leaf ×2\n    helper [inlined]\n  printf@plt\n  printf|_IO_printf …\n', True),
    ('main\n  top …\n  …\n', True),
    ('main\n  …\n  printf|_IO_printf\n    [syscall]\n', True),
    ('main …\nworker\n', True),
    ('main\n  top\n    leaf ×3\n    helper [inlined]\n  …\n', False),     # count
    ('main\n  top\n    leaf ×2\n    helper\n  …\n', False),               # inlined flag
    ('main\n  top\n    helper [inlined]\n    leaf ×2\n  …\n', False),     # order
    ('main\n  top …\n  printf@plt\n', False),                             # missing sibling
    ('main\n  top …\n  printf@plt\n  _IO_printf\n', False),              # unchecked child
    ('main\n  top …\n  _IO_printf …\n', False),                           # extra sibling
    ('main …\ntop …\n', False),                                           # same thread
    ('main\n  top ⤓2\n  …\n', False),                                     # top has 3 children
]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        trace = os.path.join(work, 't.txt')
        with open(trace, 'w', encoding='utf-8') as f:
            f.write(TRACE)
        for number, (golden_text, should_match) in enumerate(CASES):
            golden = os.path.join(work, f'g{number}.tree')
            with open(golden, 'w', encoding='utf-8') as f:
                f.write(golden_text)
            problems = slice_tree.match_trace(golden, trace)
            if (not problems) != should_match:
                failures += 1
                print(f'case {number}: expected {"match" if should_match else "mismatch"}, '
                      f'got {problems or "match"}:\n{golden_text}')
        _, instants = slice_tree.parse_text(trace)
        if instants != [(7, 20, '[gap] decode error: x')]:
            failures += 1
            print(f'instants parsed as {instants}')
    print(f'{len(CASES) - failures}/{len(CASES)} cases ok')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
