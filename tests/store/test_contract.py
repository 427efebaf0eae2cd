"""The Store contract, run against both stores: SQLite in a temporary file, PostgreSQL on a real server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

import corral

BUSY_1000 = (
    "the stored session 's1' is checked out elsewhere: another holder has its lease, "
    'which expires in 1000 s unless that holder renews it'
)
LOST = (
    "the lease on the stored session 's1' was lost: it expired and another holder took it over, "
    'or it was released'
)


CONFLICT = (
    "the stored session 's1' was written by another holder since this one loaded it "
    '(the store is at generation {stored}; this write follows generation {follows}): '
    'nothing was written; check the session out again'
)


async def test_put_get_round_trip(store):
    await store.put('s1', b'first', holder='h1', generation=1)
    assert await store.get('s1') == corral.StoredState(b'first', [], 1)
    await store.put('s1', bytearray(b'second'), holder='h1', generation=2)
    assert await store.get('s1') == corral.StoredState(b'second', [], 2)
    await store.put('s2', memoryview(b'\x00\xff' * 3), holder='h1', generation=1)
    assert (await store.get('s2')).state == b'\x00\xff' * 3
    await store.put('s3', b'', holder='h1', generation=1)
    assert (await store.get('s3')).state == b''


async def test_records_append_in_order_and_a_put_replaces_them(store):
    await store.put('s1', b'full', holder='h1', generation=1)
    await store.append('s1', b'r2', holder='h1', generation=2)
    await store.append('s1', bytearray(b'r3'), holder='h1', generation=3)
    assert await store.get('s1') == corral.StoredState(b'full', [b'r2', b'r3'], 3)
    await store.put('s1', b'compacted', holder='h1', generation=4)
    assert await store.get('s1') == corral.StoredState(b'compacted', [], 4)
    await store.append('s1', b'r5', holder='h1', generation=5)
    assert await store.get('s1') == corral.StoredState(b'compacted', [b'r5'], 5)


async def test_every_write_is_a_compare_and_set_on_the_generation(store):
    """Two writers that loaded the same generation: the second write is refused, whole, and names
    both generations; so neither loses the other's feed."""
    await store.put('s1', b'full', holder='h1', generation=1)
    await store.append('s1', b'a', holder='h1', generation=2)
    for attempt, stored, follows in [
        (store.append('s1', b'b', holder='h2', generation=2), 2, 1),  # loaded generation 1, as the first did
        (store.append('s1', b'b', holder='h2', generation=4), 2, 3),  # a generation skipped
        (store.put('s1', b'other', holder='h2', generation=2), 2, 1),
        (store.put('s1', b'other', holder='h2', generation=1), 2, 0),  # "a new session" where one is stored
    ]:
        with pytest.raises(corral.SandboxSessionBusyError) as info:
            await attempt
        assert info.value.display() == CONFLICT.format(stored=stored, follows=follows)
    assert await store.get('s1') == corral.StoredState(b'full', [b'a'], 2)
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.put('new', b'x', holder='h1', generation=3)  # not stored: it is at generation 0
    assert info.value.display() == CONFLICT.format(stored=0, follows=2).replace("'s1'", "'new'")
    with pytest.raises(corral.SandboxStateError) as missing:
        await store.append('new', b'x', holder='h1', generation=1)
    assert missing.value.display() == "no stored session with id 'new'"
    assert await store.list() == ['s1']


async def test_two_writers_racing_on_one_generation_one_wins(store, backend):
    await store.put('s1', b'full', holder='h', generation=1)
    async with backend.open() as other:
        outcomes = await asyncio.gather(
            *(s.append('s1', bytes([i]), holder='h', generation=2) for i, s in enumerate([store, other] * 4)),
            return_exceptions=True,
        )
    assert sum(outcome is None for outcome in outcomes) == 1
    assert all(isinstance(o, corral.SandboxSessionBusyError) for o in outcomes if o is not None)
    stored = await store.get('s1')
    assert stored.generation == 2 and len(stored.records) == 1


