"""The pool: owns the zygote, keeps forked workers warm, and checks out sessions."""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from ..language.catalog import package_closure
from ..errors import CorralError
from ..limits import Limits
from ..store.base import check_tenant
from ..worker.zygote import LAYERS
from .checkpoints import CheckpointLimits, Checkpoints
from .external import ExternalModule
from .journal import MAX_STATE_BYTES
from .observer import PoolObserver
from .os_access import Mount, OsAccess
from .session import OfferModules, Session
from .workers import WorkerProcess, Zygote

if TYPE_CHECKING:
    from ..store import Store
    from ..typecheck import TypeChecker

__all__ = ['Pool']


def _installed(packages: tuple[str, ...]) -> tuple[str, ...]:
    """`packages`, once each is found installed (without importing it in the host)."""
    import importlib.util

    for name in packages:
        if importlib.util.find_spec(name) is None:
            raise ImportError(f"package {name!r} is not installed: pip install -e '.[data]' in corral's clone", name=name)
    return packages

#: Warm workers are forked with the rlimits of the default `Limits()`; a session with other
#: memory or CPU limits gets a worker forked for it.
_WARM_RLIMITS = (Limits().memory, Limits().cpu_time)

#: Seconds after a checkout before the pool forks its replacement, unless its session ends sooner
#: (a fork competes for CPU with the session's feeds).
_REFILL_DELAY = 0.05
#: Seconds after its fork that a warm worker may still be starting (locking down, warming up: some
#: 3.5 ms of CPU): a checkout that takes one so young is a miss too.
_STARTING = 0.02
#: Warm workers asked of the zygote at once: it forks the next while the host takes the last.
_FORKS_AHEAD = 2

#: The observer of a pool given none: it ignores every event.
_NO_OBSERVER = PoolObserver()
_log = logging.getLogger('corral.pool')
#: The longest wait, in seconds, between two sweeps of the retention.
_SWEEP_EVERY = 3600.0


class WarmDemand:
    """How many idle workers a pool keeps warm: from `floor` up to `cap`, following demand.

    Each checkout that finds no idle worker, or takes one forked less than `_STARTING` before (a
    miss: checkouts came faster than the pool refills), raises the target by one, up to `cap`. Each `decay` seconds without a miss halve the surplus
    above `floor` (rounded down), so a burst's extra workers are gone a few `decay` periods after
    it. Times are the pool's clock, in seconds, passed in by the caller (so tests can drive it).
    """

    __slots__ = ('cap', 'decay', 'floor', 'target', '_quiet_since')

    def __init__(self, floor: int, cap: int, decay: float) -> None:
        self.floor = floor
        self.cap = cap
        self.decay = decay
        self.target = floor
        self._quiet_since = 0.0

    def miss(self, now: float) -> None:
        """A checkout found no idle worker at time `now`."""
        self.target = min(self.cap, self.target + 1)
        self._quiet_since = now

    def settle(self, now: float) -> float | None:
        """Apply the decay due by `now`; the time of the next decay, or None once at the floor."""
        while self.target > self.floor and now - self._quiet_since >= self.decay:
            self.target = self.floor + (self.target - self.floor) // 2
            self._quiet_since += self.decay
        return self._quiet_since + self.decay if self.target > self.floor else None


