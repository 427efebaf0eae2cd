"""Irreversible lockdown of a forked worker process, before it runs any untrusted script.

The zygote forks one worker per session. Each worker keeps its channel socket and the fds of its
own asyncio event loop (epoll fd, self-pipe socketpair), then calls `lock_down()` once. After that
the worker can still run CPython (compile, execute, allocate, recurse, drive its existing event
loop, take signals, read the clock and `getrandom`), but it cannot reach anything outside itself.

Layers, in the order `lock_down()` applies them:

1. **File descriptors**: everything not in `keep_fds` is closed (listing ``/proc/self/fd``, with
   `close_range(2)` through `os.closerange` for the gaps). Seccomp then forbids creating new fds
   (`open*`, `socket*`, `pipe*`, `dup*`, `epoll_create*`, `eventfd`, `memfd_create`, ...), so the
   fd table is frozen except for fds the host itself passes over the channel with ``SCM_RIGHTS``.
2. **Environment**: `os.environ` is cleared (which `unsetenv()`s every key), then libc's
   `clearenv()`, and the bytes of the initial environment block on the stack (what
   ``/proc/self/environ`` shows) are overwritten with zeros.
3. **Resource limits** (`LockdownLimits`): soft and hard limits are lowered together, and seccomp
   denies `setrlimit`/`prlimit64` with a new value, so they cannot be raised again even by root.
4. **Privileges**: all capabilities (effective, permitted, inheritable, ambient) are dropped. The
   uid is the zygote's: uid 65534 (`corral.worker.namespaces.drop_uid`), switched once there, so
   that a worker keeps the parent-death signal its fork set (a change of uid would clear it).
5. ``PR_SET_NO_NEW_PRIVS`` and ``PR_SET_DUMPABLE = 0`` (no core dumps; other processes of the same
   uid cannot ptrace the worker or read its ``/proc/PID/*``).
6. **Seccomp** allow-list (below), built with libseccomp through `pyseccomp`.

The namespaces (user, network, mount with an empty root, PID, UTS, IPC) and the sandbox uid are
layers of their own, entered once by the zygote (`corral.worker.namespaces`); every forked worker
starts in them.

Seccomp allow-list
------------------
Default action for any syscall not listed: fail with ``EPERM``, so CPython raises a clean
`PermissionError` (``open('/etc/passwd')``, ``socket.socket()``, ``os.fork()``,
``subprocess.run(...)``, ``os.execv(...)``, ``os.kill(other, 0)``, ``os.chdir(...)``, threads
("can't start new thread"), ...). Any syscall from another ABI (int 0x80 / x32) kills the process
(``SCMP_FLTATR_ACT_BADARCH``).

*Allowed without conditions* (what ``strace -f`` showed a forked worker using while it ran a
workload with classes, generators, deep recursion, 100 MB lists, json, re, hashlib, uuid, decimal,
datetime, an existing asyncio loop, ``signal.setitimer``, ``time.sleep`` and ``os.urandom``, plus
the close relatives of those calls and what glibc and CPython need to exit): ``read readv pread64 preadv preadv2 write writev pwrite64 pwritev
pwritev2 lseek close fstat`` (on fds the worker already has), ``sendto recvfrom sendmsg recvmsg
sendmmsg recvmmsg shutdown getsockopt getsockname getpeername`` (existing sockets only: creating,
connecting, binding or accepting is denied), ``epoll_wait epoll_pwait epoll_pwait2 epoll_ctl poll
ppoll select pselect6`` (waiting on the existing epoll fd; no new epoll fds), ``brk munmap mremap
madvise``, ``rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait
sigaltstack pause restart_syscall setitimer getitimer alarm``, ``clock_gettime clock_getres
gettimeofday time nanosleep clock_nanosleep``, ``getrandom``, ``sched_yield
sched_getaffinity``, ``getpid gettid getppid getuid geteuid getgid getegid getresuid getresgid
getgroups getrusage times uname getcwd getrlimit``, ``exit exit_group``. These are systemd's
``@default``, ``@basic-io``, ``@io-event``, ``@signal``, ``@timer`` and a few read-only members of
``@system-service`` (systemd.exec(5), SystemCallFilter=), minus everything that creates an fd.

*Allowed with argument filters* (the idea and most of the choices follow Chromium's
``sandbox/linux/seccomp-bpf-helpers/syscall_parameters_restrictions`` helpers such as
``RestrictMmapFlags``, ``RestrictMprotectFlags``, ``RestrictFcntlCommands``, ``RestrictIoctl``,
``RestrictPrctl``, ``RestrictKillTarget`` and ``RestrictPrlimit``; comparisons are libseccomp's
``SCMP_CMP_EQ``/``SCMP_CMP_MASKED_EQ`` from seccomp_rule_add(3); several comparisons in one rule
are ANDed, several rules for one syscall are ORed; an argument that matches no rule gets the
default ``EPERM``):

- ``mmap``, ``mprotect``: only without ``PROT_EXEC`` (write-xor-execute, as systemd's
  ``MemoryDenyWriteExecute=``). CPython needs no new executable memory; already-mapped code stays
  executable. ``pkey_mprotect`` is denied. Side effect: a ctypes/libffi callback cannot be created.
- ``newfstatat``: only with ``AT_EMPTY_PATH`` (glibc >= 2.33 implements ``fstat(fd)`` as
  ``newfstatat(fd, "", buf, AT_EMPTY_PATH)``). Plain ``os.stat(path)`` is denied. Known gap: a raw
  syscall with ``AT_EMPTY_PATH`` and a non-empty path could still read a file's metadata (never its
  contents); seccomp cannot look at the path string.
- ``fcntl``: only ``F_GETFD F_SETFD F_GETFL F_SETFL`` (``os.set_blocking``, ``set_inheritable``).
  ``F_DUPFD*`` would create fds; ``F_SETOWN``/``F_SETSIG`` could direct SIGIO at another process.
- ``ioctl``: only ``TCGETS`` (isatty), ``TIOCGWINSZ``, ``FIONREAD``, ``FIONBIO``
  (``socket.setblocking``/``settimeout``), ``FIOCLEX``/``FIONCLEX``. Notably ``TIOCSTI`` (typing
  into a terminal) is denied. Request numbers come from the `termios` module, so they are right for
  the running architecture.
- ``prctl``: only ``PR_GET_DUMPABLE PR_GET_NAME PR_GET_SECCOMP PR_GET_NO_NEW_PRIVS``. In
  particular ``PR_SET_DUMPABLE`` (which an unprivileged process may otherwise set back to 1) is
  denied.
- ``futex``: only the plain operations glibc uses for mutexes, condition variables and
  semaphores (``WAIT WAKE REQUEUE CMP_REQUEUE WAKE_OP WAIT_BITSET WAKE_BITSET``, private or not);
  the priority-inheritance operations (``*_PI``, the path of CVE-2014-3153) are denied, as in
  Chromium's ``RestrictFutex``. ``futex_waitv`` is denied.
- ``kill``: only with the worker's own pid; ``tgkill``: only with its own pid as tgid and tid (the
  worker is single-threaded). ``os.kill(os.getppid(), 0)``, ``kill(0, ...)``, ``kill(-1, ...)``,
  ``tkill`` and ``rt_*sigqueueinfo`` fail with EPERM. Signals the kernel sends (``SIGALRM`` from
  ``setitimer``, ``SIGXCPU``) need no syscall.
- ``prlimit64``: only ``pid == 0`` and ``new_limit == NULL`` (glibc's ``getrlimit``); setting a
  limit is denied. ``setrlimit`` is denied.
- ``clone3``: fails with ``ENOSYS`` rather than EPERM, the convention from moby/moby#42681 (also
  containerd, systemd): glibc's ``posix_spawn``/``pthread_create`` then fall back to ``clone``,
  whose EPERM is what CPython reports. clone3's flags live in a struct that seccomp cannot read.

*Killed on sight* (``SCMP_ACT_KILL_PROCESS``; the worker dies with SIGSYS): ``ptrace
process_vm_readv process_vm_writev process_madvise process_mrelease pidfd_getfd kcmp bpf
perf_event_open userfaultfd io_uring_setup io_uring_enter io_uring_register keyctl add_key
request_key kexec_load kexec_file_load init_module finit_module delete_module mount umount2
pivot_root move_mount open_tree fsopen fsconfig fsmount fspick mount_setattr unshare setns
personality modify_ldt iopl ioperm reboot swapon swapoff acct quotactl quotactl_fd syslog
open_by_handle_at name_to_handle_at lookup_dcookie fanotify_init uselib vhangup``: the debugging,
kernel-module, mount, namespace, keyring, raw-I/O, cpu-emulation and reboot groups of systemd
(``@debug @module @mount @keyring @raw-io @cpu-emulation @reboot @swap``), the kernel attack
surface named in Firejail's default seccomp list, and ``io_uring``/``userfaultfd``/``bpf``
(frequent kernel-exploit primitives).

EPERM or kill? Both stop the syscall before the kernel runs it, so neither is more secure for the
call itself; the difference is what happens next. The rule used here: a syscall that ordinary
Python reaches through the standard library (``open``, ``socket``, ``os.fork``, ``subprocess``,
``os.exec*``, ``os.system``, ``os.kill``, ``os.chroot``, ``os.memfd_create``, threads, ...) gets
EPERM, so a model that tries it gets a `PermissionError` it can read and adapt to, and the session
survives. A syscall that no standard-library function of Python 3.11 issues (``ptrace``,
``process_vm_*``, ``bpf``, ``io_uring``, ``mount``, ``unshare``/``setns``, module loading, ...)
can only be reached after the script already escaped the Python-level restrictions (e.g. through
ctypes); then the process is killed at once, so an attacker cannot probe the kernel call by call,
and the host sees an unambiguous SIGSYS it can report as a sandbox violation. (Chromium makes the
same split: its ``RestrictCloneToThreadsAndEPERMFork`` answers fork with EPERM, while unexpected
syscalls crash the process.)

Other notes
-----------
- ``RLIMIT_NPROC`` counts processes per *user*, and the kernel ignores it for uid 0 in the initial
  user namespace (and for CAP_SYS_RESOURCE/CAP_SYS_ADMIN). It binds workers, which run as uid
  65534, but a pool that skips the uid layer as root has root workers; what really blocks
  ``fork``/``vfork``/``clone``/``clone3`` is seccomp.
- ``RLIMIT_CPU`` counts the worker's whole lifetime (CPU time restarts at 0 after ``fork``), not
  one script; per-script timeouts belong to the runtime (``setitimer``). At the soft limit the
  kernel sends SIGXCPU (fatal unless handled), at the hard limit (soft + 1) SIGKILL.
- ``RLIMIT_FSIZE = 0`` makes a write that would grow a regular file fail with ``EFBIG`` (CPython
  ignores SIGXFSZ, so it is an `OSError`, not a crash). Pipes and sockets are unaffected.
- ``RLIMIT_AS`` counts virtual memory, including what the worker inherited from the zygote.
- After lockdown nothing new can be imported (imports need ``open``); the zygote must import
  everything beforehand. ``asyncio.run()``/``new_event_loop()`` need ``epoll_create1`` and
  ``socketpair`` and so fail; the worker must create its loop before `lock_down` and keep its fds.
- fds 0, 1 and 2 are closed unless kept: the runtime should not rely on ``sys.stdout``.
- ``getcwd`` stays allowed (CPython's import machinery calls it and only catches
  FileNotFoundError), so a worker can learn the zygote's working directory: the zygote should
  ``chdir('/')``. Workers also share the zygote's string-hash seed and ASLR layout.
- Importing this module (in the zygote) compiles the filter once (about 2 ms, plus pyseccomp's own
  import, which runs ``ldconfig`` to find libseccomp) and records where the environment block is.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import resource
import signal
import termios
import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ['LockdownLimits', 'available_layers', 'lock_down', 'prepare_zygote', 'require_single_thread']

# <linux/prctl.h>
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_PR_GET_NAME = 16
_PR_GET_SECCOMP = 21
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2
# <fcntl.h>, <sys/mman.h>, <linux/capability.h>
_AT_EMPTY_PATH = 0x1000
_PROT_EXEC = 0x4
# <linux/futex.h>: WAIT, WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP, WAIT_BITSET, WAKE_BITSET; the
# command is the operation without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256).
_FUTEX_OPERATIONS = (0, 1, 3, 4, 5, 9, 10)
_FUTEX_CMD_MASK = 0xFFFFFFFF & ~(128 | 256)
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

try:  # import now, in the zygote: a forked worker should not have to open files to build its filter
    import pyseccomp as _seccomp
except Exception as _error:  # RuntimeError when libseccomp.so.2 is missing
    _seccomp = None
    _seccomp_error: str | None = f'pyseccomp/libseccomp cannot be loaded: {_error}'
else:
    _seccomp_error = None

_libc = ctypes.CDLL(None, use_errno=True)
for _name in ('prctl', 'clearenv', 'capset'):
    getattr(_libc, _name)  # resolve now, in the zygote, not in a forked child
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_libc.prctl.restype = ctypes.c_int

_locked = False
#: `prepare_zygote` ran in this process (or the zygote this worker was forked from).
_inherited = False


# ----- public API ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockdownLimits:
    """Resource limits a worker gets; soft and hard limits are set to the same value unless noted.

    `None` (where allowed) leaves a limit as inherited from the zygote.
    """

    #: RLIMIT_AS, bytes of virtual memory (including what was inherited from the zygote).
    address_space: int | None = 2 * 1024**3
    #: RLIMIT_CPU, seconds of CPU time over the worker's life: SIGXCPU at this soft limit,
    #: SIGKILL at the hard limit, which is one second later.
    cpu_seconds: int | None = 60
    #: RLIMIT_NOFILE: the highest fd number + 1 a new fd may get (only fds received from the host
    #: over the channel can be new after lockdown).
    open_files: int = 64
    #: RLIMIT_FSIZE, bytes: 0 means writes may not grow any regular file (EFBIG).
    file_size: int = 0
    #: RLIMIT_NPROC. Per user, and ignored by the kernel for root: as root this does nothing, and
    #: seccomp is what really blocks fork/clone. Kept for non-root deployments.
    processes: int = 0
    #: RLIMIT_CORE, bytes: 0 means no core dumps.
    core: int = 0

    def __post_init__(self) -> None:
        for name in ('address_space', 'cpu_seconds', 'open_files', 'file_size', 'processes', 'core'):
            value = getattr(self, name)
            if value is None and name in ('address_space', 'cpu_seconds'):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f'LockdownLimits.{name} must be a non-negative int, not {value!r}')

    def rlimits(self) -> list[tuple[int, int, int]]:
        """The (resource, soft, hard) triples `lock_down` sets."""
        triples = [
            (resource.RLIMIT_NOFILE, self.open_files, self.open_files),
            (resource.RLIMIT_FSIZE, self.file_size, self.file_size),
            (resource.RLIMIT_NPROC, self.processes, self.processes),
            (resource.RLIMIT_CORE, self.core, self.core),
        ]
        if self.address_space is not None:
            triples.append((resource.RLIMIT_AS, self.address_space, self.address_space))
        if self.cpu_seconds is not None:
            triples.append((resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1))
        return triples


_layers: dict[str, str | None] | None = None
_layers_lock = threading.Lock()


def available_layers() -> dict[str, str | None]:
    """Which lockdown layers this machine supports.

    Returns ``{'seccomp': None, 'rlimits': None, 'no_new_privs': None}`` where a value is None when
    the layer is available, or a reason string when it is not. The first call forks one short-lived
    probe process (a few milliseconds) that loads the real seccomp filter; the answer is cached for
    the life of the process. The caller itself is not changed. (The namespaces and the uid are
    probed by entering them: `corral.worker.namespaces.enter`.) Raises `RuntimeError` when that
    first call comes from a process where another thread runs: a fork beside it could hang.
    """
    global _layers
    with _layers_lock:
        if _layers is None:
            _layers = _probe_layers()
        return dict(_layers)


def prepare_zygote() -> None:
    """The steps of `lock_down` that forked workers inherit, done once in the zygote.

    Clears the environment, drops all capabilities and sets ``PR_SET_NO_NEW_PRIVS``; a worker
    forked afterwards has all three already, and its `lock_down` skips them (it still verifies
    the result). Call it after the namespaces are made, which needs the capabilities.
    """
    global _inherited
    _clear_environment()
    _drop_capabilities()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _inherited = True


def lock_down(*, keep_fds: Collection[int], limits: LockdownLimits, seccomp: bool = True) -> None:
    """Irreversibly lock down the calling process, which must be single-threaded.

    In order: check the process is single-threaded and every fd in `keep_fds` is open; get the
    seccomp filter ready (it is compiled once, when this module is imported in the zygote; if that
    failed, it is built now, so a failure happens before anything irreversible); clear the environment
    (`os.environ`, libc's ``environ``, and the initial environment block); close every fd not in
    `keep_fds`; set `limits`; drop all capabilities; set ``PR_SET_NO_NEW_PRIVS`` and
    ``PR_SET_DUMPABLE = 0``; load the seccomp allow-list (unless ``seccomp=False``, for machines
    where `available_layers()` says it is missing); verify. See the module docstring for what the
    allow-list permits.

    Raises `RuntimeError` if called twice or from a multi-threaded process, `ValueError` for a
    `keep_fds` entry that is not an open fd, `OSError` if a step fails. After an exception the
    process may be partly locked down: the caller must not run a script in it, only ``os._exit``.
    """
    global _locked
    if _locked:
        raise RuntimeError('lock_down() was already called in this process')
    keep = _check_keep_fds(keep_fds)
    require_single_thread('lock_down()')
    load_filter = _filter_loader(os.getpid()) if seccomp else None
    _locked = True
    if not _inherited:
        _clear_environment()
    _close_fds(keep)
    _set_rlimits(limits)
    if not _inherited:
        _drop_capabilities()
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _prctl(_PR_SET_DUMPABLE, 0)
    if load_filter is not None:
        load_filter()
    _verify(seccomp=load_filter is not None)


# ----- steps --------------------------------------------------------------------------------------


def _prctl(option: int, arg2: int = 0) -> int:
    result = _libc.prctl(option, arg2, 0, 0, 0)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f'prctl({option}, {arg2}) failed: {os.strerror(code)}')
    return result


def _check_keep_fds(keep_fds: Collection[int]) -> frozenset[int]:
    keep = frozenset(keep_fds)
    for fd in keep:
        if not isinstance(fd, int) or isinstance(fd, bool) or fd < 0:
            raise ValueError(f'keep_fds must hold file descriptor numbers, not {fd!r}')
        try:
            os.fstat(fd)
        except OSError as error:
            raise ValueError(f'keep_fds: fd {fd} is not open ({error.strerror})') from None
    return keep


def require_single_thread(what: str) -> None:
    """Raise `RuntimeError` ('`what` needs a single-threaded process: ...') if another Python
    or native thread runs in this process."""
    if threading.active_count() != 1:
        raise RuntimeError(f'{what} needs a single-threaded process: Python threads are running')
    try:
        threads = len(os.listdir('/proc/self/task'))
    except OSError:
        return  # no /proc: the Python-level check above is all we have
    if threads != 1:
        raise RuntimeError(f'{what} needs a single-threaded process: native threads are running')


def _clear_environment() -> None:
    os.environ.clear()  # unsetenv() for each key, which also empties the C environ
    _libc.clearenv()
    if _initial_environment is not None:
        # clearenv() only dropped the pointers; the strings the kernel put on the stack at exec are
        # still what /proc/self/environ (or any read of this memory) shows.
        start, end = _initial_environment
        ctypes.memset(start, 0, end - start)


def _find_initial_environment() -> tuple[int, int] | None:
    """Where the kernel put the environment strings at exec (env_start, env_end of proc(5)).

    None unless the block lies inside one writable mapping (then zeroing it is safe). Found once,
    when this module is imported (in the zygote): forked workers have the same addresses.
    """
    try:
        with open('/proc/self/stat', 'rb') as stat:
            fields = stat.read().rpartition(b')')[2].split()
        start, end = int(fields[47]), int(fields[48])  # fields[0] is field 3; these are 50 and 51
        if not 0 < start < end:
            return None
        with open('/proc/self/maps', 'rb') as maps:
            for line in maps:
                span, perms = line.split()[:2]
                low, high = (int(part, 16) for part in span.split(b'-'))
                if low <= start and end <= high:
                    return (start, end) if perms.startswith(b'rw') else None
    except (OSError, ValueError, IndexError):
        pass
    return None


def _close_fds(keep: frozenset[int]) -> None:
    """Close every fd not in `keep`, one `close_range(2)` (via `os.closerange`) per gap.

    The upper bound is the highest fd ``/proc/self/fd`` lists; without /proc, the fd limit.
    """
    try:
        top = max(int(name) for name in os.listdir('/proc/self/fd')) + 1
    except (OSError, ValueError):
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        top = soft if 0 <= soft <= 1 << 20 else 1 << 20
    low = 0
    for fd in sorted(keep):
        if low < fd:
            os.closerange(low, fd)
        low = fd + 1
    if low < top:
        os.closerange(low, top)


def _set_rlimits(limits: LockdownLimits) -> None:
    """Set each limit, never above the hard limit already in force (that would need privilege)."""
    for which, soft, hard in limits.rlimits():
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        try:
            resource.setrlimit(which, (soft, hard))
        except ValueError as error:
            raise OSError(errno.EPERM, f'setrlimit({which}, {soft}, {hard}) failed: {error}') from None


class _CapHeader(ctypes.Structure):
    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [('effective', ctypes.c_uint32), ('permitted', ctypes.c_uint32), ('inheritable', ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """Clear the ambient, effective, permitted and inheritable capability sets."""
    try:
        _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError as error:
        if error.errno != errno.EINVAL:  # EINVAL: kernel < 4.3 has no ambient set
            raise
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f'capset() failed to drop capabilities: {os.strerror(code)}')


def _verify(*, seccomp: bool) -> None:
    if _prctl(_PR_GET_NO_NEW_PRIVS) != 1:
        raise RuntimeError('lock_down(): PR_SET_NO_NEW_PRIVS did not take effect')
    if _prctl(_PR_GET_DUMPABLE) != 0:
        raise RuntimeError('lock_down(): PR_SET_DUMPABLE did not take effect')
    if seccomp and _prctl(_PR_GET_SECCOMP) != _SECCOMP_MODE_FILTER:
        raise RuntimeError('lock_down(): the seccomp filter is not in force')


# ----- the seccomp filter -------------------------------------------------------------------------

_ALLOW = (
    # I/O on fds the worker already has
    'read', 'readv', 'pread64', 'preadv', 'preadv2',
    'write', 'writev', 'pwrite64', 'pwritev', 'pwritev2',
    'lseek', 'close', 'fstat',
    'sendto', 'recvfrom', 'sendmsg', 'recvmsg', 'sendmmsg', 'recvmmsg', 'shutdown',
    'getsockopt', 'getsockname', 'getpeername',
    'epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'epoll_ctl', 'poll', 'ppoll', 'select', 'pselect6',
    # memory (mmap and mprotect are in _allow_with_arguments)
    'brk', 'munmap', 'mremap', 'madvise',
    # signals and timers
    'rt_sigaction', 'rt_sigprocmask', 'rt_sigreturn', 'rt_sigpending', 'rt_sigsuspend',
    'rt_sigtimedwait', 'sigaltstack', 'pause', 'restart_syscall', 'setitimer', 'getitimer', 'alarm',
    'clock_gettime', 'clock_getres', 'gettimeofday', 'time', 'nanosleep', 'clock_nanosleep',
    # randomness, scheduling (futex is in _allow_with_arguments)
    'getrandom', 'sched_yield', 'sched_getaffinity',
    # read-only process information
    'getpid', 'gettid', 'getppid', 'getuid', 'geteuid', 'getgid', 'getegid', 'getresuid',
    'getresgid', 'getgroups', 'getrusage', 'times', 'uname', 'getcwd', 'getrlimit',
    # leaving
    'exit', 'exit_group',
)

_KILL = (
    # debugging / other processes' memory (systemd @debug)
    'ptrace', 'process_vm_readv', 'process_vm_writev', 'process_madvise', 'process_mrelease',
    'pidfd_getfd', 'kcmp', 'perf_event_open',
    # frequent kernel-exploit primitives
    'bpf', 'userfaultfd', 'io_uring_setup', 'io_uring_enter', 'io_uring_register',
    # keyring (@keyring), kernel image and modules (@reboot, @module)
    'keyctl', 'add_key', 'request_key', 'kexec_load', 'kexec_file_load', 'init_module',
    'finit_module', 'delete_module', 'reboot',
    # mounts and namespaces (@mount, RestrictNamespaces=)
    'mount', 'umount2', 'pivot_root', 'move_mount', 'open_tree', 'fsopen', 'fsconfig', 'fsmount',
    'fspick', 'mount_setattr', 'unshare', 'setns',
    # cpu emulation and raw I/O (@cpu-emulation, @raw-io), obsolete or admin-only
    'personality', 'modify_ldt', 'iopl', 'ioperm', 'swapon', 'swapoff', 'acct', 'quotactl',
    'quotactl_fd', 'syslog', 'open_by_handle_at', 'name_to_handle_at', 'lookup_dcookie',
    'fanotify_init', 'uselib', 'vhangup',
)


def _syscall_number(name: str) -> int | None:
    """The native number of `name`, or None when this architecture (or libseccomp) lacks it."""
    if _seccomp is None:
        return None
    number = _seccomp.resolve_syscall(_seccomp.Arch.NATIVE, name)
    return number if number >= 0 else None


def _build_filter(pid: int) -> Any:
    """The worker's seccomp filter (a `pyseccomp.SyscallFilter`, not yet loaded)."""
    sc = _seccomp
    if sc is None:
        raise OSError(errno.ENOSYS, _seccomp_error)
    EQ, MASKED_EQ, Arg = sc.EQ, sc.MASKED_EQ, sc.Arg
    syscall_filter = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    syscall_filter.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    syscall_filter.set_attr(sc.Attr.CTL_NNP, 1)
    try:
        syscall_filter.set_attr(sc.Attr.CTL_OPTIMIZE, 2)  # binary tree: fewer BPF steps per call
    except OSError:
        pass  # libseccomp < 2.5

    def add(action: int, name: str, *args: Any) -> None:
        number = _syscall_number(name)
        if number is not None:
            syscall_filter.add_rule(action, number, *args)

    for name in _ALLOW:
        add(sc.ALLOW, name)

    no_exec = Arg(2, MASKED_EQ, _PROT_EXEC, 0)
    add(sc.ALLOW, 'mmap', no_exec)
    add(sc.ALLOW, 'mprotect', no_exec)
    add(sc.ALLOW, 'newfstatat', Arg(3, MASKED_EQ, _AT_EMPTY_PATH, _AT_EMPTY_PATH))
    for command in (fcntl.F_GETFD, fcntl.F_SETFD, fcntl.F_GETFL, fcntl.F_SETFL):
        add(sc.ALLOW, 'fcntl', Arg(1, EQ, command))
    for request in (termios.TCGETS, termios.TIOCGWINSZ, termios.FIONREAD, termios.FIONBIO,
                    termios.FIOCLEX, termios.FIONCLEX):
        add(sc.ALLOW, 'ioctl', Arg(1, EQ, request))
    for option in (_PR_GET_DUMPABLE, _PR_GET_NAME, _PR_GET_SECCOMP, _PR_GET_NO_NEW_PRIVS):
        add(sc.ALLOW, 'prctl', Arg(0, EQ, option))
    for operation in _FUTEX_OPERATIONS:
        add(sc.ALLOW, 'futex', Arg(1, MASKED_EQ, _FUTEX_CMD_MASK, operation))
    add(sc.ALLOW, 'kill', Arg(0, EQ, pid))
    add(sc.ALLOW, 'tgkill', Arg(0, EQ, pid), Arg(1, EQ, pid))
    add(sc.ALLOW, 'prlimit64', Arg(0, EQ, 0), Arg(2, EQ, 0))
    add(sc.ERRNO(errno.ENOSYS), 'clone3')

    kill = sc.KILL_PROCESS
    for name in _KILL:
        try:
            add(kill, name)
        except OSError:  # a kernel without SECCOMP_RET_KILL_PROCESS (< 4.14)
            kill = sc.KILL
            add(kill, name)
    return syscall_filter


class _SockFprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]


