"""Tenant quotas: how many sessions a tenant may have open, how many bytes of sessions it may
store, and how many CPU seconds its workers may use in an hour.

Every number is kept in the session store, so that all replicas sharing a store enforce one quota
per tenant (not one per replica): the tenant's settings (`corral_tenants`), its open sessions
(`corral_tenant_sessions`, one row per session, renewed like a lease so that a crashed replica's
sessions stop counting after `slot_ttl` seconds), the size of its stored states and their records
(`corral_sessions`, `corral_records`; SQLite keeps a running total per tenant), and its CPU per minute (`corral_tenant_cpu`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import secrets
import time
import weakref
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, cast

from ..errors import SandboxQuotaError, SandboxStoreError
from ..store.base import Store, check_state, check_tenant
from ..store.tenants import QUOTA_NAMES, TenantTables
from ..store.url import open_tenant_tables

if TYPE_CHECKING:
    from ..host.session import Session

__all__ = ['CpuCounting', 'QuotaStore', 'Quotas', 'TenantQuotas', 'TenantSlot']

_log = logging.getLogger('corral.server')


def _refused(error: SandboxQuotaError) -> SandboxQuotaError:
    """`error`, logged at info for the server's operator: every refusal of a quota is."""
    _log.info('refused (quota): %s', error)
    return error


@dataclasses.dataclass(frozen=True)
class TenantQuotas:
    """What one tenant may use; None is no limit. The field defaults are a server's defaults when
    it is given none (`Quotas(defaults=...)` sets others).

    - `concurrent_sessions`: sessions checked out at once, on all replicas together.
    - `stored_bytes`: bytes of stored session states (the signed states as the store holds them).
    - `cpu_seconds_per_hour`: CPU seconds (user + system) of the tenant's workers and type checks
      in the last 60 minutes of the store's clock, counted per minute. A session opens, and a
      feed or load starts, only while the tenant is under it, so one can go over it by at most
      its own `Limits.cpu_time` (and `type_check_time`).

    Raises `ValueError` for a negative, fractional (for the counts) or non-finite value.
    """

    concurrent_sessions: int | None = 20
    stored_bytes: int | None = 1 << 30
    cpu_seconds_per_hour: float | None = 3600.0

    def __post_init__(self) -> None:
        for name in QUOTA_NAMES:
            _check_quota(name, getattr(self, name))


def _check_quota(name: str, value: object) -> None:
    if value is None:
        return
    whole = name != 'cpu_seconds_per_hour'
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        raise TypeError(f'the quota {name} must be {"an int" if whole else "a number"} or None, not {type(value).__name__}')
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f'the quota {name} must be 0 or more; got {value!r}')


#: Seconds a tenant's settings, once read, stand for it (`Quotas(settings_ttl=...)`): an operator's
#: change made on another replica or with `corral tenants set` counts within them.
SETTINGS_TTL = 1.0
#: Tenants whose settings a `Quotas` keeps at once; past it, the expired ones go, and a tenant
#: that finds no room is read from the store each time.
_MAX_SETTINGS = 10_000