async def test_malformed_generations_are_refused(store):
    for generation, kind, text in [
        (0, ValueError, 'generation must be from 1 to 2**62; got 0'),
        (-1, ValueError, 'generation must be from 1 to 2**62; got -1'),
        (1 << 63, ValueError, f'generation must be from 1 to 2**62; got {1 << 63}'),
        (True, TypeError, 'generation must be an int, not bool'),
        ('1', TypeError, 'generation must be an int, not str'),
    ]:
        for call in (store.put('s1', b'x', holder='h', generation=generation), store.append('s1', b'x', holder='h', generation=generation)):
            with pytest.raises(kind) as info:
                await call
            assert str(info.value) == text
    assert await store.list() == []


async def test_large_state_round_trip(store, backend):
    state = os.urandom(24 << 20)  # states may be tens of MB
    await store.put('big', state, holder='h1', generation=1)
    await store.append('big', state[:1 << 20], holder='h1', generation=2)
    assert await store.get('big') == corral.StoredState(state, [state[:1 << 20]], 2)
    async with backend.open() as other:  # read back by another store, as by another process
        assert (await other.get('big')).state == state


async def test_get_of_absent_session(store):
    with pytest.raises(corral.SandboxStateError) as info:
        await store.get('nothing-here')
    assert info.value.display() == "no stored session with id 'nothing-here'"


async def test_list_is_sorted_and_holds_stored_sessions_only(store):
    assert await store.list() == []
    for session_id in ['b', 'a:2', 'A', 'a.1', 'a-0', '_z']:
        await store.put(session_id, b'x', holder='h', generation=1)
    await store.acquire('leased-only', holder='h', ttl=60)  # a lease without a state is not a stored session
    assert await store.list() == ['A', '_z', 'a-0', 'a.1', 'a:2', 'b']


async def test_a_live_lease_refuses_other_holders(store):
    await store.acquire('s1', holder='h1', ttl=1000)
    await store.put('s1', b'first', holder='h1', generation=1)
    for attempt in (
        store.acquire('s1', holder='h2', ttl=5),
        store.put('s1', b'x', holder='h2', generation=2),
        store.append('s1', b'x', holder='h2', generation=2),
        store.delete('s1', holder='h2'),
        store.delete('s1'),
    ):
        with pytest.raises(corral.SandboxSessionBusyError) as info:
            await attempt
        assert info.value.display() == BUSY_1000
    assert (await store.get('s1')).state == b'first'
    await store.put('s1', b'mine', holder='h1', generation=2)  # the holder writes
    await store.append('s1', b'more', holder='h1', generation=3)
    await store.acquire('s1', holder='h1', ttl=1000)  # and takes it again: extends it
    assert await store.get('s1') == corral.StoredState(b'mine', [b'more'], 3)


async def test_acquire_and_get_takes_the_lease_and_reads_the_state_at_once(store):
    await store.put('s1', b'full', holder='h1', generation=1)
    await store.append('s1', b'r2', holder='h1', generation=2)
    assert await store.acquire_and_get('s1', holder='h1', ttl=1000) == corral.StoredState(b'full', [b'r2'], 2)
    for attempt in (store.acquire_and_get('s1', holder='h2', ttl=5), store.acquire('s1', holder='h2', ttl=5)):
        with pytest.raises(corral.SandboxSessionBusyError) as info:
            await attempt
        assert info.value.display() == BUSY_1000
    await store.append('s1', b'r3', holder='h1', generation=3)
    assert await store.acquire_and_get('s1', holder='h1', ttl=1000) == corral.StoredState(b'full', [b'r2', b'r3'], 3)  # extends it
    await store.release('s1', holder='h1')
    assert await store.acquire_and_get('s1', holder='h2', ttl=1000, tenant='') == corral.StoredState(b'full', [b'r2', b'r3'], 3)
    # Not stored (or another tenant's): refused as get refuses it, and no lease is left.
    for session_id, tenant in (('never', ''), ('s1', 'b')):
        with pytest.raises(corral.SandboxStateError) as missing:
            await store.acquire_and_get(session_id, holder='h3', ttl=1000, tenant=tenant)
        assert missing.value.display() == f'no stored session with id {session_id!r}'
        await store.acquire(session_id, holder='h4', ttl=5, tenant=tenant)
    with pytest.raises(ValueError):
        await store.acquire_and_get('s 1', holder='h1', ttl=5)
    with pytest.raises(ValueError):
        await store.acquire_and_get('s1', holder='h1', ttl=0)


