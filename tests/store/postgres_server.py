"""A throwaway PostgreSQL server for the store tests and benchmark: initdb in a temporary directory,
listening on a free loopback port with password authentication, stopped and removed at the end.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user (or `nobody`
where there is none) through setpriv. The binaries are found on PATH or in Debian's
/usr/lib/postgresql/<version>/bin; without them `start()` raises with what to install.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ['PostgresServer', 'drop_tables', 'find_binaries']

_PROGRAMS = ('initdb', 'pg_ctl', 'postgres')


def find_binaries() -> Path:
    """The directory holding initdb, pg_ctl and postgres; RuntimeError naming the fix when none does."""
    candidates = [Path(p).parent for p in [shutil.which('pg_ctl')] if p]
    candidates += sorted(
        (Path(d) for d in glob.glob('/usr/lib/postgresql/*/bin')),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
        reverse=True,
    )
    for directory in candidates:
        directory = directory.resolve()
        if all((directory / program).is_file() for program in _PROGRAMS):
            return directory
    raise RuntimeError(
        'the PostgreSQL store tests need a PostgreSQL server (initdb, pg_ctl and postgres on PATH or in '
        "/usr/lib/postgresql/<version>/bin); install it with 'apt-get install -y postgresql' (.ci/run does)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class PostgresServer:
    """One server: `url` connects as the superuser `corral` to the database `postgres`."""

    def __init__(self) -> None:
        self.binaries = find_binaries()
        self.directory = Path(tempfile.mkdtemp(prefix='corral-postgres-'))
        self.data = self.directory / 'data'
        self.password = secrets.token_hex(12)
        self.port = 0
        self._prefix: list[str] = []
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam('postgres')
                uid, gid = account.pw_uid, account.pw_gid
            except KeyError:
                uid = gid = 65534
            os.chown(self.directory, uid, gid)
            self._prefix = ['setpriv', f'--reuid={uid}', f'--regid={gid}', '--clear-groups']
        os.chmod(self.directory, 0o700)
        password_file = self.directory / 'password'
        password_file.write_text(self.password)
        if self._prefix:
            os.chown(password_file, uid, gid)
        self._run(
            'initdb', '-D', str(self.data), '-U', 'corral', '--auth=scram-sha-256', f'--pwfile={password_file}',
            '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions',
        )

    def _run(self, program: str, *args: str) -> None:
        command = [*self._prefix, str(self.binaries / program), *args]
        result = subprocess.run(command, capture_output=True, text=True, cwd=self.directory, env=_environment())
        if result.returncode != 0:
            raise RuntimeError(f'{program} failed ({result.returncode}): {result.stdout}{result.stderr}')

    @property
    def url(self) -> str:
        return f'postgresql://corral:{self.password}@127.0.0.1:{self.port}/postgres'

    def start(self, *, same_port: bool = False) -> None:
        """Start on a free port (another one if that port was taken meanwhile), or on the port it had."""
        for attempt in range(5):
            if not same_port:
                self.port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='{self.directory}'"
            )
            try:
                self._run('pg_ctl', '-D', str(self.data), '-l', str(self.directory / 'log'), '-o', options, '-w', 'start')
                return
            except RuntimeError:
                if attempt == 4:
                    raise RuntimeError(f'PostgreSQL did not start: {self.log()}') from None

    def stop(self) -> None:
        self._run('pg_ctl', '-D', str(self.data), '-m', 'fast', '-w', 'stop')

    def log(self) -> str:
        try:
            return (self.directory / 'log').read_text()[-2000:]
        except OSError:
            return '(no log)'

    def remove(self) -> None:
        """Stop the server if it runs, and delete its directory."""
        if (self.data / 'postmaster.pid').exists():
            self._run('pg_ctl', '-D', str(self.data), '-m', 'immediate', '-w', 'stop')
        shutil.rmtree(self.directory, ignore_errors=True)


async def drop_tables(url: str) -> None:
    """Drop every table of the database at `url` (its public schema, made anew): the next store on it
    starts from nothing, whichever tables the tests before it made."""
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        await connection.execute('DROP SCHEMA public CASCADE; CREATE SCHEMA public')
    finally:
        await connection.close()


def _environment() -> dict[str, str]:
    # The server and its tools need no more than a PATH and a C locale.
    return {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'LC_ALL': 'C'}