_PR_SET_SECCOMP = 22
_BPF_JMP_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
#: Stands for the worker's pid while the filter is compiled once in the zygote: above any pid
#: (pid_max is at most 2**22) and unlike every other constant in the filter.
_PID_PLACEHOLDER = 0x7E57AB1E


class _FilterTemplate:
    """The filter compiled to BPF once, with the pid comparisons patched in for each worker.

    Building the rules and generating BPF with libseccomp costs about 1.5 ms; doing it once in the
    zygote and patching the pid (the only per-worker value, in the ``kill``/``tgkill`` rules) into
    the program brings a worker's share down to a ``prctl(PR_SET_SECCOMP)``. The program's buffer
    and its ``sock_fprog`` are made here too, and a worker patches its own copy of them in place
    (fork gives it one): building them in each worker cost it some 40 page faults (measured).
    """

    def __init__(self) -> None:
        program = _export_bpf(_build_filter(_PID_PLACEHOLDER))
        if len(program) % 8:
            raise ValueError('libseccomp exported a malformed BPF program')
        self._slots = [
            offset
            for offset in range(0, len(program), 8)
            if int.from_bytes(program[offset:offset + 2], 'little') == _BPF_JMP_JEQ_K
            and int.from_bytes(program[offset + 4:offset + 8], 'little') == _PID_PLACEHOLDER
        ]
        if len(self._slots) != 3:  # kill: pid; tgkill: tgid, tid
            raise ValueError(f'expected 3 pid comparisons in the BPF program, found {len(self._slots)}')
        self._patched = bytearray(program)
        self._buffer = (ctypes.c_char * len(program)).from_buffer(self._patched)
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        self._fprog_address = ctypes.addressof(self._fprog)

    def load(self, pid: int) -> None:
        """Load the filter with `pid` in its pid comparisons (in this process's copy of the program)."""
        patched, pid_bytes = self._patched, pid.to_bytes(4, 'little')
        for offset in self._slots:
            patched[offset + 4:offset + 8] = pid_bytes
        if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, self._fprog_address, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f'loading the seccomp filter failed: {os.strerror(code)}')