class Pool:
    """Owns sandbox workers and hands out sessions. Use as an async context manager.

    Workers are locked down (see the security section of the README): a lockdown layer that this
    machine lacks makes the first checkout (or `start()`) raise `SandboxInsecureError`, whose text
    names the layer, why it is missing and the setting that enables it, unless `skip_layers` names
    it (`'seccomp'`, `'userns'`, `'netns'`, `'mntns'`, `'pidns'`, `'utsns'`, `'ipcns'`, `'uid'`,
    `'rlimits'`, `'no_new_privs'`). `'language'` turns off the language guard: only for measuring
    what the other layers block on their own.

    Stored sessions (`checkout(ephemeral=False)`, `checkout(session_id=...)`) live in `store`: a
    `Store`, a URL (`'sqlite:///path.db'`, `'postgresql://...'`), or by default the embedded SQLite
    store. States (`session.dump()`) are signed with `state_key` (HMAC-SHA256; default: the
    store's key) and refused past `max_state_bytes`; a stored session's state never grows past it
    (see `checkout`). A stored session's lease lasts `lease_ttl` seconds past its holder's last renewal.
    `list_sessions` and `delete_session` list and delete a tenant's stored sessions. `retention`
    (seconds, default None: kept for ever): once the pool starts, stored sessions of every tenant
    untouched for that long (not written, not checked out) are deleted with their records, in a
    sweep every quarter of `retention` (at most every hour), counted by the observer's
    `sessions_expired`; `expire_sessions()` sweeps at once.

    `packages` (from `'numpy'`, `'pandas'`, `'matplotlib'`; each with what it needs) are loaded
    into the zygote before the lockdown, so a script's `import pandas as pd` costs nothing (see the
    README's section on data work); a name not among them raises `ValueError`, a package not
    installed `ImportError` (they come with `pip install -e '.[data]' in corral's clone`). Without packages, the
    zygote loads none of them.

    Creating a pool starts nothing; the zygote (a warm Python process that forks workers) starts
    on the first checkout. When a session ends (or 50 ms after its checkout) the pool forks its
    replacement in the background so that `warm_workers` idle workers wait for the next checkouts. Every session gets a worker of
    its own, killed when the session ends and never reused.

    The warm workers follow demand (see `WarmDemand`): each checkout that finds none idle (or
    only one forked moments before, still starting) keeps one more warm, up to
    `max_warm_workers` (default: four times `warm_workers`), and each `warm_decay` seconds
    without such a checkout halve the extra ones (their workers are killed), back down to
    `warm_workers`. A checkout takes the longest idle worker; one that finds none idle takes the
    next worker forked. Forks compete for CPU with the sessions' feeds: while a session given a
    warm worker runs, the pool keeps `warm_workers` idle, and forks the extra ones when none runs
    (or 50 ms after the last checkout).

    A closed session's worker outlives it as a live checkpoint (see `corral.host.checkpoints`):
    the next `checkout(session_id=...)` (or `fork=True`) of a stored session on this pool, or
    `load_session` of a state `dump()` gave out, of the exact state the session closed with,
    starts from it in a millisecond or two (the store's read aside), whatever its number of
    feeds, instead of replaying the journal. `checkpoints` bounds them (`CheckpointLimits`: count
    and memory, per pool and per tenant, least recently kept evicted first); `None` keeps none.

    `observer`, a `PoolObserver`, hears of worker starts, sessions, feeds, host calls and type
    checks as they happen (`corral.server.metrics.Metrics` counts them for Prometheus).

        async with Pool() as pool:
            async with pool.checkout(type_check=True, type_check_stubs=STUBS) as session:
                result = await session.feed_run(code, external_lookup=TOOLS)
    """

    def __init__(
        self,
        *,
        warm_workers: int = 2,
        skip_layers: Collection[str] = (),
        store: Store | str | None = None,
        state_key: bytes | None = None,
        max_state_bytes: int = MAX_STATE_BYTES,
        lease_ttl: float = 30.0,
        max_warm_workers: int | None = None,
        warm_decay: float = 30.0,
        observer: PoolObserver | None = None,
        packages: Collection[str] = (),
        checkpoints: CheckpointLimits | None = CheckpointLimits(),
        retention: float | None = None,
    ) -> None:
        if warm_workers < 0:
            raise ValueError('warm_workers must be 0 or more')
        if max_warm_workers is None:
            max_warm_workers = 4 * warm_workers
        if max_warm_workers < warm_workers:
            raise ValueError(f'max_warm_workers ({max_warm_workers}) must be at least warm_workers ({warm_workers})')
        if warm_decay <= 0:
            raise ValueError('warm_decay must be positive (seconds)')
        unknown = set(skip_layers) - set(LAYERS)
        if unknown:
            raise ValueError(f'unknown lockdown layer(s) {sorted(unknown)}; the layers are {list(LAYERS)}')
        if state_key is not None and (not isinstance(state_key, bytes) or len(state_key) < 16):
            raise ValueError('state_key must be bytes, at least 16 of them (HMAC-SHA256 wants a key as long as its 32-byte output)')
        if max_state_bytes <= 0 or lease_ttl <= 0:
            raise ValueError('max_state_bytes and lease_ttl must be positive')
        if retention is not None and (isinstance(retention, bool) or not isinstance(retention, (int, float)) or not (math.isfinite(retention) and retention > 0)):
            raise ValueError(f'retention must be a number of seconds above 0, or None to keep stored sessions for ever; not {retention!r}')
        self.retention = None if retention is None else float(retention)
        self._sweeper: asyncio.Task[None] | None = None
        self.warm_workers = warm_workers
        self.max_warm_workers = max_warm_workers
        self.observer = observer if observer is not None else _NO_OBSERVER
        self.skip_layers = frozenset(skip_layers)
        self.max_state_bytes = max_state_bytes
        self.lease_ttl = lease_ttl
        self._store_option = store
        self._store: Store | None = None
        self._state_key_option = state_key
        self.packages = _installed(package_closure(packages))
        self._zygote = Zygote(self.skip_layers, self.packages)
        self._idle: list[WorkerProcess] = []
        self._demand = WarmDemand(warm_workers, max_warm_workers, warm_decay)
        self._clock: Callable[[], float] = time.monotonic
        self._served = False  # a checkout got a worker: from now on, finding none idle is a miss
        self._waiting: collections.deque[asyncio.Future[WorkerProcess]] = collections.deque()  # checkouts that missed
        self._refill: asyncio.Task[None] | None = None
        self._refill_sleeping = False
        self._active = 0  # warm workers handed out and not yet released
        self._decay_timer: asyncio.TimerHandle | None = None
        self._checker: TypeChecker | None = None
        self._checkpoints = None if checkpoints is None else Checkpoints(checkpoints, self.observer)
        self._closed = False

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start the zygote now rather than at the first checkout: raises `SandboxInsecureError`
        where a lockdown layer is missing (see the class), `OSError` where the zygote cannot start."""
        if self._closed:
            raise RuntimeError('the pool is closed')
        self._start_sweeper()
        await self._zygote.start()

    @property
    def started(self) -> bool:
        """True while the zygote runs: after `start()` or the first checkout, until `aclose()`; False
        too when the zygote died (the next checkout, or `start()`, starts another)."""
        return not self._closed and self._zygote.running

    @property
    def store(self) -> Store:
        """The pool's session store: the one given, one opened from the URL given, or the embedded
        SQLite store (opened on first use)."""
        return self._get_store()

    async def aclose(self) -> None:
        """Kill idle workers, stop the zygote and the type checker.

        Sessions still open end too (their workers die with the zygote): their next feed raises
        `SandboxWorkerError`. Checkouts still waiting for a worker raise `RuntimeError('the pool is closed')`.
        """
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        if self._decay_timer is not None:
            self._decay_timer.cancel()
            self._decay_timer = None
        if self._refill is not None:
            self._refill.cancel()
            try:
                await self._refill
            except (asyncio.CancelledError, OSError):
                pass
            self._refill = None
        for worker in self._idle:
            worker.kill()
        self._idle.clear()
        if self._checkpoints is not None:
            self._checkpoints.close()
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(RuntimeError('the pool is closed'))
        self._zygote.close()
        if self._checker is not None:
            await self._checker.aclose()
            self._checker = None
        if self._store is not None and self._store is not self._store_option:
            await self._store.close()  # a store the pool opened itself (from a URL, or the default)
        self._store = None

    def checkout(
        self,
        *,
        type_check: bool = False,
        type_check_stubs: str | None = None,
        external_modules: Mapping[str, ExternalModule] | None = None,
        ephemeral: bool | None = None,
        session_id: str | None = None,
        fork: bool = False,
        limits: Limits | None = None,
        script_name: str = 'main.py',
        os_access: OsAccess | None = None,
        mounts: Mount | Sequence[Mount] | None = None,
        random_seed: int | None = None,
        tenant: str = '',
        modules: OfferModules | None = None,
    ) -> Session:
        """A new session, started by `async with`; each one runs in a fresh worker.

        - `type_check`: check every script with ty before it runs, against `type_check_stubs`
          (the stub text of `external_lookup` functions, usable without import) and the stubs of
          `external_modules` (name -> `ExternalModule`, imported by that name).
        - `ephemeral=False`: a stored session. It gets `session.session_id` and is written to the
          pool's store after every feed that completes (and when a feed pauses), so killing the
          host process between feeds loses nothing. The default (`None`) is ephemeral, unless
          `session_id` is given.
        - `session_id`: resume that stored session, same id, in any process using the same store;
          with `fork=True`, start a new stored session from its state instead. Checking out a
          session another holder has raises `SandboxSessionBusyError` (the holder's lease lasts
          `lease_ttl` seconds past its last renewal); an unknown id raises `SandboxStateError`.
          Give the same `type_check_stubs` and `external_modules` the stored session had
          (modules it was offered later too, `add_external_module`), or offer them with `modules`.
        - `modules`: for a caller that offers modules as scripts ask for them (an `OfferModules`):
          awaited, as the session is entered, with the external modules the stored session
          `session_id` names (its stubs and function names), before its state is checked against
          this session's; it offers those the session lacks (`session.add_external_module`).
          Only with `session_id` (`ValueError` otherwise).
        - `limits`: the session's `Limits` (default `Limits()`).
        - `script_name`: the file name tracebacks and diagnostics show.
        - `mounts`: host folders the script may use as files (`Mount(host_dir, sandbox_path,
          mode='overlay' | 'read-only' | 'read-write')`; overlay writes stay in the session, and
          travel with its dumped state).
        - `os_access`: an `OsAccess` granting environment variables, the clock, and files outside
          the mounts. Without it, `os.environ`, `datetime.now()` and `time.time()` raise
          `PermissionError` in the script.
        - `random_seed`: the seed of the script's `random` (default: a fresh one, see
          `session.random_seed`); the same seed gives the same numbers. A loaded state brings its own.
        - `tenant`: whose stored session it is (`''`, the default: a store with one tenant). The
          store keeps each tenant's sessions apart, the lease is the tenant's, and the stored state
          is bound to the tenant: a tenant checks out, resumes and forks its own sessions only, and
          another tenant's session id reads as one that is not stored (`SandboxStateError`).
          1 to 128 characters from `A-Z a-z 0-9 _ . : -` (`ValueError` otherwise).

        With `type_check`, entering the session raises `StubError` when ty finds errors in the
        stubs themselves, or an external module's stubs declare a function it does not have.
        """
        if self._closed:
            raise RuntimeError('the pool is closed')
        if session_id is not None and ephemeral:
            raise ValueError('a session_id names a stored session: do not pass ephemeral=True with it')
        if fork and session_id is None:
            raise ValueError('fork=True needs the session_id of the stored session to fork')
        if modules is not None and session_id is None:
            raise ValueError('modules= offers the modules of a stored session: pass its session_id too')
        if session_id is not None and not isinstance(session_id, str):
            raise TypeError(f'session_id must be a str, not {type(session_id).__name__}')
        check_tenant(tenant)
        return Session(
            self,
            type_check=type_check,
            type_check_stubs=type_check_stubs,
            external_modules=external_modules,
            ephemeral=ephemeral if ephemeral is not None else session_id is None,
            limits=limits,
            script_name=script_name,
            os_access=os_access,
            mounts=mounts,
            random_seed=random_seed,
            session_id=session_id,
            fork=fork,
            tenant=tenant,
            modules=modules,
        )

    async def list_sessions(self, *, tenant: str = '') -> list[str]:
        """The ids of the tenant's stored sessions, sorted (`tenant=''`: a store with one tenant).
        Raises `SandboxStoreError` when the store fails."""
        return await self._get_store().list(tenant=check_tenant(tenant))

    async def delete_session(self, session_id: str, *, tenant: str = '') -> None:
        """Delete the tenant's stored session `session_id` with its records, giving back the bytes
        it held (a tenant's `stored_bytes`). Raises `SandboxStateError` when it is not stored (or
        is another tenant's), `SandboxSessionBusyError` while it is checked out, `ValueError` for a
        malformed id, `SandboxStoreError` when the store fails."""
        await self._get_store().delete(session_id, tenant=check_tenant(tenant))
        if self._checkpoints is not None:
            self._checkpoints.discard([(tenant, session_id)])

    async def expire_sessions(self) -> list[tuple[str, str]]:
        """Delete now the stored sessions, of every tenant, untouched for `retention` seconds;
        returns their `(tenant, session_id)`, sorted (none when `retention` is None)."""
        if self.retention is None:
            return []
        expired = await self._get_store().delete_untouched(self.retention)
        if expired:
            if self._checkpoints is not None:
                self._checkpoints.discard(expired)
            self.observer.sessions_expired(len(expired))
        return expired

    def _start_sweeper(self) -> None:
        if self.retention is not None and self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        assert self.retention is not None
        while True:
            try:
                expired = await self.expire_sessions()
                if expired:
                    _log.info('deleted %d stored session%s untouched for %g seconds', len(expired), '' if len(expired) == 1 else 's', self.retention)
            except (CorralError, OSError) as error:  # the store failed: the next sweep tries again
                _log.warning('the retention could not delete old sessions: %s', error)
            await asyncio.sleep(min(self.retention / 4, _SWEEP_EVERY))

    @property
    def has_store(self) -> bool:
        """Whether the pool was given a store (`Pool(store=...)`, a URL or a `Store`). Without one,
        stored sessions use the embedded default; integrations (Code Mode) store their sessions only
        when the application chose a store."""
        return self._store_option is not None

    def _get_store(self) -> Store:
        """The pool's store: the one given, one opened from the URL given, or the embedded default."""
        if self._store is None:
            if self._store_option is None or isinstance(self._store_option, str):
                from ..store import open_store

                self._store = open_store(self._store_option)
            else:
                self._store = self._store_option
        return self._store

    def _state_key(self) -> bytes:
        """The key states are signed with: `state_key`, or the store's default key."""
        if self._state_key_option is None:
            self._state_key_option = self._get_store().default_state_key()
        return self._state_key_option

    def _type_checker(self) -> TypeChecker:
        if self._checker is None:
            from ..typecheck import TypeChecker

            self._checker = TypeChecker(self.packages)
        return self._checker

    async def _spawn(self, *, memory: int | None, cpu_time: int | None) -> WorkerProcess:
        worker = await self._zygote.spawn(memory=memory, cpu_time=cpu_time)
        self.observer.worker_started()
        return worker

    async def _take_worker(self, limits: Limits) -> WorkerProcess:
        if self._closed:
            raise RuntimeError('the pool is closed')
        self._start_sweeper()
        if (limits.memory, limits.cpu_time) != _WARM_RLIMITS:
            return await self._spawn(memory=limits.memory, cpu_time=limits.cpu_time)
        worker = None
        while self._idle:
            candidate = self._idle.pop(self._readiest())
            if candidate.alive():
                worker = candidate
                break
            candidate.kill()
        # a miss: checkouts came faster than the pool refills (no worker idle, or one still starting)
        if self._served and (worker is None or time.monotonic() - worker.forked < _STARTING):
            self._demand.miss(self._clock())
            self._schedule_decay()
        if worker is None:
            worker = await self._next_forked()
        self._served = True
        if self._demand.target:
            worker.on_kill = self._released
            self._active += 1
            self._start_refill(_REFILL_DELAY)
        return worker

    def _readiest(self) -> int:
        """The index in the idle list (oldest first) of the worker a checkout takes: the last forked
        that has started (forked `_STARTING` before: it slept least), or else the oldest."""
        started = time.monotonic() - _STARTING
        for index in range(len(self._idle) - 1, -1, -1):
            if self._idle[index].forked <= started:
                return index
        return 0

    def _released(self) -> None:
        """A warm worker a checkout took was killed (its session ended): fork its replacement now,
        when that session's feeds no longer compete for the CPU, rather than `_REFILL_DELAY` after
        the checkout."""
        self._active -= 1
        if not self._closed and len(self._idle) < self._demand.target:
            self._start_refill(0.0)

    async def _next_forked(self) -> WorkerProcess:
        """The next worker the refill forks (it forks for waiting checkouts first, idle ones after)."""
        waiter: asyncio.Future[WorkerProcess] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        self._start_refill(0.0)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._place(waiter.result())  # handed over as the checkout gave up: keep it warm
            raise

    def _start_refill(self, delay: float) -> None:
        """Run the refill unless it runs; one asleep before its first fork starts now when `delay` is 0."""
        if self._refill is not None and not self._refill.done():
            if delay or not self._refill_sleeping:
                return
            self._refill.cancel()
        # asleep from now, before the task first runs: a miss in between wakes it
        self._refill_sleeping = delay > 0
        self._refill = asyncio.get_running_loop().create_task(self._fill(delay=delay))

    async def _fill(self, *, delay: float = 0.0) -> None:
        """Fork warm workers, `_FORKS_AHEAD` asked at once: for the checkouts waiting, then for the
        idle list, up to `warm_workers` while a session given a warm worker runs and up to the
        demand's target once none does. After serving checkouts, or with sessions running and the
        target not reached, it naps `_REFILL_DELAY` (a release or a miss wakes it) and then fills
        the idle list up to the target."""
        if delay:
            await self._nap(delay)
        served = rested = False
        forking: collections.deque[asyncio.Future[WorkerProcess]] = collections.deque()  # in the order asked
        try:
            while not self._closed:
                # forks compete for CPU with the feeds of sessions running: while any runs, the idle
                # list is kept at the floor, and filled up to the target once none runs (or after a nap)
                if served:
                    stock = 0
                elif self._active and not rested:
                    stock = self._demand.floor
                else:
                    stock = self._demand.target
                wanted = len(self._waiting) + stock - len(self._idle)
                while len(forking) < min(wanted, _FORKS_AHEAD):
                    forking.append(asyncio.ensure_future(self._spawn(memory=_WARM_RLIMITS[0], cpu_time=_WARM_RLIMITS[1])))
                if not forking:
                    if len(self._idle) >= self._demand.target:
                        return
                    served = False  # the checkouts served run their first feeds: the forks wait
                    await self._nap(_REFILL_DELAY)
                    rested = True
                    continue
                try:
                    worker = await forking[0]
                except Exception as error:  # the zygote cannot start (SandboxInsecureError, OSError): tell who waits
                    while self._waiting:
                        waiter = self._waiting.popleft()
                        if not waiter.done():
                            waiter.set_exception(error)
                    return
                if not self._waiting:  # for the idle list: its transport made now, in idle time (a checkout waiting connects it itself)
                    await worker.connect()  # killed with the forks below if the refill is cancelled meanwhile
                forking.popleft()
                if self._closed:
                    worker.kill()
                    return
                served = self._place(worker) or served
        finally:
            for spawn in forking:  # a worker still to come is killed as it arrives (`Zygote.spawn`)
                if not spawn.done():
                    spawn.cancel()
                elif not spawn.cancelled() and spawn.exception() is None:
                    spawn.result().kill()

    async def _nap(self, delay: float) -> None:
        """Sleep `delay` seconds before forking; a checkout that misses or a release wakes the refill
        (`_start_refill(0.0)` restarts it)."""
        self._refill_sleeping = True
        try:
            await asyncio.sleep(delay)
        finally:
            if asyncio.current_task() is self._refill:  # not one cancelled for a refill started since
                self._refill_sleeping = False

    def _place(self, worker: WorkerProcess) -> bool:
        """Hand a warm worker to the first checkout still waiting (True), or keep it idle (False);
        killed instead when the pool closed, or the decay lowered the target while it was forked."""
        while self._waiting and not self._closed:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(worker)
                return True
        if self._closed or len(self._idle) >= self._demand.target:
            worker.kill()
        else:
            self._idle.append(worker)
        return False

    def _schedule_decay(self) -> None:
        if self._decay_timer is None:
            now = self._clock()
            when = self._demand.settle(now)
            if when is not None:
                self._decay_timer = asyncio.get_running_loop().call_later(max(when - now, 0.0), self._decay)

    def _decay(self) -> None:
        """Lower the warm target as `WarmDemand.settle` says, and kill the idle workers above it."""
        if self._decay_timer is not None:
            self._decay_timer.cancel()
            self._decay_timer = None
        self._demand.settle(self._clock())
        while len(self._idle) > self._demand.target:  # the longest idle go first
            self._idle.pop(0).kill()
        self._schedule_decay()

    def __repr__(self) -> str:
        return f'Pool(warm_workers={self.warm_workers}, max_warm_workers={self.max_warm_workers}, idle={len(self._idle)})'

