"""A stored or dumped session carries the packages its pool loaded: a pool that lacks one refuses
it by name, a pool with more loads it, the list is signed with the rest, and a state written
before states carried it loads as one of a pool without packages."""

import hashlib
import hmac
import struct

import msgpack
import pytest
import pytest_asyncio

import corral
from corral.host.journal import FORMAT_VERSION

pytest.importorskip('numpy')

KEY = b'test-state-key-0123456789abcdef!'


def refused(made: str, missing: str, packages: list[str]) -> str:
    return (
        f'the session state was made in a pool that loads {made}, and this pool does not load {missing}: '
        f'check the session out from a pool made with packages={packages!r}'
    )


def body(state: bytes) -> dict:
    return msgpack.unpackb(state[14:-32])


def sealed(plain: dict, *, key: bytes = KEY, mac: bytes | None = None) -> bytes:
    """The envelope of `plain`, signed with `key` (or ending with `mac`, an old signature)."""
    packed = msgpack.packb(plain, use_bin_type=True)
    head = struct.pack('>8sHI', b'CORRAL\x00S', FORMAT_VERSION, len(packed))
    return head + packed + (mac if mac is not None else hmac.new(key, head + packed, hashlib.sha256).digest())


async def load(pool: corral.Pool, state: bytes, code: str) -> object:
    async with pool.checkout() as session:
        await session.load_session(state)
        return await session.feed_run(code)


async def load_error(pool: corral.Pool, state: bytes) -> str:
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxStateError) as caught:
            await session.load_session(state)
        return str(caught.value)


@pytest_asyncio.fixture(scope='module', loop_scope='module')
async def pools():
    """A plain pool, a numpy pool and a pandas pool (numpy and pandas), one state key."""
    async with (
        corral.Pool(state_key=KEY, warm_workers=0) as plain,
        corral.Pool(state_key=KEY, warm_workers=0, packages=['numpy']) as numeric,
        corral.Pool(state_key=KEY, warm_workers=0, packages=['pandas']) as tables,
    ):
        yield plain, numeric, tables


pytestmark = pytest.mark.asyncio(loop_scope='module')


async def test_a_dumped_state_names_its_packages_and_a_pool_without_them_refuses_it(pools):
    plain, numeric, tables = pools
    async with numeric.checkout() as session:
        await session.feed_run('import numpy as np\na = np.arange(3)')
        state = await session.dump()
    assert body(state)['packages'] == ['numpy']
    assert await load_error(plain, state) == refused('numpy', 'numpy', ['numpy'])
    assert await load(tables, state, 'a.tolist()') == [0, 1, 2]  # a pool with more packages loads it
    async with tables.checkout() as session:
        await session.load_session(state)
        await session.feed_run('import pandas as pd\nframe = pd.DataFrame({"a": a})')
        grown = await session.dump()
    assert body(grown)['packages'] == ['numpy', 'pandas']  # dumped again: the packages of the pool that has it now
    assert await load_error(numeric, grown) == refused('numpy, pandas', 'pandas', ['numpy', 'pandas'])
    assert await load_error(plain, grown) == refused('numpy, pandas', 'numpy, pandas', ['numpy', 'pandas'])
    async with plain.checkout() as session:
        await session.feed_run('x = 1')
        assert body(await session.dump())['packages'] == []


async def test_the_package_list_is_signed_with_the_state(pools):
    plain, numeric, _ = pools
    async with numeric.checkout() as session:
        await session.feed_run('import numpy as np\na = np.arange(3)')
        state = await session.dump()
    plain_body = body(state)
    plain_body['packages'] = []  # the list cut, the old signature kept
    assert await load_error(plain, sealed(plain_body, mac=state[-32:])) == (
        "the session state was altered, or signed with another key: its signature does not match this pool's state key"
    )
    plain_body['packages'] = 'numpy'  # signed, yet not a list: refused, never replayed
    assert await load_error(numeric, sealed(plain_body)) == 'the session state is malformed (malformed packages)'


async def test_a_state_written_before_states_carried_packages_loads_as_one_of_a_plain_pool(pools):
    plain, numeric, _ = pools
    async with plain.checkout() as session:
        await session.feed_run('x = [1, 2]')
        old = body(await session.dump())
    del old['packages']
    assert await load(plain, sealed(old), 'x') == [1, 2]
    # an old state whose scripts imported a package: a pool without it replays the import, which
    # fails where it ran, and refuses the state as a replay that went another way
    async with numeric.checkout() as session:
        await session.feed_run('import numpy as np')
        old = body(await session.dump())
    del old['packages']
    assert await load_error(plain, sealed(old)) == (
        "the session state could not be replayed: feed 1 went another way than the recorded run: it ended 'failed' where the record has 'done'"
    )


async def test_a_stored_session_carries_its_packages_into_the_store_and_each_record(tmp_path):
    store = f'sqlite:///{tmp_path}/store.db'
    async with (
        corral.Pool(state_key=KEY, warm_workers=0, store=store) as plain,
        corral.Pool(state_key=KEY, warm_workers=0, store=store, packages=['numpy']) as numeric,
    ):
        async with numeric.checkout(ephemeral=False) as session:
            await session.feed_run('import numpy as np\na = np.arange(3)')
            stored = session.session_id
        with pytest.raises(corral.SandboxStateError) as caught:
            async with plain.checkout(session_id=stored):
                pass
        assert str(caught.value) == refused('numpy', 'numpy', ['numpy'])
        async with numeric.checkout(session_id=stored) as session:
            assert await session.feed_run('a.tolist()') == [0, 1, 2]
        # stored by a plain pool, gone on in a numpy pool: the record of that feed names numpy
        async with plain.checkout(ephemeral=False) as session:
            await session.feed_run('x = 1')
            moved = session.session_id
        async with numeric.checkout(session_id=moved) as session:
            await session.feed_run('import numpy as np\ny = np.int64(x) + 1')
        with pytest.raises(corral.SandboxStateError) as caught:
            async with plain.checkout(session_id=moved):
                pass
        assert str(caught.value) == refused('numpy', 'numpy', ['numpy'])
        async with numeric.checkout(session_id=moved) as session:
            assert await session.feed_run('int(y)') == 2