def _export_bpf(syscall_filter: Any) -> bytes:
    read_end, write_end = os.pipe()
    try:
        with open(write_end, 'wb', closefd=True) as writer:
            syscall_filter.export_bpf(writer)
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
        return b''.join(chunks)
    finally:
        os.close(read_end)


def _filter_loader(pid: int) -> Any:
    """A function that loads the filter for `pid`: from the template, else built on the spot."""
    template = _template
    if template is not None:
        return lambda: template.load(pid)
    return _build_filter(pid).load


# ----- probing ------------------------------------------------------------------------------------


def _probe_layers() -> dict[str, str | None]:
    layers: dict[str, str | None] = {'seccomp': None, 'rlimits': None, 'no_new_privs': None}
    try:
        resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError) as error:
        layers['rlimits'] = f'resource limits are not available: {error}'
    layers['seccomp'] = _seccomp_error
    child = _run_probe_child(try_seccomp=layers['seccomp'] is None)
    for key, value in child.items():
        if layers.get(key) is None:
            layers[key] = value
    return layers


def _run_probe_child(*, try_seccomp: bool) -> dict[str, str | None]:
    """Fork a child that tries the layers on itself and reports over a pipe; `RuntimeError` in a
    process where another thread runs (the child could wait forever on a lock it held)."""
    require_single_thread('probing the lockdown layers (it forks)')
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        reason = f'cannot fork a probe process: {error}'
        return {'seccomp': reason, 'no_new_privs': reason}
    if pid == 0:  # the probe: never returns
        try:
            os.close(read_end)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            report: dict[str, str | None] = {}
            try:
                _prctl(_PR_SET_NO_NEW_PRIVS, 1)
                report['no_new_privs'] = None
            except OSError as error:
                report['no_new_privs'] = f'prctl(PR_SET_NO_NEW_PRIVS) failed: {error.strerror}'
            if try_seccomp:
                try:
                    _filter_loader(os.getpid())()
                    report['seccomp'] = None if _prctl(_PR_GET_SECCOMP) == _SECCOMP_MODE_FILTER else 'the filter did not take effect'
                except OSError as error:
                    report['seccomp'] = f'loading a seccomp filter failed: {error}'
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    try:
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_end)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # SIGCHLD ignored (as in the zygote): the kernel reaped it
            pass
    try:
        report = json.loads(b''.join(chunks) or b'null')
    except ValueError:
        report = None
    if not isinstance(report, dict):
        reason = 'the probe process died before reporting'
        return {'seccomp': reason if try_seccomp else None, 'no_new_privs': reason}
    return report


# Done once at import, in the zygote, so that forked workers inherit the results.
_initial_environment = _find_initial_environment()
_template: _FilterTemplate | None
try:
    _template = _FilterTemplate() if _seccomp is not None else None
except (OSError, ValueError):  # lock_down() then builds the filter in the worker with libseccomp
    _template = None
