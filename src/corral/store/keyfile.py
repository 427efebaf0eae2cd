"""The state key file of a SQLite store: 32 random bytes beside the database, readable by its owner only.

Whoever can read the key can sign a state that the pool will load, so the file is created with mode
0600 and refused when it is not a regular file of this process's user with no group or other
permissions (a file another user owns could have been planted by them, who then know the key).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from ..errors import SandboxStateError

__all__ = ['KEY_BYTES', 'key_file_path', 'read_or_create_key']

#: Bytes of a state key (HMAC-SHA256's block of security: RFC 2104 recommends a key at least as
#: long as the hash output, 32 bytes).
KEY_BYTES = 32


def key_file_path(database: Path) -> Path:
    """Where the key of the SQLite database `database` lives: beside it, named `<database>.key`."""
    return database.with_name(database.name + '.key')


def read_or_create_key(path: Path) -> bytes:
    """The 32-byte key in the file `path`, created (mode 0600, atomically: two processes creating it
    at once read the same key) when it does not exist.

    Raises `SandboxStateError` naming the file and what to do when it is group- or world-accessible,
    owned by another user, not a regular file, not 32 bytes long, or cannot be read or created.
    """
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    _create_key(path)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as e:
        if os.path.islink(path):
            raise SandboxStateError(f'the state key file {path} is a symbolic link; it must be a regular file') from None
        raise SandboxStateError(f'cannot read the state key file {path}: {e.strerror}') from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SandboxStateError(f'the state key file {path} is not a regular file')
        if info.st_uid != os.geteuid():
            raise SandboxStateError(
                f'the state key file {path} belongs to uid {info.st_uid}, not to this process\'s user '
                f'(uid {os.geteuid()}); whoever owns it knows the key. Remove it to have a new one made, '
                'or pass Pool(state_key=...)'
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise SandboxStateError(
                f'the state key file {path} is accessible to group or others (mode {mode:04o}); anyone who '
                f'can read it can forge stored sessions. Make it owner-only (chmod 600 {path}) and, if others '
                'may have read it, replace it'
            )
        if info.st_size != KEY_BYTES:
            raise SandboxStateError(
                f'the state key file {path} holds {info.st_size} bytes, not {KEY_BYTES}: it is not a key corral made'
            )
        key = os.read(fd, KEY_BYTES)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise SandboxStateError(f'the state key file {path} changed while it was read')
    return key


def _create_key(path: Path) -> None:
    # Written under a temporary name, then linked into place: os.link fails if the name exists, so
    # of two processes creating the key at once one wins and both read the winner's whole key.
    temporary = path.with_name(f'.{path.name}.{secrets.token_hex(8)}.tmp')
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    except OSError as e:
        raise SandboxStateError(f'cannot create the state key file {path}: {e.strerror}') from None
    finally:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