async def test_a_put_with_a_ttl_takes_the_lease_in_the_same_write(store):
    await store.put('s1', b'first', holder='h1', generation=1, ttl=1000)
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.acquire('s1', holder='h2', ttl=5)
    assert info.value.display() == BUSY_1000
    await store.renew('s1', holder='h1', ttl=1000)
    # A put refused takes no lease: another holder's, or a conflict on the generation.
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.put('s1', b'x', holder='h2', generation=2, ttl=5)
    assert info.value.display() == BUSY_1000
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.put('s2', b'x', holder='h2', generation=2, ttl=1000)
    assert info.value.display() == CONFLICT.format(stored=0, follows=1).replace("'s1'", "'s2'")
    await store.acquire('s2', holder='h3', ttl=5)
    assert await store.get('s1') == corral.StoredState(b'first', [], 1)
    with pytest.raises(ValueError):
        await store.put('s3', b'x', holder='h1', generation=1, ttl=0)
    assert await store.list() == ['s1']


async def test_writes_keep_tenants_apart_and_a_refused_first_write_leaves_no_lease(store):
    """A new session's first write taking its lease, an append and a full state, each refused as
    the store is, per tenant; a first write refused (the id stored) takes no lease."""
    await store.put('s1', b'a', holder='h1', generation=1, ttl=1000, tenant='a')
    with pytest.raises(corral.SandboxStateError) as missing:
        await store.append('s1', b'x', holder='h2', generation=1, tenant='b')
    assert missing.value.display() == "no stored session with id 's1'"
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.put('s1', b'x', holder='h2', generation=2, tenant='b')
    assert info.value.display() == CONFLICT.format(stored=0, follows=1)
    await store.put('s1', b'b', holder='h2', generation=1, ttl=1000, tenant='b')  # tenant b's own s1, and its lease
    await store.append('s1', b'b2', holder='h2', generation=2, tenant='b')
    await store.put('s1', b'b3', holder='h2', generation=3, tenant='b')
    for tenant, holder in (('a', 'h2'), ('b', 'h1')):
        with pytest.raises(corral.SandboxSessionBusyError) as info:
            await store.append('s1', b'x', holder=holder, generation=4 if tenant == 'b' else 2, tenant=tenant)
        assert info.value.display() == BUSY_1000
    assert await store.get('s1', tenant='a') == corral.StoredState(b'a', [], 1)
    assert await store.get('s1', tenant='b') == corral.StoredState(b'b3', [], 3)
    await store.put('s2', b'x', holder='h1', generation=1)  # stored, and no lease on it
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.put('s2', b'y', holder='h3', generation=1, ttl=1000)
    assert info.value.display() == CONFLICT.format(stored=1, follows=0).replace("'s1'", "'s2'")
    await store.acquire('s2', holder='h4', ttl=5)  # nobody holds it
    assert await store.get('s2') == corral.StoredState(b'x', [], 1)
    await store.acquire('s3', holder='h1', ttl=5)  # a lease taken before the first write, which extends it
    await store.put('s3', b'z', holder='h1', generation=1, ttl=1000)
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.acquire('s3', holder='h2', ttl=5)
    assert info.value.display() == BUSY_1000.replace("'s1'", "'s3'")


