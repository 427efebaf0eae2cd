"""The value codec on its own: what `measure` counts, what the decoder counts, and `bounded_repr`.

The end-to-end cases are in `test_large_values.py`.
"""

from __future__ import annotations

import pathlib
import sys

import msgpack
import pytest
from hypothesis import given, settings
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


# ----- the decoder's uncounted path: frames whose length alone keeps them within the limits --------


_ANY_SCALAR = (
    _SCALARS
    | st.integers(min_value=2**64, max_value=2**200)
    | st.decimals(allow_nan=False)
    | st.datetimes()
    | st.dates()
    | st.timedeltas()
    | st.complex_numbers(allow_nan=False)
    | st.just(...)
    | st.builds(pathlib.PurePosixPath, st.text('ab/', max_size=8))
    | st.uuids()
)
_ANY = st.recursive(
    _ANY_SCALAR,
    lambda inner: st.lists(inner, max_size=6)
    | st.tuples(inner, inner)
    | st.frozensets(st.integers(), max_size=4)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4),
    max_leaves=30,
)


def _outcome(decode, data):
    try:
        return 'ok', repr(decode(data))  # a repr: NaN is not equal to itself
    except Exception as error:
        return type(error).__name__, str(error)


def _counted(data):
    decoder = Decoder(items=10**9, size=10**12)
    decoder.walked(data)
    return decoder._items, decoder._size


@settings(deadline=None)  # under load, a first example may take long
@given(_ANY, st.integers(0, 2000), st.integers(0, 200_000))
def test_the_uncounted_path_decodes_as_the_counted_one(value, items, size):
    """Whatever the limits, `decode` gives what counting every container (`walked`) gives: the
    same value, or the same error."""
    data = pack([4, value, None], side='host')
    counted = _outcome(Decoder(items=items, size=size).walked, data)
    assert _outcome(Decoder(items=items, size=size).decode, data) == counted
    assert _outcome(lambda frame: unpack(frame, items=items, size=size), data) == counted
    assert _outcome(Decoder().decode, data) == _outcome(unpack, data) == _outcome(Decoder().walked, data)


@settings(deadline=None)
@given(st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=40))
def test_a_frame_without_markers_decodes_to_at_most_per_byte_bytes(value):
    data = pack(value, side='host')
    counted_items, counted_size = _counted(data)
    assert counted_items <= len(data)
    assert counted_size <= values._PER_BYTE * len(data)


def test_the_densest_frame_is_within_per_byte():
    """A chain of one-entry maps keyed by empty strs: two bytes a dict and a str."""
    chain: dict = {}
    for _ in range(50):
        chain = {'': chain}
    data = pack(chain, side='host')
    assert len(data) == 101
    assert _counted(data) == (50, 50 * (sys.getsizeof({'': 0}) + sys.getsizeof('')) + sys.getsizeof({}))
    assert _counted(data)[1] <= values._PER_BYTE * len(data)


def test_limits_at_the_frames_length_take_the_uncounted_path_and_past_it_the_counted_one():
    data = pack([1, 'x' * 40, [2.5, None]], side='host')
    at = len(data) * values._PER_BYTE
    assert Decoder(items=len(data), size=at).decode(data) == [1, 'x' * 40, [2.5, None]]
    items, size = _counted(data)
    assert Decoder(items=items, size=size).decode(data) == [1, 'x' * 40, [2.5, None]]  # counted: within
    with pytest.raises(ValueLimitError) as info:
        Decoder(items=items - 1, size=None).decode(data)
    assert str(info.value) == f'a message has more than {items - 1:,} items'
    with pytest.raises(ValueLimitError) as info:
        Decoder(items=None, size=size - 1).decode(data)
    assert str(info.value) == f'a message takes more than {size - 1:,} bytes decoded'


