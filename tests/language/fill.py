"""Authoring aid: fill the `TODO` expectations of a case file with what CPython gives.

    python -m tests.language.fill tests/language/cases_stdlib.py

Write a new case as `case('id', '''code''', TODO)` (import TODO from .runner), run this, then
read what it wrote: the expectation becomes the exact value (or `raises=`, `output=`) CPython
gives, and the sandbox must then give the same.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
import time


def main(path: str) -> None:
    os.environ['TZ'] = 'UTC'
    time.tzset()
    from .runner import TODO, run_cpython

    module = importlib.import_module('tests.language.' + os.path.basename(path)[:-3])
    source = open(path).read()
    header = source[: source.index('CASES')].count('TODO')
    cases = [c for c in module.CASES if c.expected is TODO]
    parts = re.split(r'\bTODO\b', source)
    if len(parts) - 1 - header != len(cases):
        raise SystemExit(f'found {len(parts) - 1 - header} TODO markers for {len(cases)} cases')
    out = 'TODO'.join(parts[: header + 1])
    for c, rest in zip(cases, parts[header + 1 :]):
        outcome = run_cpython(dataclasses.replace(c, expected=None))
        text = f'raises={outcome.error!r}' if outcome.error is not None else repr(outcome.value)
        if outcome.output:
            text += f', output={outcome.output!r}'
        out += text + rest
    with open(path, 'w') as f:
        f.write(out)
    print(f'filled {len(cases)} cases')


if __name__ == '__main__':
    main(sys.argv[1])