async def test_put_without_any_lease(store):
    await store.put('s1', b'x', holder='h1', generation=1)
    await store.put('s1', b'y', holder='h2', generation=2)
    assert (await store.get('s1')).state == b'y'


async def test_an_expired_lease_is_taken_over(store):
    await store.put('s1', b'old', holder='h1', generation=1)
    await store.acquire('s1', holder='h1', ttl=0.2)
    await asyncio.sleep(0.4)
    await store.acquire('s1', holder='h2', ttl=1000)
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.renew('s1', holder='h1', ttl=10)
    assert info.value.display() == LOST
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.put('s1', b'stale', holder='h1', generation=2)
    assert info.value.display() == BUSY_1000
    assert (await store.get('s1')).state == b'old'


async def test_an_expired_lease_still_lets_its_holder_write_until_taken_over(store):
    await store.acquire('s1', holder='h1', ttl=0.1)
    await asyncio.sleep(0.3)
    await store.put('s1', b'late', holder='h2', generation=1)  # nobody has a live lease
    await store.renew('s1', holder='h1', ttl=1000)  # nobody took it over: the holder keeps it
    with pytest.raises(corral.SandboxSessionBusyError):
        await store.acquire('s1', holder='h2', ttl=5)


async def test_renew_extends_the_lease(store):
    await store.acquire('s1', holder='h1', ttl=0.3)
    await store.renew('s1', holder='h1', ttl=1000)
    await asyncio.sleep(0.5)
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.acquire('s1', holder='h2', ttl=5)
    assert info.value.display() == BUSY_1000


async def test_renew_of_a_lease_never_taken(store):
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.renew('s1', holder='h1', ttl=10)
    assert info.value.display() == LOST


async def test_release(store):
    await store.acquire('s1', holder='h1', ttl=1000)
    await store.release('s1', holder='h2')  # not its lease: nothing happens
    with pytest.raises(corral.SandboxSessionBusyError):
        await store.acquire('s1', holder='h2', ttl=5)
    await store.release('s1', holder='h1')
    await store.release('s1', holder='h1')  # twice: nothing happens
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.renew('s1', holder='h1', ttl=5)
    assert info.value.display() == LOST
    await store.acquire('s1', holder='h2', ttl=5)


async def test_delete(store):
    await store.put('s1', b'x', holder='h1', generation=1)
    await store.append('s1', b'r', holder='h1', generation=2)
    await store.put('s2', b'y', holder='h1', generation=1)
    await store.acquire('s1', holder='h1', ttl=1000)
    with pytest.raises(corral.SandboxSessionBusyError) as info:
        await store.delete('s1')
    assert info.value.display() == BUSY_1000
    await store.delete('s1', holder='h1')
    assert await store.list() == ['s2']
    with pytest.raises(corral.SandboxStateError) as info:
        await store.get('s1')
    assert info.value.display() == "no stored session with id 's1'"
    await store.acquire('s1', holder='h2', ttl=5)  # the lease went with it
    with pytest.raises(corral.SandboxStateError) as info:
        await store.delete('s1', holder='h2')
    assert info.value.display() == "no stored session with id 's1'"
    await store.put('s1', b'again', holder='h2', generation=1)  # its records went with it too
    assert await store.get('s1') == corral.StoredState(b'again', [], 1)
    await store.delete('s2')
    assert await store.list() == ['s1']


