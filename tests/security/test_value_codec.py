"""The value codec on its own: what `measure` counts, what the decoder counts, and `bounded_repr`.

The end-to-end cases are in `test_large_values.py`.
"""

from __future__ import annotations

import sys

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.integrations._common import json_form, value_repr
from corral import values
from corral.values import REPR_LIMIT, Decoder, ValueLimitError, bounded_repr, measure, pack, unpack


def test_measure_counts_each_reference_as_its_copy():
    shared = [0] * 10
    with pytest.raises(ValueLimitError) as info:
        measure([shared] * 10, items=109, size=None, subject='v', crossing='go')
    assert str(info.value) == 'v has at least 110 items; at most 109 may go (the value_items limit)'
    measure([shared] * 10, items=110, size=None, subject='v', crossing='go')


def test_the_decoder_counts_what_measure_counts():
    value = [{'a': (1, 2.5, 'x' * 50)}, {3, 4}, frozenset({b'y'}), [None, True]] * 5
    decoder = Decoder(items=10**6, size=10**9)
    assert decoder.decode(pack(value, side='sandbox')) == value
    measure(value, items=decoder._items, size=None, subject='v', crossing='go')
    with pytest.raises(ValueLimitError):
        measure(value, items=decoder._items - 1, size=None, subject='v', crossing='go')


# ----- reprs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    'value',
    [1, 'a\n', b'\x00', 2.5, None, (1,), (), set(), frozenset(), {1: {2: [3]}}, {frozenset({1})}, [(1, 'a'), {'k': b''}]],
)
def test_bounded_repr_is_repr_when_it_fits(value):
    assert bounded_repr(value) == repr(value)


def test_bounded_repr_is_bounded_and_never_raises():
    assert bounded_repr('x' * 10**7, limit=10) == "'xxxxxxxxx... (cut at 10 characters)"
    assert bounded_repr(list(range(10**6)), limit=20) == '[0, 1, 2, 3, 4, 5, 6... (cut at 20 characters)'
    assert bounded_repr(10**5000) == '<int of 16610 bits>'
    assert bounded_repr([10**5000, -(10**5000)]) == '[<int of 16610 bits>, <int of 16610 bits>]'
    x = []
    x.append(x)
    assert bounded_repr(x) == '[[...]]'
    deep = []
    for _ in range(10_000):
        deep = [deep]
    assert bounded_repr(deep) == '[' * 100 + '[...]' + ']' * 100

    class Broken:
        def __repr__(self):
            raise RuntimeError('no')

    assert bounded_repr([Broken()]) == '[<Broken>]'
    assert len(bounded_repr([[]] * 10**6)) == REPR_LIMIT + len('... (cut at 100,000 characters)')


def test_code_tool_and_code_mode_texts_are_bounded():
    assert value_repr(list(range(10**5))).endswith('... (cut at 100,000 characters)')
    assert json_form(list(range(10**5))).endswith('... (cut at 100,000 characters)')
    assert json_form([1, (2, 3), {'a': 10**5000}]) == [1, [2, 3], {'a': '<int of 16610 bits>'}]
    deep = []
    for _ in range(sys.getrecursionlimit() * 2):
        deep = [deep]
    assert json_form(deep) == json_form(deep)  # no RecursionError
    assert str(json_form(deep)).count('[') == 100 + 100 + 1


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.binary(max_size=20)
_SMALL = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=40,
)


@given(_SMALL)
def test_the_quick_count_of_a_small_value_is_the_full_walks(value):
    """`measure` lets small plain values through on a quick count: it must be the full walk's count."""
    quick = values._quick(value, 0)
    walk = values._Walk(None, None, 'the value', 'cross', values.sandbox_default)
    own = sys.getsizeof(value)
    if type(value) in values._CONTAINER_TYPES:
        count, total, _ = walk.container(value, value, 1, own)
        expected = (count, own + total)
    else:
        expected = (0, own)
    assert quick is None or quick == expected


def test_a_small_value_past_a_limit_gets_the_full_walks_error():
    with pytest.raises(ValueLimitError) as raised:
        measure([1, 2, 3], items=2, size=None, subject='the result', crossing='leave the sandbox')
    assert str(raised.value) == 'the result has at least 3 items; at most 2 may leave the sandbox (the value_items limit)'


@pytest.mark.parametrize(
    ('code', 'data', 'message'),
    [(13, b'\x00' * 15, 'malformed complex in a frame'), (14, b'x', 'an Ellipsis with data in a frame')],
    ids=['short-complex', 'ellipsis-with-data'],
)
def test_malformed_complex_and_ellipsis_are_refused(code, data, message):
    with pytest.raises(ValueError) as info:
        unpack(msgpack.packb(msgpack.ExtType(code, data)))
    assert str(info.value) == message


def test_complex_and_ellipsis_round_trip():
    value = [complex(-0.0, float('inf')), ..., (1j,)]
    assert unpack(pack(value, side='host')) == value