class Quotas:
    """The quotas of a server's tenants, and their enforcement.

        quotas = Quotas(store, defaults=TenantQuotas(concurrent_sessions=10))
        pool = Pool(store=quotas.guard(store))                 # refuses states past stored_bytes
        async with quotas.session(tenant):                     # refuses past concurrent_sessions
            async with pool.checkout(...) as session:
                async with quotas.feed(tenant, session):       # refuses past cpu_seconds_per_hour
                    await session.feed_run(code, ...)

    `store` is a store with the tenant tables (`SQLiteStore`, `PostgresStore`), a store URL, or
    None for the embedded default (closed by `close()` when the quotas opened it). A tenant's own
    settings (`set`) win over `defaults`. Going over a quota raises `SandboxQuotaError` naming the
    tenant, its use, the quota's setting and the quota; store failures raise `SandboxStoreError`.

    A tenant's settings are read from the store at most once per `settings_ttl` seconds (0: on
    every check), and again at once after this object's own `set`: a change made elsewhere (another
    replica, `corral tenants set`) counts within `settings_ttl` seconds, and a feed's check costs
    no wait for the store meanwhile.
    """

    def __init__(
        self,
        store: TenantTables | str | None = None,
        *,
        defaults: TenantQuotas = TenantQuotas(),
        slot_ttl: float = 30.0,
        flush_interval: float = 1.0,
        settings_ttl: float = SETTINGS_TTL,
    ) -> None:
        self._tables, self._owned = open_tenant_tables(store, 'tenant quotas')
        if not isinstance(defaults, TenantQuotas):
            raise TypeError(f'defaults must be a TenantQuotas, not {type(defaults).__name__}')
        for name, seconds in (('slot_ttl', slot_ttl), ('flush_interval', flush_interval)):
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f'{name} must be a finite number of seconds above 0; got {seconds!r}')
        if not (math.isfinite(settings_ttl) and settings_ttl >= 0):
            raise ValueError(f'settings_ttl must be a finite number of seconds, 0 or more; got {settings_ttl!r}')
        self.defaults = defaults
        self.settings_ttl = float(settings_ttl)
        self._settings: dict[str, tuple[float, TenantQuotas]] = {}  # per tenant: when read (monotonic), what applies
        self._sets = 0  # moved on by each `set`: a reading that a set overtook is not kept
        self.slot_ttl = float(slot_ttl)
        self.flush_interval = float(flush_interval)
        self._counted: weakref.WeakKeyDictionary[Session, float] = weakref.WeakKeyDictionary()
        self._pending: dict[str, float] = {}  # CPU seconds per tenant not yet in the store
        # per tenant, the hour's seconds `check_cpu` read from the store, and when (monotonic)
        self._readings: dict[str, tuple[float, float]] = {}
        self._generation = 0  # moved on by a flush, which makes the readings stale
        self._flusher: asyncio.Task[None] | None = None
        self._flushing = asyncio.Lock()  # held by a flush, whose seconds are in neither place while it writes

    async def __aenter__(self) -> Quotas:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Write the CPU seconds not yet written (`flush`), and close the store if the quotas opened it."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        await self.flush()
        if self._owned:
            await self._tables.close()

    # -- settings

    async def set(self, tenant: str, **quotas: float | None) -> None:
        """Set the tenant's own quotas, by name (`concurrent_sessions=10`, `stored_bytes=...`,
        `cpu_seconds_per_hour=...`); None puts one back to the server's default. The others are
        kept. Raises `ValueError` for an unknown name or a bad value (see `TenantQuotas`)."""
        tenant = check_tenant(tenant)
        unknown = set(quotas) - set(QUOTA_NAMES)
        if unknown:
            raise ValueError(f'unknown quota(s) {sorted(unknown)}; the quotas are {list(QUOTA_NAMES)}')
        for name, value in quotas.items():
            _check_quota(name, value)
        try:
            await self._tables.set_tenant_quotas(tenant, quotas)
        finally:
            self._sets += 1
            self._settings.pop(tenant, None)

    async def settings(self, tenant: str) -> dict[str, float | None]:
        """The tenant's own settings, by quota name: None where it has the server's default."""
        return await self._tables.tenant_quotas(tenant)

    async def tenants(self) -> list[str]:
        """Every tenant that has an API key or settings of its own, sorted."""
        return await self._tables.list_tenants()

    async def of(self, tenant: str) -> TenantQuotas:
        """The quotas that apply to the tenant: its own settings, else the server's defaults (read
        from the store at most once per `settings_ttl` seconds)."""
        now = time.monotonic()
        known = self._settings.get(tenant)
        if known is not None and now - known[0] < self.settings_ttl:
            return known[1]
        sets = self._sets
        own = await self._tables.tenant_quotas(tenant)
        sessions, stored, cpu = (own[name] for name in QUOTA_NAMES)
        quotas = TenantQuotas(
            concurrent_sessions=self.defaults.concurrent_sessions if sessions is None else int(sessions),
            stored_bytes=self.defaults.stored_bytes if stored is None else int(stored),
            cpu_seconds_per_hour=self.defaults.cpu_seconds_per_hour if cpu is None else float(cpu),
        )
        if self.settings_ttl and sets == self._sets:
            if len(self._settings) >= _MAX_SETTINGS:
                self._settings = {name: item for name, item in self._settings.items() if now - item[0] < self.settings_ttl}
            if len(self._settings) < _MAX_SETTINGS:
                self._settings[tenant] = (now, quotas)
        return quotas

    # -- enforcement

    @contextlib.asynccontextmanager
    async def session(self, tenant: str) -> AsyncGenerator[TenantSlot]:
        """Hold one of the tenant's `concurrent_sessions` for the block (the `TenantSlot`). Raises
        `SandboxQuotaError` when the tenant has that many open already, e.g. `tenant 'acme' has 10
        sessions open; its quota is 10 (concurrent_sessions)`. The slot is renewed every third of
        `slot_ttl` while held (a lapsed one only under the quota: see `TenantSlot`), and given
        back at the end of the block."""
        slot = TenantSlot(self, tenant)
        await slot.acquire()
        try:
            yield slot
        finally:
            await slot.release()

    async def check_cpu(self, tenant: str) -> None:
        """Raise `SandboxQuotaError` when the tenant's workers used its `cpu_seconds_per_hour` or
        more in the last hour, e.g. `tenant 'acme' used 3600.4 CPU seconds in the last hour; its
        quota is 3600 (cpu_seconds_per_hour)`.

        The tenant's setting is read at most once per `settings_ttl`, the seconds in the store at
        most once per `flush_interval` (again after a `flush` here), as other replicas write theirs
        only that often: most checks before a feed wait for no read of the store. The seconds
        counted here since the last flush are always added."""
        limit = (await self.of(tenant)).cpu_seconds_per_hour
        if limit is None:
            return
        reading = self._readings.get(tenant)
        if reading is None or time.monotonic() - reading[0] >= self.flush_interval:
            generation, now = self._generation, time.monotonic()
            reading = (now, await self._tables.cpu_seconds_last_hour(tenant))
            if generation == self._generation:  # no flush came in between
                self._readings[tenant] = reading
        used = reading[1] + self._pending.get(tenant, 0.0)
        if used >= limit:
            raise _refused(SandboxQuotaError(
                f'tenant {tenant!r} used {used:.1f} CPU seconds in the last hour; its quota is {limit:g} (cpu_seconds_per_hour)',
                tenant=tenant,
                quota='cpu_seconds_per_hour',
                limit=limit,
                used=used,
            ))

    async def cpu_used(self, tenant: str) -> float:
        """The tenant's CPU seconds in the last hour: those in the store (every replica's, up to
        its last flush) and those this one counted since its own, each counted once (read between
        flushes, not while one moves the seconds from here to the store)."""
        async with self._flushing:
            return await self._tables.cpu_seconds_last_hour(tenant) + self._pending.get(tenant, 0.0)

    def feed(self, tenant: str, session: Session) -> CpuCounting:
        """Around one feed, resume or load of `session` (`async with quotas.feed(tenant, session):`):
        refuse to start it past the tenant's `cpu_seconds_per_hour` (`check_cpu`), and afterwards
        add the CPU the session used since it was last counted here (`Session.cpu_seconds`: its
        worker's, a load's replay and its type checks included) to the tenant's use, whether the
        feed succeeded or not.

        The worker's CPU is also read every `flush_interval` seconds while the feed runs, so a long
        feed counts as it goes, and a worker that dies on its own (where nothing can read its CPU
        any more) loses at most that interval's seconds. The seconds are counted here at once and
        written to the store within `flush_interval` seconds, one write per tenant (not per feed,
        so a feed's reply never waits for a commit), which is when other replicas see them."""
        return CpuCounting(self, tenant, session, check=True)

    def counting(self, tenant: str, session: Session) -> CpuCounting:
        """Count the CPU `session` uses in the block toward the tenant's `cpu_seconds_per_hour`, as
        `feed` does, without refusing anything: around a session's opening, whose worker replays
        a stored state and whose type checker checks its stubs (the server checks the quota
        before the session opens)."""
        return CpuCounting(self, tenant, session, check=False)

    def _count(self, tenant: str, session: Session) -> None:
        """Add what the session's worker used since the last reading to the tenant's pending seconds."""
        before, now = self._counted.get(session, 0.0), session.cpu_seconds
        if now > before:
            self._counted[session] = now
            self._add_pending(tenant, now - before)

    async def flush(self) -> None:
        """Write the CPU seconds counted since the last flush to the store. A tenant's seconds that
        the store fails to take stay counted here, and the next flush writes them."""
        async with self._flushing:
            pending, self._pending = self._pending, {}
            self._forget_readings()  # a reading from now on could miss the seconds leaving `_pending`
            try:
                for tenant in list(pending):
                    with contextlib.suppress(SandboxStoreError):
                        await self._tables.add_cpu_seconds(tenant, pending[tenant])
                        del pending[tenant]
            finally:
                for tenant, seconds in pending.items():  # not written: counted here until a flush writes them
                    self._pending[tenant] = self._pending.get(tenant, 0.0) + seconds
                self._forget_readings()

    def _forget_readings(self) -> None:
        self._generation += 1
        self._readings.clear()

    def _add_pending(self, tenant: str, seconds: float) -> None:
        self._pending[tenant] = self._pending.get(tenant, 0.0) + seconds
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_while_pending())

    async def _flush_while_pending(self) -> None:
        while self._pending:
            await asyncio.sleep(self.flush_interval)
            try:
                await self.flush()
            except RuntimeError:  # the store was closed before the quotas: nowhere to write them
                return

    async def check_storage(self, tenant: str, session_id: str, size: int, *, append: bool = False) -> None:
        """Raise `SandboxQuotaError` when storing a state of `size` bytes as `session_id` (replacing
        its previous state and records) would put the tenant past its `stored_bytes`, e.g. `tenant
        'acme' stores 1000 bytes of sessions, and the state of 'f00d' (200 bytes) would bring that
        to 1200; its quota is 1024 bytes (stored_bytes). The state was not stored`. With
        `append=True`, for a record of `size` bytes appended to the session's state (which it
        replaces nothing of): `..., and a record of 'f00d' (200 bytes) would bring that to 1200;
        ... The record was not stored`."""
        limit = (await self.of(tenant)).stored_bytes
        if limit is None:
            return
        used = await self._tables.stored_bytes(tenant, excluding=None if append else session_id)
        if used + size > limit:
            what = 'record' if append else 'state'
            raise _refused(SandboxQuotaError(
                f'tenant {tenant!r} stores {used} bytes of sessions, and the {what} of {session_id!r} ({size} bytes) '
                f'would bring that to {used + size}; its quota is {limit} bytes (stored_bytes). The {what} was not stored',
                tenant=tenant,
                quota='stored_bytes',
                limit=limit,
                used=used,
            ))

    def guard(self, store: Store) -> QuotaStore:
        """`store` with every `put` and `append` checked against the tenant's `stored_bytes`
        first: give it to the server's `Pool(store=...)`."""
        return QuotaStore(store, self)