async def test_sessions_untouched_for_a_while_are_deleted_with_their_records(store):
    await store.put('old', b'x' * 100, holder='h1', generation=1)
    await store.append('old', b'r', holder='h1', generation=2)
    await store.put('old', b'y', holder='h1', tenant='acme', generation=1)
    await store.put('appended', b'x', holder='h1', generation=1)
    await store.put('leased', b'x', holder='h1', generation=1)
    await store.acquire('leased', holder='h1', ttl=1000)
    await store.put('released', b'x', holder='h1', generation=1)
    await store.acquire('released', holder='h1', ttl=0.1)  # expired 0.5 s before the cutoff
    await asyncio.sleep(1.6)
    await store.append('appended', b'r', holder='h1', generation=2)  # an append touches it
    await store.put('new', b'x', holder='h1', generation=1)
    assert await store.delete_untouched(1.0) == [('', 'old'), ('', 'released'), ('acme', 'old')]
    assert await store.list() == ['appended', 'leased', 'new']
    assert await store.list(tenant='acme') == []
    assert await store.delete_untouched(1.0) == []
    await store.put('old', b'again', holder='h2', generation=1)  # its generation and records went with it
    assert await store.get('old') == corral.StoredState(b'again', [], 1)
    for bad in (0, -1.0, float('nan'), float('inf')):
        with pytest.raises(ValueError):
            await store.delete_untouched(bad)


async def test_tenants_never_see_each_other(store):
    await store.put('s1', b'tenant a', holder='h1', tenant='a', generation=1)
    await store.append('s1', b'record a', holder='h1', tenant='a', generation=2)
    await store.acquire('s1', holder='h1', ttl=1000, tenant='a')
    await store.put('only-a', b'x', holder='h1', tenant='a', generation=1)

    async def error_text(call):
        with pytest.raises(corral.SandboxStateError) as info:
            await call
        return info.value.display()

    # Another tenant's session reads exactly as one that does not exist.
    assert await error_text(store.get('never', tenant='b')) == "no stored session with id 'never'"
    assert await error_text(store.get('s1', tenant='b')) == "no stored session with id 's1'"
    assert await error_text(store.get('s1')) == "no stored session with id 's1'"  # the '' tenant too
    assert await error_text(store.delete('s1', tenant='b')) == "no stored session with id 's1'"
    assert await error_text(store.append('never', b'x', holder='h2', tenant='b', generation=1)) == "no stored session with id 'never'"
    assert await error_text(store.append('s1', b'x', holder='h2', tenant='b', generation=1)) == "no stored session with id 's1'"
    assert await store.list(tenant='b') == []
    assert await store.list() == []
    # Its lease and its generation do not exist for tenant b either: b starts a session of its own, as on an absent id.
    await store.acquire('s1', holder='h2', ttl=1000, tenant='b')
    await store.put('s1', b'tenant b', holder='h2', tenant='b', generation=1)
    assert await store.list(tenant='b') == ['s1']
    # And tenant a is untouched.
    assert await store.get('s1', tenant='a') == corral.StoredState(b'tenant a', [b'record a'], 2)
    assert await store.list(tenant='a') == ['only-a', 's1']
    await store.renew('s1', holder='h1', ttl=1000, tenant='a')
    await store.delete('s1', tenant='b', holder='h2')
    assert await store.get('s1', tenant='a') == corral.StoredState(b'tenant a', [b'record a'], 2)


async def test_ids_match_exactly(store):
    """No wildcard, no case folding, no joining of tenant and id: every near miss is another session."""
    await store.put('a_b', b'underscore', holder='h', generation=1)
    await store.put('S1', b'upper', holder='h', generation=1)
    await store.put('b:c', b'tenant a', holder='h', tenant='a', generation=1)
    for session_id, tenant in [('aXb', ''), ('a.b', ''), ('s1', ''), ('c', 'a:b'), ('a:b:c', ''), ('b:c', 'A')]:
        with pytest.raises(corral.SandboxStateError) as info:
            await store.get(session_id, tenant=tenant)
        assert info.value.display() == f'no stored session with id {session_id!r}'
    await store.acquire('a_b', holder='h', ttl=1000)
    await store.acquire('aXb', holder='other', ttl=1000)  # not the same lease
    assert await store.list(tenant='a:b') == []
    assert (await store.get('b:c', tenant='a')).state == b'tenant a'