@pytest.mark.parametrize(
    ('data', 'expected'),
    [
        (b'\x92\xc8\x00\x00\x01\x05', ('ok', '(5,)')),  # a tuple's marker as an ext 16 of no data
        (b'\x92\xc9\x00\x00\x00\x00\x02\x05', ('ok', '{5}')),  # a set's as an ext 32
        (b'\x91\xd4\x02x', ('ValueError', 'a tuple or set marker with data in a frame')),
        (b'\x81\x01\xc8\x00\x00\x01', ('ValueError', 'a tuple or set marker out of place in a frame')),
        (b'\x93\x01\xdf\xff\xff\xff\xff', ('ValueError', _outcome(Decoder().walked, b'\x93\x01\xdf\xff\xff\xff\xff')[1])),
        (b'\x91\xd4\x29x', ('ValueError', 'malformed host callable in a frame')),
    ],
    ids=['ext16-tuple-marker', 'ext32-set-marker', 'marker-with-data', 'marker-out-of-place', 'map-longer-than-frame', 'callable'],
)
def test_frames_the_uncounted_path_cannot_take_decode_as_counted(data, expected):
    assert _outcome(Decoder(items=100, size=100_000).decode, data) == expected
    assert _outcome(unpack, data) == expected
    assert _outcome(Decoder(items=100, size=100_000).walked, data) == expected


def test_a_dict_of_colliding_keys_is_refused_on_either_path():
    many = b'\xde\x00\x21' + b'\x00\x00' * 33  # 33 entries of key 0: the shortest frame that can collide
    assert len(many) >= values._NO_COLLISIONS
    assert _outcome(Decoder(items=10**6, size=10**9).decode, many) == ('ValueError', 'more than 32 items of a dict of the message share one hash')
    assert _outcome(Decoder().decode, many) == _outcome(Decoder().walked, many)


@given(_SMALL, st.integers(0, 80), st.integers(0, 3000))
def test_fits_never_lets_through_what_measure_refuses(value, items, size):
    """What `fits` lets through (the worker's call arguments and the host's results skip
    `measure` then), `measure` lets through too."""
    if values.fits(value, items, size):
        measure(value, items=items, size=size, subject='v', crossing='go')


def test_fits_at_the_limits_and_past_them():
    value = [[5, 'ab'], {'k': 2.5}]
    walk = values._Walk(None, None, 'v', 'go', values.sandbox_default)
    count, below, _ = walk.container(value, value, 1, sys.getsizeof(value))
    total = sys.getsizeof(value) + below
    assert (count, values._quick(value, 0)) == (5, (5, total))
    assert values.fits(value, 5, total)
    assert not values.fits(value, 4, total) and not values.fits(value, 5, total - 1)
    with pytest.raises(ValueLimitError) as info:
        measure(value, items=4, size=None, subject='the call to f()', crossing='leave the sandbox')
    assert str(info.value) == 'the call to f() has at least 5 items; at most 4 may leave the sandbox (the value_items limit)'
    with pytest.raises(ValueLimitError) as info:
        measure(value, items=None, size=total - 1, subject='the result', crossing='leave the sandbox')
    assert str(info.value) == f'the result takes at least {total:,} bytes; at most {total - 1:,} may leave the sandbox (the value_size limit)'
    assert not values.fits([values.HostFunction(len)], None, None)  # converted first: the walk's


# ----- a host call's flat arguments, packed before they are measured --------------------------------

_FLAT = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=False), st.integers(-(2**63), 2**64 - 1),
    st.text(max_size=40), st.binary(max_size=40), st.sampled_from(['', '\U0001f600', 'ā', b'']),
)


def _call_message(args: tuple, kwargs: dict) -> bytes:
    return pack([3, 0, 'f', list(args), kwargs], side='sandbox')  # a CALL as the worker sends it


