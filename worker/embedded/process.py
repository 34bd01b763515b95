"""Process, port, file and lock helpers shared by the embedded servers."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
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
POLL_S = 0.05
LOG_TAIL_LINES = 30
LOG_TAIL_BYTES = 16_384

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


def port_free(port: int) -> bool:
    # SO_REUSEADDR as the servers use it: a port that only has connections in
    # TIME_WAIT is free for them, a port with a listener is not.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def initial_port(port_file: Path, port: int | None) -> int:
    """A constructor's port: the one given, else the one remembered, else a free one
    (provisional until ``settle_port``)."""
    return port if port is not None else (read_int(port_file) or free_port())


def settle_port(port: int, port_file: Path, *, explicit: bool) -> int:
    """The port a server that is not running yet should start on, written to ``port_file``.

    A port remembered from an earlier start is kept, so URLs handed out before
    stay valid. A port picked by the constructor is only provisional: it was
    released right after it was picked, and something (such as the other
    embedded server) may have taken it since.
    """
    if explicit:
        settled = port
    else:
        remembered = read_int(port_file)
        settled = remembered or (port if port_free(port) else free_port())
    write_text_atomic(port_file, f"{settled}\n")
    return settled


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def write_text_atomic(path: Path, text: str) -> None:
    # A reader in another process never sees a half-written port file.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def reap_if_child(pid: int) -> None:
    # A server we forked ourselves stays a zombie until we wait for it.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def pid_state(pid: int) -> str:
    """``"alive"``, ``"zombie"`` (dead, not yet reaped) or ``"gone"``."""
    if pid <= 0:
        return "gone"
    reap_if_child(pid)
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


def pid_runs(pid: int, names: tuple[bytes, ...]) -> bool:
    """Whether ``pid`` is a live process whose command line mentions one of ``names``.

    Checking the command line keeps a stale pid file whose number was reused by an
    unrelated process from passing for a running server.
    """
    if pid_state(pid) != "alive":
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


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def tcp_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def log_tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            data = fh.read()
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    lines = data.decode("utf-8", "replace").splitlines()[-LOG_TAIL_LINES:]
    return "\n".join(lines) if lines else f"(log {path} is empty)"


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
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
                time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock



def kill_group(pid: int) -> None:
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


@dataclass(frozen=True)
class Account:
    """Who a server program runs as, when that is not us."""

    uid: int
    gid: int


def run(
    argv: list[str],
    *,
    cwd: Path,
    timeout_s: float,
    account: Account | None = None,
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
