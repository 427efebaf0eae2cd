"""The packages' ways out carried to an effect (`package_payloads.py`), each refused with its exact text, with no effect."""

from __future__ import annotations

import pytest

import corral

from .helpers import last_line, marker_path, refusal
from .package_payloads import PAYLOADS, SECRET_TEXT
from .test_package_attacks import pool  # noqa: F401  (the pool with the packages; skips this module without them)

pytestmark = pytest.mark.asyncio(loop_scope='module')


async def test_the_payloads_are_named_once():
    assert len({payload.id for payload in PAYLOADS}) == len(PAYLOADS) == 15


@pytest.mark.parametrize('payload', [pytest.param(p, id=p.id) for p in PAYLOADS])
async def test_payload_is_refused(pool, tmp_path, payload):
    marker = marker_path(tmp_path)
    secret = tmp_path / 'secret'
    secret.write_text(SECRET_TEXT + '\n')

    def placed(text: str) -> str:
        return text.replace('MARKER', str(marker)).replace('SECRET', str(secret))

    error = await refusal(pool, placed(payload.code))
    assert last_line(error) == placed(payload.expected)
    assert type(error) is corral.SandboxRuntimeError
    assert sorted(path.name for path in tmp_path.iterdir()) == ['secret']


async def test_pandas_to_pickle_is_refused(pool, tmp_path):
    """pandas' module-level `to_pickle` (in `pd.__all__`), beside the methods closed on its classes."""
    error = await refusal(pool, f"import pandas as pd\npd.to_pickle(pd.DataFrame({{'a': [1]}}), {str(tmp_path / 'frame.pkl')!r})")
    assert last_line(error) == (
        "AttributeError: module 'pandas' has no attribute 'to_pickle' in the sandbox: pickle runs code as it loads; keep "
        'data as CSV or JSON: to_csv or to_json. dir(pandas) lists the 83 names pandas offers'
    )
    assert list(tmp_path.iterdir()) == []
