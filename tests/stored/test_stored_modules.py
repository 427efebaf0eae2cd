"""The external modules of a stored session: the store names those it was offered after its
checkout too (`add_external_module`), in its full state or in the records appended to it, and a
checkout of it (resumed or forked) offers them again through `modules=` before its state is
checked. Run against the SQLite store and a real PostgreSQL server."""

from __future__ import annotations

import msgpack
import pytest

import corral

from .test_bound_states import KEY, Rows

STUBS = 'def add(a: int, b: int) -> int: ...\n'
OTHER_FUNCTIONS = (
    "the session state was made for other host functions: the names and stubs of this pool's external functions "
    'and modules (type_check_stubs, external_modules) differ from those it was dumped with'
)


@pytest.fixture
async def pool(url):
    async with corral.Pool(state_key=KEY, store=url, warm_workers=1) as pool:
        yield pool


def tools(add=lambda a, b: a + b) -> corral.ExternalModule:
    return corral.ExternalModule({'add': add}, stubs=STUBS)


async def stored_with_a_later_module(pool, *codes: str, tenant: str = '') -> str:
    """A stored session offered `tools` after its checkout (as a caller answering imports offers
    it), which then ran `import tools` and `codes`: its id."""
    async with pool.checkout(ephemeral=False, tenant=tenant) as session:
        session.add_external_module('tools', tools())
        await session.feed_run('import tools\nfive = tools.add(2, 3)')
        for code in codes:
            await session.feed_run(code)
        return session.session_id


class Offer:
    """An `OfferModules` that offers `tools` (adding 100, so its calls are told from the first's)."""

    def __init__(self) -> None:
        self.asked: list[dict[str, tuple[str | None, list[str]]]] = []
        self.session: corral.Session | None = None

    async def __call__(self, modules: dict[str, tuple[str | None, list[str]]]) -> None:
        self.asked.append(modules)
        for name, (stubs, _) in modules.items():
            self.session.add_external_module(name, corral.ExternalModule({'add': lambda a, b: a + b + 100}, stubs=stubs))

    def checkout(self, pool, session_id: str, **options) -> corral.Session:
        self.session = pool.checkout(session_id=session_id, modules=self, **options)
        return self.session


async def checkout_error(session: corral.Session) -> str:
    with pytest.raises(corral.SandboxStateError) as info:
        async with session:
            pass
    return str(info.value)


@pytest.mark.parametrize('fork', [False, True])
async def test_a_module_offered_after_the_checkout_is_offered_again_by_the_caller(pool, url, fork):
    session_id = await stored_with_a_later_module(pool, 'six = tools.add(1, 5)')
    state, generation, records = await Rows(url).read('', session_id)
    assert generation == 3 and len(records) == 2  # the module is named in a record, not in the full state
    offer = Offer()
    async with offer.checkout(pool, session_id, fork=fork) as session:
        assert offer.asked == [{'tools': (STUBS, ['add'])}]
        assert await session.feed_run('[five, six, tools.add(2, 3)]') == [5, 6, 105]
        await session.feed_run('seven = tools.add(3, 4)')
        forked = session.session_id
    assert (forked != session_id) is fork
    async with Offer().checkout(pool, forked) as session:  # and the next checkout, again
        assert await session.feed_run('[five, seven, tools.add(0, 0)]') == [5, 107, 100]


async def test_a_checkout_that_gives_the_modules_again_is_taken_and_one_without_them_refused(pool):
    session_id = await stored_with_a_later_module(pool)
    async with pool.checkout(session_id=session_id, external_modules={'tools': tools()}) as session:
        assert await session.feed_run('tools.add(five, 1)') == 6
    assert await checkout_error(pool.checkout(session_id=session_id, fork=True)) == OTHER_FUNCTIONS
    assert await checkout_error(pool.checkout(session_id=session_id, external_modules={'tools': corral.ExternalModule({'sub': abs})})) == OTHER_FUNCTIONS


async def test_the_modules_of_a_compacted_state_are_offered_as_those_of_its_records(pool, url):
    codes = [f'x{i} = "{str(i) * 100_000}"' for i in range(6)]  # each record holds its script: 100 kB
    session_id = await stored_with_a_later_module(pool, *codes)
    state, generation, records = await Rows(url).read('', session_id)
    assert generation == 8 and len(records) < 6  # a full state was written again, naming the module
    assert msgpack.unpackb(state[14:-32])['modules'] == {'tools': [STUBS, ['add']]}
    offer = Offer()
    async with offer.checkout(pool, session_id, fork=True) as session:
        assert offer.asked == [{'tools': (STUBS, ['add'])}]
        assert await session.feed_run('[five, len(x5), tools.add(1, 1)]') == [5, 100_000, 102]