class CpuCounting:
    """The block of `Quotas.feed` or `Quotas.counting`: `async with` it, or `start()` and `stop()`
    (a server's hooks do, on either side of a feed). A plain object with a timer, where a generator
    in an exit stack and a task per feed took a tenth of the server's time on a trivial feed."""

    __slots__ = ('_quotas', '_tenant', '_session', '_check', '_timer')

    def __init__(self, quotas: Quotas, tenant: str, session: Session, *, check: bool) -> None:
        self._quotas = quotas
        self._tenant = tenant
        self._session = session
        self._check = check
        self._timer: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        """Refuse past the quota (for a feed: `Quotas.check_cpu`), then count until `stop`."""
        if self._check:
            await self._quotas.check_cpu(self._tenant)
        self._timer = asyncio.get_running_loop().call_later(self._quotas.flush_interval, self._tick)

    def stop(self) -> None:
        """Count what the session used since the last reading, and stop counting. Safe to call twice."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._quotas._count(self._tenant, self._session)

    def _tick(self) -> None:
        self._quotas._count(self._tenant, self._session)
        self._timer = asyncio.get_running_loop().call_later(self._quotas.flush_interval, self._tick)

    async def __aenter__(self) -> None:
        await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()


class TenantSlot:
    """One of a tenant's `concurrent_sessions`, held for one session (`Quotas.session` yields it).

    While held it is renewed every third of the quotas' `slot_ttl`. A slot whose renewals did not
    reach the store for `slot_ttl` seconds lapses, and other sessions of the tenant may take its
    place meanwhile: its next renewal then takes it again only under the quota, as a new session
    would. Refused, `lost` is the `SandboxQuotaError` saying so (`check` raises it), and every later
    renewal tries again; a store that fails leaves the slot as it was until a renewal gets through.
    """

    def __init__(self, quotas: Quotas, tenant: str) -> None:
        self.tenant = check_tenant(tenant)
        self.holder = secrets.token_hex(16)
        self.lost: SandboxQuotaError | None = None
        self._quotas = quotas
        self._tables = quotas._tables
        self._task: asyncio.Task[None] | None = None

    async def acquire(self) -> None:
        """Take the slot; raises `SandboxQuotaError` when the tenant has its quota of sessions open,
        e.g. `tenant 'acme' has 10 sessions open; its quota is 10 (concurrent_sessions)`."""
        limit = (await self._quotas.of(self.tenant)).concurrent_sessions
        taken, in_use = await self._tables.take_tenant_slot(self.tenant, self.holder, limit=limit, ttl=self._quotas.slot_ttl)
        if not taken:
            raise self._refusal(limit, in_use, '')
        self._task = asyncio.get_running_loop().create_task(self._renew_while_held())

    async def renew(self) -> None:
        """Extend the slot by `slot_ttl` seconds from now. Raises `SandboxQuotaError` (and keeps it
        as `lost`) when the slot had lapsed and the tenant's sessions took every place meanwhile, e.g.
        `tenant 'acme' has 1 session open; its quota is 1 (concurrent_sessions), and this session's
        slot lapsed (not renewed within 30 seconds) and was taken meanwhile: it runs no feed until
        one of the others closes`."""
        limit = (await self._quotas.of(self.tenant)).concurrent_sessions
        held, in_use = await self._tables.renew_tenant_slot(self.tenant, self.holder, limit=limit, ttl=self._quotas.slot_ttl)
        if not held:
            self.lost = self._refusal(
                limit,
                in_use,
                f', and this session\'s slot lapsed (not renewed within {self._quotas.slot_ttl:g} seconds) and was taken meanwhile: '
                'it runs no feed until one of the others closes',
            )
            raise self.lost
        self.lost = None

    async def check(self) -> None:
        """Raise `lost` when the slot is not held, after trying once more to take it again (`renew`)."""
        if self.lost is not None:
            await self.renew()

    async def _renew_while_held(self) -> None:
        while True:
            await asyncio.sleep(self._quotas.slot_ttl / 3)
            with contextlib.suppress(SandboxQuotaError, SandboxStoreError, OSError):  # kept as `lost`, or tried again
                await self.renew()

    async def release(self) -> None:
        """Stop renewing and give the slot back (unreleased, it lapses after `slot_ttl`). Safe to call twice."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        with contextlib.suppress(SandboxStoreError, OSError):
            await self._tables.release_tenant_slot(self.tenant, self.holder)

    def _refusal(self, limit: int | None, in_use: int, why: str) -> SandboxQuotaError:
        return _refused(SandboxQuotaError(
            f'tenant {self.tenant!r} has {in_use} session{"" if in_use == 1 else "s"} open; its quota is {limit} (concurrent_sessions){why}',
            tenant=self.tenant,
            quota='concurrent_sessions',
            limit=cast(int, limit),
            used=in_use,
        ))