INVALID_IDS = [
    ('', "''"),
    ('a b', "'a b'"),
    ('a/b', "'a/b'"),
    ('é', "'é'"),
    ('a\n', "'a\\n'"),
    ('a\x00', "'a\\x00'"),
    ("x'; DROP TABLE corral_sessions; --", '"x\'; DROP TABLE corral_sessions; --"'),
    ('x' * 129, "'" + 'x' * 40 + "'... (129 characters)"),
]
RULE = '1 to 128 characters, each an ASCII letter, a digit or one of "_.:-"'


@pytest.mark.parametrize(('value', 'shown'), INVALID_IDS)
async def test_malformed_ids_are_refused(store, value, shown):
    for kind, call in [
        ('session_id', lambda: store.get(value)),
        ('session_id', lambda: store.put(value, b'x', holder='h', generation=1)),
        ('session_id', lambda: store.append(value, b'x', holder='h', generation=1)),
        ('session_id', lambda: store.acquire(value, holder='h', ttl=1)),
        ('holder', lambda: store.acquire('s1', holder=value, ttl=1)),
        ('holder', lambda: store.put('s1', b'x', holder=value, generation=1)),
        ('tenant', lambda: store.list(tenant=value)),
        ('tenant', lambda: store.get('s1', tenant=value)),
    ]:
        if kind == 'tenant' and value == '':
            continue  # '' is the default tenant
        with pytest.raises(ValueError) as info:
            await call()
        assert str(info.value) == f'{kind} must be {RULE}; got {shown}'
    await store.put('x' * 128, b'the longest id', holder='h' * 128, tenant='t' * 128, generation=1)
    assert await store.list(tenant='t' * 128) == ['x' * 128]


async def test_malformed_arguments_are_refused(store):
    cases = [
        (store.get(7), TypeError, 'session_id must be a str, not int'),
        (store.put('s1', 'text', holder='h', generation=1), TypeError, 'state must be bytes, not str'),
        (store.append('s1', 7, holder='h', generation=1), TypeError, 'state must be bytes, not int'),
        (store.acquire('s1', holder='h', ttl=0), ValueError, 'ttl must be a finite number of seconds above 0; got 0'),
        (store.acquire('s1', holder='h', ttl=-1.5), ValueError, 'ttl must be a finite number of seconds above 0; got -1.5'),
        (store.renew('s1', holder='h', ttl=float('nan')), ValueError, 'ttl must be a finite number of seconds above 0; got nan'),
        (store.renew('s1', holder='h', ttl=float('inf')), ValueError, 'ttl must be a finite number of seconds above 0; got inf'),
        (store.acquire('s1', holder='h', ttl='5'), TypeError, 'ttl must be a number of seconds, not str'),
        (store.acquire('s1', holder='h', ttl=True), TypeError, 'ttl must be a number of seconds, not bool'),
        (store.delete('s1', holder=''), ValueError, f"holder must be {RULE}; got ''"),
    ]
    for call, kind, text in cases:
        with pytest.raises(kind) as info:
            await call
        assert str(info.value) == text
    assert await store.list() == []


async def test_closed_store(backend):
    store = backend.open()
    await store.put('s1', b'x', holder='h', generation=1)
    await store.close()
    with pytest.raises(RuntimeError) as info:
        await store.get('s1')
    assert str(info.value) == 'the session store is closed'
    await store.close()  # twice: nothing happens


async def test_schema_created_once_by_stores_starting_together(backend):
    stores = [backend.open() for _ in range(5)]
    try:
        await asyncio.gather(*(s.put(f's{i}', b'x', holder='h', generation=1) for i, s in enumerate(stores)))
        assert await stores[0].list() == ['s0', 's1', 's2', 's3', 's4']
    finally:
        await asyncio.gather(*(s.close() for s in stores))