async def test_a_module_offered_again_with_other_functions_is_named_as_it_is_now(pool):
    async with pool.checkout(ephemeral=False) as session:
        session.add_external_module('tools', tools())
        await session.feed_run('import tools')
        session.add_external_module('tools', corral.ExternalModule({'add': abs, 'mul': abs}))  # offered again, other functions
        await session.feed_run('import tools')
        session_id = session.session_id
    assert await checkout_error(pool.checkout(session_id=session_id, external_modules={'tools': tools()})) == OTHER_FUNCTIONS
    async with pool.checkout(session_id=session_id, external_modules={'tools': corral.ExternalModule({'add': abs, 'mul': abs})}) as session:
        assert await session.feed_run('tools.mul(-3)') == 3


async def test_a_records_modules_altered_in_the_store_are_refused(pool, url):
    rows = Rows(url)
    session_id = await stored_with_a_later_module(pool)
    state, generation, records = await rows.read('', session_id)
    number, record = records[-1]
    assert record.count(b'add') >= 1
    await rows.write('', session_id, state, generation, [*records[:-1], (number, record.replace(b'\xa3add', b'\xa3pwn'))])
    offer = Offer()
    assert await checkout_error(offer.checkout(pool, session_id, fork=True)) == (
        "the session state was altered, or signed with another key: its signature does not match this pool's state key"
    )
    assert offer.asked == []  # nothing unsigned reached the caller


async def test_a_record_signed_with_modules_and_no_fingerprint_is_malformed(pool, url):
    from corral.host.journal import Binding, _RECORD_MAGIC, _open_envelope, _pack_body

    rows = Rows(url)
    session_id = await stored_with_a_later_module(pool)
    state, generation, records = await rows.read('', session_id)
    number, record = records[-1]
    body = _open_envelope(record, KEY, quota=1 << 20, magic=_RECORD_MAGIC)
    assert body['binding'] == Binding('', session_id, number).to_plain() and body['modules'] == {'tools': [STUBS, ['add']]}
    body['fingerprint'] = None  # a writer holding the key, naming modules whose fingerprint it does not give
    await rows.write('', session_id, state, generation, [*records[:-1], (number, _pack_body(_RECORD_MAGIC, body, KEY))])
    assert await checkout_error(Offer().checkout(pool, session_id)) == (
        'the session state is malformed (a record names its modules without their fingerprint, or the other way)'
    )


async def test_a_record_written_before_records_named_modules_reads_as_naming_none(pool, url):
    from corral.host.journal import _RECORD_MAGIC, _open_envelope, _pack_body

    rows = Rows(url)
    async with pool.checkout(ephemeral=False, external_modules={'tools': tools()}) as session:
        await session.feed_run('import tools\nfive = tools.add(2, 3)')
        session_id = session.session_id
    state, generation, records = await rows.read('', session_id)
    (number, record), = records
    body = _open_envelope(record, KEY, quota=1 << 20, magic=_RECORD_MAGIC)
    assert (body.pop('modules'), body.pop('fingerprint')) == (None, None)  # nothing changed since the full state
    await rows.write('', session_id, state, generation, [(number, _pack_body(_RECORD_MAGIC, body, KEY))])
    offer = Offer()
    async with offer.checkout(pool, session_id) as session:
        assert offer.asked == [{'tools': (STUBS, ['add'])}]  # the full state's
        assert await session.feed_run('tools.add(five, 1)') == 106


async def test_another_tenants_session_is_not_stored_and_its_modules_are_not_named(pool):
    theirs = await stored_with_a_later_module(pool, tenant='tenant-a')
    offer = Offer()
    assert await checkout_error(offer.checkout(pool, theirs, fork=True, tenant='tenant-b')) == f'no stored session with id {theirs!r}'
    assert offer.asked == []
    with pytest.raises(ValueError) as error:
        pool.checkout(modules=Offer())
    assert str(error.value) == 'modules= offers the modules of a stored session: pass its session_id too'
