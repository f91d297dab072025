"""A real PostgreSQL server for the store's tests: initialized in a temporary folder, on
127.0.0.1 and a free port (its socket in that folder too), stopped and deleted at the end.
``initdb`` refuses to run as root, so as root the server runs as the ``postgres`` user.
Each test gets a database of its own (:meth:`PostgresServer.new_database`)."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

from clawbot.store.postgres.migrate import migrate

USER = "clawbot"


def _bin_dir() -> Path:
    """Where initdb and pg_ctl are: $CLAWBOT_TEST_PG_BIN, Debian's folder of the newest
    version, or the PATH."""
    configured = os.environ.get("CLAWBOT_TEST_PG_BIN")
    if configured:
        return Path(configured)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL is not installed (no initdb): apt-get install postgresql")
    return Path(initdb).parent


def _version(path: str) -> int:
    try:
        return int(Path(path).parent.parent.name)
    except ValueError:
        return 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One server for a test session. ``start``, then ``new_database`` per test, ``stop``."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.folder = Path(tempfile.mkdtemp(prefix="clawbot-pg-"))
        self.port = _free_port()
        self._names = itertools.count(1)
        self._as: list[str] = []
        self._template = ""
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, cwd=self.folder)

    def start(self) -> None:
        data = self.folder / "data"
        self._run(
            str(self.bin / "initdb"), "-D", str(data), "-U", USER, "--auth=trust",
            "--encoding=UTF8", "--no-sync",
        )  # fmt: skip
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder}"
            " -c fsync=off -c full_page_writes=off"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.folder / "log"),
            "-w", "-o", options, "start",
        )  # fmt: skip

    def stop(self) -> None:
        try:
            self._run(
                str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate",
                "stop",
            )  # fmt: skip
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str, user: str = USER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def database_of(self, role: str) -> str:
        """The URL of a new empty database owned by ``role``, a login that is no superuser
        (made if new), reached as that role: what a managed server's user has."""
        name = f"test_{next(self._names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if found is None:
                conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER")
            conn.execute(f"CREATE DATABASE {name} OWNER {role}")
        return self.url(name, role)

    def new_database(self, *, migrated: bool = False) -> str:
        """The URL of a new database: empty, or (``migrated``) a copy of one clawbot's
        migrations were applied to once, which is ten times faster than migrating again."""
        if migrated and not self._template:
            self._template = self.new_database()
            with psycopg.connect(self._template, autocommit=True) as conn:
                migrate(conn, "the template")
        name = f"test_{next(self._names)}"
        template = f" TEMPLATE {self._template.rsplit('/', 1)[1]}" if migrated else ""
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}{template}")
        return self.url(name)