_RACER = textwrap.dedent(
    """
    import asyncio, sys
    import corral

    async def main(url, holder, count):
        async with corral.open_store(url) as store:
            await store.list()  # connected before the start
            print('ready', flush=True)
            sys.stdin.readline()

            async def take(session_id):
                try:
                    await store.acquire(session_id, holder=holder, ttl=1000)
                    return 'won'
                except corral.SandboxSessionBusyError:
                    return 'busy'

            ids = [f'{kind}-{i}' for kind in ('new', 'expired') for i in range(count)]
            print(' '.join(await asyncio.gather(*map(take, ids))), flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


@pytest.mark.slow
async def test_concurrent_acquire_from_two_processes(store, backend):
    count = 40
    for i in range(count):  # leases that expire before the race starts
        await store.acquire(f'expired-{i}', holder='crashed', ttl=0.05)
    racers = [
        subprocess.Popen(
            [sys.executable, '-c', _RACER, backend.url, holder, str(count)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for holder in ('p1', 'p2')
    ]
    try:
        for racer in racers:
            assert racer.stdout.readline() == 'ready\n', racer.stderr.read()
        await asyncio.sleep(0.1)
        for racer in racers:
            racer.stdin.write('go\n')
            racer.stdin.flush()
        outcomes = []
        for racer in racers:
            out, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
            outcomes.append(out.split())
    finally:
        for racer in racers:
            racer.kill()
    ids = [f'{kind}-{i}' for kind in ('new', 'expired') for i in range(count)]
    for session_id, first, second in zip(ids, *outcomes):
        assert sorted([first, second]) == ['busy', 'won'], session_id
        winner, loser = ('p1', 'p2') if first == 'won' else ('p2', 'p1')
        await store.renew(session_id, holder=winner, ttl=10)  # the store agrees who won
        with pytest.raises(corral.SandboxSessionBusyError):
            await store.renew(session_id, holder=loser, ttl=10)


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    import corral

    async def main(url):
        async with corral.open_store(url) as store:
            for i in range(1000):
                letter = b'AB'[i % 2:i % 2 + 1]
                await store.put('s1', letter * (8 << 20), holder='writer', generation=i + 2)
                print(i, flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_a_process_killed_in_the_middle_of_a_put_loses_nothing(store, backend):
    await store.put('s1', b'A' * (8 << 20), holder='writer', generation=1)
    writer = subprocess.Popen([sys.executable, '-c', _WRITER, backend.url], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(3):  # some puts done, the next one under way
            assert writer.stdout.readline()
    finally:
        writer.kill()
        writer.wait()
    stored = await store.get('s1')
    assert len(stored.state) == 8 << 20
    letter = b'B' if stored.generation % 2 and stored.generation > 1 else b'A'  # the writer's i-th put is generation i + 2
    assert stored.state == letter * (8 << 20)  # one whole state, never a torn one
    await store.put('s1', b'after', holder='writer', generation=stored.generation + 1)
    assert (await store.get('s1')).state == b'after'


async def test_an_append_writes_the_record_not_the_state(store, backend):
    """What the database writes for an append: its log grows by the record, not by the state
    (SQLite's write-ahead log, PostgreSQL's WAL)."""
    import sqlite3

    import asyncpg

    state = os.urandom(8 << 20)
    await store.put('s1', state, holder='h', generation=1)
    if backend.name == 'sqlite':
        path = backend.url.removeprefix('sqlite://')
        with sqlite3.connect(path) as db:
            db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        await store.append('s1', b'r' * 10_000, holder='h', generation=2)
        written = os.path.getsize(path + '-wal')
    else:
        db = await asyncpg.connect(backend.url)
        try:
            before = await db.fetchval('SELECT pg_current_wal_insert_lsn()')
            await store.append('s1', b'r' * 10_000, holder='h', generation=2)
            written = await db.fetchval('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)', before)
        finally:
            await db.close()
    assert written < 1 << 20
    assert await store.get('s1') == corral.StoredState(state, [b'r' * 10_000], 2)
