"""`corral serve --packages`: a session stored through a server with numpy is refused, by name,
through a server sharing its store without numpy, and goes on through one with it."""

from __future__ import annotations

import pytest

import corral
from corral import RemotePool

from .conftest import running_server


async def test_a_session_stored_with_numpy_is_refused_by_a_server_without_it(tmp_path):
    pytest.importorskip('numpy')
    key = tmp_path / 'state.key'
    key.write_bytes(b'k' * 32)
    store = f'sqlite:///{tmp_path}/shared.db'
    options = ('--state-key-file', str(key))
    with running_server(tmp_path, *options, '--packages', 'numpy', store=store) as numeric, running_server(tmp_path, *options, store=store) as plain:
        async with RemotePool(numeric.url) as pool, pool.checkout(ephemeral=False) as session:
            await session.feed_run('import numpy as np\na = np.arange(3)')
            session_id = session.session_id
        async with RemotePool(plain.url) as pool:
            with pytest.raises(corral.SandboxStateError) as caught:
                async with pool.checkout(session_id=session_id):
                    pass
        assert str(caught.value) == (
            'the session state was made in a pool that loads numpy, and this pool does not load numpy: '
            "check the session out from a pool made with packages=['numpy']"
        )
        async with RemotePool(numeric.url) as pool, pool.checkout(session_id=session_id) as session:
            assert await session.feed_run('a.tolist()') == [0, 1, 2]