class QuotaStore:
    """A store whose `put` and `append` first check the tenant's `stored_bytes` quota
    (`Quotas.check_storage`), raising `SandboxQuotaError` and storing nothing past it; every other
    call goes to `store` as it is. The check and the write are two steps, so writes of one tenant
    racing on several replicas can go over the quota by at most one state or record each.

    It is a `Store` on every Python: each method of one is its own (from 3.12 `isinstance` with a
    runtime protocol looks them up on the class, not through `__getattr__`)."""

    def __init__(self, store: Store, quotas: Quotas) -> None:
        self._store = store
        self._quotas = quotas
        self.get = store.get
        self.acquire = store.acquire
        self.acquire_and_get = store.acquire_and_get
        self.renew = store.renew
        self.release = store.release
        self.delete = store.delete
        self.list = store.list
        self.delete_untouched = store.delete_untouched
        self.default_state_key = store.default_state_key
        self.close = store.close

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def __repr__(self) -> str:
        return f'QuotaStore({self._store!r})'

    async def put(self, session_id: str, state: bytes, *, holder: str, generation: int, tenant: str = '', ttl: float | None = None) -> None:
        """`store.put`, after the tenant's `stored_bytes` quota allowed a state of this size."""
        state = check_state(state)
        await self._quotas.check_storage(tenant, session_id, len(state))
        await self._store.put(session_id, state, holder=holder, generation=generation, tenant=tenant, ttl=ttl)

    async def append(self, session_id: str, record: bytes, *, holder: str, generation: int, tenant: str = '') -> None:
        """`store.append`, after the tenant's `stored_bytes` quota allowed a record of this size."""
        record = check_state(record)
        await self._quotas.check_storage(tenant, session_id, len(record), append=True)
        await self._store.append(session_id, record, holder=holder, generation=generation, tenant=tenant)
