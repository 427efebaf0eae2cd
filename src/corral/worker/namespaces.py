"""The namespaces and the uid a zygote runs in, built the way nsjail and bubblewrap build theirs.

The process the host starts (`corral.worker.zygote`) enters them once, before it forks the
zygote proper; every worker forked afterwards inherits them, so a checkout pays nothing for them.
In order (`enter`):

1. **uid** (first half): started as root, the process clears its supplementary groups while it
   still may (``setgroups`` is refused inside the user namespace below).
2. **userns**: a new user namespace (``unshare(CLONE_NEWUSER)``), which an ordinary user may make
   where the kernel allows it. A short-lived helper process, still outside, writes its maps:
   ``setgroups`` ``deny``, then uid and gid 65534 inside to the starting euid and egid outside (to
   65534 outside when started as root, which only a process outside may map: user_namespaces(7)).
   The process holds every capability in the new namespace (never outside it), which is what lets
   it make the namespaces below without root.
3. **netns**: an empty network namespace: only a loopback device, left down (no route, even
   ``127.0.0.1`` is unreachable).
4. **mntns**: a mount namespace, every mount made private (nothing propagates to the host). Once the
   zygote has built its worker, `empty_root` mounts an empty read-only tmpfs and makes it the root
   with ``pivot_root``, detaching the host's tree: a worker cannot even ``stat`` a host path.
5. **utsns**: a UTS namespace with the hostname ``sandbox`` and the NIS domain name ``(none)``.
6. **ipcns**: an IPC namespace: no System V IPC object or POSIX message queue of the host.
7. **pidns**: a PID namespace. Its first process, the zygote, is forked next and is its pid 1:
   workers are pid 2, 3 ... and see the zygote as pid 1; neither ``getppid``, ``SO_PEERCRED`` on
   the channel nor any pid a worker can name is a host pid. When pid 1 exits the kernel kills
   every worker. The process the host started stays outside, waits for the zygote and exits with
   its status.
8. **uid** (second half, `drop_uid`): the zygote switches to uid and gid 65534 (``setresuid``,
   ``setresgid``): inside the user namespace that is the mapped id; started as root without one,
   the host's 65534 (``nobody``). An ordinary user without a user namespace already runs
   unprivileged and keeps its uid.

Where a layer cannot be had, `enter` (and the zygote, for `empty_root` and `drop_uid`) records
why, in words that name the setting to change (`REMEDIES`); the host refuses to run scripts unless
the layer is skipped. Nothing falls back silently.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket

from .lockdown import require_single_thread

__all__ = ['HOSTNAME', 'LAYERS', 'REMEDIES', 'SANDBOX_ID', 'drop_uid', 'empty_root', 'enter', 'explain']

#: The layers this module builds, by the names `Pool(skip_layers=...)` takes.
LAYERS = ('userns', 'netns', 'mntns', 'pidns', 'utsns', 'ipcns', 'uid')
#: The uid and gid workers run as (inside the user namespace, or on the host when root starts
#: corral without one): 65534, the overflow id that stands for "nobody" (proc(5), overflowuid).
SANDBOX_ID = 65534
#: The hostname workers see (``uname().nodename``).
HOSTNAME = 'sandbox'

_USERNS = (
    'allow user namespaces: on a host, `sysctl -w user.max_user_namespaces=15000` (and, where they exist, '
    '`kernel.unprivileged_userns_clone=1` and `kernel.apparmor_restrict_unprivileged_userns=0`); in Docker, '
    '`--security-opt seccomp=unconfined` (its default seccomp profile refuses namespaces); in Kubernetes, '
    '`hostUsers: false` in the pod spec, with a seccomp profile that allows unshare(2) (`seccompProfile: {type: Unconfined}`)'
)
_INSIDE_USERNS = (
    'the network, mount, PID, UTS and IPC namespaces are made inside the user namespace (layer userns); '
    'without it, only root with CAP_SYS_ADMIN can make them (in Docker, `--cap-add SYS_ADMIN`)'
)
_MOUNT = (
    'the empty root needs mount(2), which AppArmor profiles of containers refuse: in Docker, '
    '`--security-opt apparmor=unconfined`; in Kubernetes, `appArmorProfile: {type: Unconfined}`'
)
#: How to get each layer where it is missing: the settings that enable it. The host adds the other
#: way on, `skip_layers`.
REMEDIES: dict[str, tuple[str, ...]] = {
    'userns': (_USERNS,),
    'netns': (_INSIDE_USERNS,),
    'pidns': (_INSIDE_USERNS,),
    'utsns': (_INSIDE_USERNS,),
    'ipcns': (_INSIDE_USERNS,),
    'mntns': (_INSIDE_USERNS, _MOUNT),
    'uid': ('root needs CAP_SETUID and CAP_SETGID to switch to uid 65534 (keep them in the container)',),
}

# <sched.h>
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
# <sys/mount.h>
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2

#: Each namespace layer below the user namespace, in the order `enter` makes them, and its flag.
_NAMESPACES = (
    ('netns', _CLONE_NEWNET, 'CLONE_NEWNET'),
    ('mntns', _CLONE_NEWNS, 'CLONE_NEWNS'),
    ('utsns', _CLONE_NEWUTS, 'CLONE_NEWUTS'),
    ('ipcns', _CLONE_NEWIPC, 'CLONE_NEWIPC'),
    ('pidns', _CLONE_NEWPID, 'CLONE_NEWPID'),
)

_libc = ctypes.CDLL(None, use_errno=True)
for _name in ('unshare', 'mount', 'umount2', 'syscall', 'setdomainname'):
    getattr(_libc, _name)  # resolved now, before the host's files are out of reach
_SYS_PIVOT_ROOT = {'x86_64': 155, 'aarch64': 41}.get(os.uname().machine)


def _check(result: int, call: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f'{call} failed: {os.strerror(code)}')


def enter(skip: frozenset[str]) -> dict[str, str | None]:
    """Enter the namespaces not in `skip`, in the order of the module docstring (steps 1-7).

    Returns ``{layer: None or why it is missing}`` for each layer of `LAYERS` not in `skip`
    (``'uid'`` is None here: `drop_uid` does the rest). A layer that fails leaves the process as it
    was for that layer; the others are still tried, so one report names everything missing. Call it
    from a single-threaded process: in a threaded one only the calling thread moves.
    """
    report: dict[str, str | None] = {layer: None for layer in LAYERS if layer not in skip}
    if 'uid' not in skip and os.geteuid() == 0:
        try:
            os.setgroups([])
        except OSError as error:
            # root of a user namespace whose maker denied setgroups keeps the groups it was given
            if error.errno != errno.EPERM or _read('/proc/self/setgroups') != 'deny':
                report['uid'] = f'setgroups([]) failed: {error.strerror}'
    in_userns = False
    if 'userns' not in skip:
        try:
            _enter_user_namespace()
            in_userns = True
        except OSError as error:
            report['userns'] = explain('userns', error, in_userns=False)
    for layer, flag, name in _NAMESPACES:
        if layer in skip:
            continue
        try:
            _check(_libc.unshare(flag), f'unshare({name})')
            if layer == 'mntns':
                _check(_libc.mount(None, b'/', None, _MS_REC | _MS_PRIVATE, None), 'making every mount private')
            elif layer == 'utsns':
                socket.sethostname(HOSTNAME)
                _check(_libc.setdomainname(b'(none)', 6), 'setdomainname')
        except OSError as error:
            report[layer] = explain(layer, error, in_userns=in_userns)
    return report


def _enter_user_namespace() -> None:
    """unshare(CLONE_NEWUSER), with the maps written by a helper forked beforehand (outside);
    `RuntimeError` in a process where another thread runs (the helper could wait forever on a
    lock it held, and unshare(CLONE_NEWUSER) refuses a threaded process)."""
    require_single_thread('entering a user namespace (it forks)')
    me = os.getpid()
    # Root maps the sandbox id to the host's 65534; an ordinary user may map only itself.
    uid = os.geteuid() or SANDBOX_ID
    gid = os.getegid() if os.geteuid() else SANDBOX_ID
    go_read, go_write = os.pipe()
    done_read, done_write = os.pipe()
    helper = os.fork()
    if helper == 0:  # the helper: waits for the namespace, writes its maps, reports, exits
        status = 1
        try:
            os.close(go_write)
            os.close(done_read)
            if os.read(go_read, 1) == b'y':
                try:
                    for name, data in (('setgroups', 'deny'), ('uid_map', f'{SANDBOX_ID} {uid} 1'), ('gid_map', f'{SANDBOX_ID} {gid} 1')):
                        with open(f'/proc/{me}/{name}', 'w') as file:
                            file.write(data)
                    os.write(done_write, b'ok')
                except OSError as error:
                    os.write(done_write, f'writing /proc/PID/{name} failed: {error.strerror}'.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(go_read)
    os.close(done_write)
    try:
        entered = _libc.unshare(_CLONE_NEWUSER) == 0
        code = ctypes.get_errno()
        os.write(go_write, b'y' if entered else b'n')
        answer = os.read(done_read, 4096).decode(errors='replace')
    finally:
        os.close(go_write)
        os.close(done_read)
        os.waitpid(helper, 0)
    if not entered:
        raise OSError(code, f'unshare(CLONE_NEWUSER) failed: {os.strerror(code)}')
    if answer != 'ok':
        raise OSError(errno.EPERM, answer or 'the helper that writes the uid and gid maps died')


def _read(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read().strip()
    except OSError:
        return None


def _sysctl(name: str) -> str | None:
    """The value of a sysctl (``kernel.x`` is ``/proc/sys/kernel/x``), None where it does not exist."""
    return _read('/proc/sys/' + name.replace('.', '/'))


def explain(layer: str, error: OSError, *, in_userns: bool) -> str:
    """Why `layer` could not be had, from the kernel's `error` and the sysctls that cause it."""
    text = str(error) if error.strerror is None else error.strerror
    code = error.errno
    if layer == 'userns':
        if code == errno.EPERM:
            causes = [
                f'the sysctl {name} is {bad}'
                for name, bad in (('kernel.unprivileged_userns_clone', '0'), ('kernel.apparmor_restrict_unprivileged_userns', '1'))
                if _sysctl(name) == bad
            ] or ["a seccomp profile forbids it (Docker's default profile does), or the process is in a chroot"]
            return f"{text} ({'; '.join(causes)})"
        if code in (errno.ENOSPC, errno.EUSERS):
            return f'{text} (the sysctl user.max_user_namespaces is {_sysctl("user.max_user_namespaces")}: 0 forbids them)'
        if code == errno.EINVAL:
            return f'{text} (the kernel was built without user namespaces, CONFIG_USER_NS)'
        return text
    kind = layer.removesuffix('ns')
    if code in (errno.EPERM, errno.EACCES):
        if in_userns or os.geteuid() == 0:
            return f'{text} (a seccomp, AppArmor or SELinux policy forbids it)'
        return f'{text} (it needs CAP_SYS_ADMIN, which an ordinary user has only inside a user namespace: layer userns)'
    if code == errno.ENOSPC:
        return f'{text} (the sysctl user.max_{kind}_namespaces is {_sysctl(f"user.max_{kind}_namespaces")}: 0 forbids them)'
    if code == errno.EINVAL and text.startswith('unshare('):
        return f'{text} (the kernel was built without {kind} namespaces)'
    return text