@given(st.lists(_FLAT, max_size=64), st.dictionaries(st.text(min_size=1, max_size=3), _FLAT, max_size=8))
def test_a_flat_call_packed_within_packed_bound_is_within_the_limits(args, kwargs):
    """The proof the worker skips `measure` on: limits whose `packed_bound` is the packed call's
    length let its arguments through `measure` whatever they are."""
    args = tuple(args)[: 64 - len(kwargs)]
    assert values.flat(args, kwargs)
    length = len(_call_message(args, kwargs))
    assert values.packed_bound(length, length * values._PER_BYTE) == length
    measure([list(args), kwargs], items=length, size=length * values._PER_BYTE, subject='v', crossing='go')


@pytest.mark.parametrize('value', [None, True, 0, -1, '', b'', '\U0001f600'])
def test_the_densest_flat_calls_are_within_packed_bound(value):
    for count in (1, 63):
        args = (value,) * count
        length = len(_call_message(args, {}))
        measure([list(args), {}], items=length, size=length * values._PER_BYTE, subject='v', crossing='go')
    kwargs = {chr(97 + i): value for i in range(26)}
    length = len(_call_message((), kwargs))
    measure([[], kwargs], items=length, size=length * values._PER_BYTE, subject='v', crossing='go')


def test_flat_at_its_edges():
    assert values.flat((None, True, 2.5, 'x' * 4096, b'y' * 4096, 2**64 - 1, -(2**63)), {'k': 1})
    assert values.flat((0,) * 63, {'k': 0}) and not values.flat((0,) * 64, {'k': 0})
    assert not values.flat(('x' * 4097,), {}) and not values.flat((), {'k': b'y' * 4097})
    assert not values.flat((2**64,), {}) and not values.flat((-(2**63) - 1,), {})
    assert not values.flat(((),), {}) and not values.flat(([],), {}) and not values.flat((), {'k': {}})
    assert not values.flat((values.HostFunction(len),), {}) and not values.flat((pathlib.PurePosixPath('/'),), {})


def test_packed_bound():
    assert values.packed_bound(None, None) is None
    assert values.packed_bound(1000, None) == 1000
    assert values.packed_bound(None, 2560) == 10 and values.packed_bound(None, 2559) == 9
    assert values.packed_bound(5, 2560) == 5 and values.packed_bound(100, 511) == 1


#: Pieces of msgpack a sender may craft: every scalar encoding's edges (float32 and float64 NaN and
#: -0.0, uint64 and int64 extremes), a str of bad UTF-8, the never-used byte, and each extension
#: of corral's at other lengths than the packer's (fixext against ext 8/16/32, markers with and
#: without data, a callable's, a named builtin's, a host module's, a path's, a UUID's, a Decimal's).
_CRAFTED = [
    b'\xc0', b'\xc2', b'\xc3', b'\x00', b'\x7f', b'\xe0', b'\xa0', b'\xa1a', b'\xca\x7f\xc0\x00\x00', b'\xcb' + b'\xff' * 8,
    b'\xcb\x80' + b'\x00' * 7, b'\xcf' + b'\xff' * 8, b'\xd3\x80' + b'\x00' * 7, b'\xc4\x00', b'\xd9\x00', b'\x90', b'\x80',
    b'\xa3\xed\xa0\x80', b'\xc1', b'\xdb\xff\xff\xff\xff', b'\xc6\x7f\xff\xff\xff',
    b'\xd4\x04\x31', b'\xd5\x04\x31\x30', b'\xc7\x01\x04\x31', b'\xc8\x00\x00\x01', b'\xc9\x00\x00\x00\x00\x01', b'\xc7\x00\x01',
    b'\xd4\x01\x00', b'\xc7\x00\x02', b'\xc7\x00\x0f', b'\xc7\x00\x11', b'\xc7\x00\x2c', b'\xc8\x00\x00\x2c', b'\xd4\x28\x00',
    b'\xc7\x00\x29', b'\xd4\x2b\x00', b'\xc7\x10\x0b' + b'\x00' * 16, b'\xd8\x0b' + b'\x00' * 16, b'\xc7\x03\x0a1E9',
    b'\xd6\x0a1e99', b'\xc7\x02\x2a/a', b'\xd4\x2a\xff', b'\xd4\x0e\x00', b'\xc7\x00\x0e', b'\xd8\x0d' + b'\x00' * 16,
]


