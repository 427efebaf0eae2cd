"""A script's objects through `RemotePool` and a real `corral serve`: the same descriptions as a local session's."""

from __future__ import annotations

import collections

import pytest

import corral
from corral import ExceptionValue, InstanceValue, RemotePool

Point = collections.namedtuple('Point', 'x y')

CODE = '''
import dataclasses
@dataclasses.dataclass
class Order:
    id: int
p = echo(given())
[p, p.y, ValueError('bad'), Order(7)]
'''


@pytest.mark.slow
async def test_descriptions_cross_as_they_do_locally(server):
    seen = []
    tools = {'given': lambda: Point(1, 2), 'echo': lambda v: seen.append(v) or v}
    async with RemotePool(server.url) as pool, pool.checkout() as session:
        result = await session.feed_run(CODE, external_lookup=tools)
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('class C:\n    pass\necho(C())', external_lookup=tools)
    assert result == [(1, 2), 2, ExceptionValue('ValueError', 'builtins', ('bad',), 'ValueError'), InstanceValue('Order', '__main__', {'id': 7}, True)]
    assert repr(result[0]) == repr(seen[0]) == 'Point(x=1, y=2)'
    assert info.value.display().splitlines()[-1] == (
        "TypeError: echo() returned a value of type 'InstanceValue' that cannot enter the sandbox: the value echo() returned holds an "
        "InstanceValue (the script's C), which cannot go back into the sandbox: its class is the script's code; send its attrs"
    )


@pytest.mark.slow
async def test_paths_and_open_files_cross_as_they_do_locally(server, tmp_path):
    import pathlib

    async with RemotePool(server.url) as pool, pool.checkout(mounts=corral.Mount(tmp_path, '/data')) as session:
        assert await session.feed_run("open('/data/f.txt', 'w')") == corral.FileValue('/data/f.txt', 'w', 0)

    given = lambda: pathlib.PosixPath('/srv/a')  # noqa: E731
    async with RemotePool(server.url) as pool, pool.checkout() as session:
        result = await session.feed_run("p = given()\n(p, type(p).__name__, p / 'b')", external_lookup={'given': given})
        with pytest.raises(corral.SandboxRuntimeError) as info:
            await session.feed_run('echo(open("/x.txt", "w"))', external_lookup={'echo': lambda v: v})
    assert result == (pathlib.PurePosixPath('/srv/a'), 'PosixPath', pathlib.PurePosixPath('/srv/a/b'))
    # without a mount the open itself is refused: a path grants nothing
    assert info.value.display().splitlines()[-1].startswith('PermissionError: [Errno 13] Permission denied')


@pytest.mark.slow
async def test_a_module_crosses_as_it_does_locally(server):
    tools = corral.ExternalModule({'add': lambda a, b: a + b}, values={'VERSION': 3, 'tags': ('a',)})
    async with RemotePool(server.url) as pool, pool.checkout(external_modules={'tools': tools}) as session:
        module = corral.ModuleValue('tools', {'add': 'tools.add', 'VERSION': 3, 'tags': ('a',)})
        assert await session.feed_run('import tools\n[tools, tools.add(1, 2), tools.VERSION]') == [module, 3, 3]