def empty_root() -> None:
    """Make an empty, read-only tmpfs the root of this mount namespace, and detach the host's tree.

    Called once in the zygote (steps as pivot_root(2) suggests and bubblewrap does): a tmpfs is
    mounted over ``/proc`` (a directory that exists wherever namespaces do; the mount is private to
    this namespace), made the root with ``pivot_root(".", ".")``, the old root detached with
    ``umount2(MNT_DETACH)``, and the tmpfs remounted read-only, ``nosuid,nodev,noexec``. Afterwards
    no path names a host file: ``stat('/etc/passwd')`` is ENOENT, and the host's files are out of
    reach even by a raw syscall. Everything the zygote and its workers need must be loaded before.
    Raises `OSError` naming the step that failed.
    """
    if _SYS_PIVOT_ROOT is None:
        raise OSError(errno.ENOSYS, f'pivot_root: no syscall number known for {os.uname().machine}')
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(_libc.mount(b'tmpfs', b'/proc', b'tmpfs', flags, b'size=4k,nr_inodes=1,mode=0555'), 'mounting an empty tmpfs')
    os.chdir('/proc')
    _check(_libc.syscall(_SYS_PIVOT_ROOT, b'.', b'.'), 'pivot_root')
    _check(_libc.umount2(b'.', _MNT_DETACH), 'detaching the host root')
    os.chdir('/')
    _check(_libc.mount(None, b'/', None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags, None), 'remounting the root read-only')


def drop_uid(*, in_userns: bool) -> None:
    """Switch to uid and gid `SANDBOX_ID` (step 8 of the module docstring). A change of
    credentials clears the parent-death signal (prctl(2)): the caller sets it again.

    A no-op for an ordinary user outside a user namespace (it cannot switch, and is unprivileged
    already). Raises `OSError` when the kernel refuses.
    """
    if not in_userns and os.geteuid() != 0:
        return
    os.setresgid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID)
    os.setresuid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID)

