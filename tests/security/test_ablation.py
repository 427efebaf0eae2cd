"""The ablation (`ablation.py`) counts each way an attack ends, with the packages loaded too."""

from __future__ import annotations

import collections

import pytest

from . import ablation
from .package_payloads import PAYLOADS
from .test_package_attacks import ATTACKS as REFUSALS

pytestmark = pytest.mark.asyncio(loop_scope='module')

#: One attack of each ending with every layer off: the way closed in numpy's class (refused),
#: pandas' eval of a string (reached), a file written (escaped) and a host file read (leaked).
_EACH_ENDING = [
    (REFUSALS['ctypes'][0], False),
    (REFUSALS['pd_eval'][0], False),
    *((payload.code, payload.host) for payload in PAYLOADS if payload.id in ('savetxt-marker', 'fromfile-secret')),
]


async def test_the_package_attacks_are_the_refusals_and_the_payloads():
    attacks = ablation.package_attacks()
    assert len(attacks) == len(REFUSALS) + len(PAYLOADS) == 80
    assert not any('/tmp/x' in code for code, _ in attacks)
    assert attacks[list(REFUSALS).index('tofile')] == ("import numpy as np\nnp.arange(3).tofile('MARKER')", False)


async def test_each_ending_is_counted_with_every_layer_off():
    counts = await ablation.measure(ablation.CONFIGURATIONS['no layer'], _EACH_ENDING, ('numpy', 'pandas'))
    assert counts == collections.Counter({'refused': 1, 'reached': 1, 'escaped': 1, 'leaked': 1})


async def test_every_layer_refuses_them_all():
    counts = await ablation.measure(ablation.CONFIGURATIONS['all layers'], _EACH_ENDING, ('numpy', 'pandas'))
    assert counts == collections.Counter({'refused': 4})