def _crafted_frame(rng, depth=0):
    """A frame of `_CRAFTED` pieces in arrays and maps (of repeated keys too)."""
    if depth > 5 or rng.random() < 0.5:
        return rng.choice(_CRAFTED)
    count = rng.randrange(7)
    kind = rng.choice(['fixarray', 'array16', 'fixmap', 'map16'])
    header = {'fixarray': bytes([0x90 + count]), 'array16': b'\xdc\x00' + bytes([count]), 'fixmap': bytes([0x80 + count]), 'map16': b'\xde\x00' + bytes([count])}[kind]
    return header + b''.join(_crafted_frame(rng, depth + 1) for _ in range(count * (2 if 'map' in kind else 1)))


def test_crafted_frames_decode_as_counted_on_the_uncounted_path():
    """Frames a sender crafted byte by byte (3,000 of them, whole and cut short): the uncounted
    path gives what counting gives (the same value or error), whatever the limits."""
    import random

    rng = random.Random(20)
    for _ in range(3000):
        data = _crafted_frame(rng)
        frame = data[: len(data) - rng.randrange(min(len(data), 8) + 1)] if rng.random() < 0.3 else data
        for per_byte in (None, 1, values._PER_BYTE, 10**9):
            limits = {} if per_byte is None else {'items': len(frame), 'size': per_byte * len(frame)}
            counted = _outcome(Decoder(**limits).walked, frame)
            assert _outcome(Decoder(**limits).decode, frame) == counted, frame
            assert _outcome(lambda frame: unpack(frame, **limits), frame) == counted, frame


def _built(value) -> int:
    """Bytes of the objects `value` is made of, as they are (not as counted)."""
    size = sys.getsizeof(value)
    if type(value) is list:
        size += sum(map(_built, value))
    elif type(value) is dict:
        size += sum(_built(key) + _built(item) for key, item in value.items())
    return size


def _nested(level: bytes, times: int) -> bytes:
    return level * times + b'\xc0'


@pytest.mark.parametrize(
    'data',
    [
        _nested(b'\x81\xa0', 60),  # one-entry maps keyed by empty strs
        _nested(b'\x81\xc0', 200),  # keyed by None
        _nested(b'\x82\xc0\xc0\xc0', 60),  # two entries of one key
        _nested(b'\x8f' + b'\xc0\xc0' * 14 + b'\xc0', 30),  # fifteen of one key: a dict made for 15 holding 1
        _nested(b'\x91', 60),
        b'\x9f' + b'\x90' * 15,  # fifteen empty lists
        b'\x9f' + b'\x80' * 15,
        b'\x9f' + b'\xa0' * 15,
        b'\xdc\x00\x40' + b'\x80' * 64,
        b'\x8f' + b''.join(bytes([i]) + b'\x80' for i in range(15)),
    ],
    ids=['maps-by-empty-str', 'maps-by-none', 'maps-of-a-repeated-key', 'maps-of-15-repeated-keys', 'lists', 'empty-lists', 'empty-maps', 'empty-strs', 'array16-of-maps', 'map-of-maps'],
)
def test_what_the_uncounted_path_builds_is_within_per_byte(data):
    """The objects an uncounted frame builds, measured as they are in memory (msgpack makes its
    dicts itself there), take at most `_PER_BYTE` bytes a byte of the frame."""
    value = Decoder(items=len(data), size=len(data) * values._PER_BYTE).decode(data)
    assert _outcome(Decoder(items=len(data), size=len(data) * values._PER_BYTE).walked, data) == ('ok', repr(value))
    assert _built(value) <= values._PER_BYTE * len(data)
