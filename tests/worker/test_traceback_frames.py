"""The worker's traceback text shows each frame's line once, whatever CPython 3.11 release runs it."""

from __future__ import annotations

import sys
import types

from corral.worker.runtime import _drop_repeated_frames


def entries(error: BaseException) -> list[tuple[str, int]]:
    found, entry = [], error.__traceback__
    while entry is not None:
        found.append((entry.tb_frame.f_code.co_name, entry.tb_lineno))
        entry = entry.tb_next
    return found


def test_an_entry_for_the_frame_and_line_before_it_is_dropped_in_every_chained_exception():
    # A `raise` in a handler of the same frame adds such an entry on CPython 3.11.2, not on 3.11.7.
    outer = sys._getframe()

    def chain(*items: tuple[types.FrameType, int]) -> types.TracebackType | None:
        head = None
        for frame, line in reversed(items):
            head = types.TracebackType(head, frame, 0, line)
        return head

    cause = ValueError('cause').with_traceback(chain((outer, 5), (outer, 5), (outer, 5)))
    error = OverflowError('stop').with_traceback(chain((outer, 5), (outer, 5), (outer, 9), (outer, 9)))
    error.__cause__ = cause
    _drop_repeated_frames(error)
    name = outer.f_code.co_name
    assert entries(error) == [(name, 5), (name, 9)]  # the same frame at another line stays
    assert entries(cause) == [(name, 5)]
