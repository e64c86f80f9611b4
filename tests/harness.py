"""Start the real services the suite needs, run a command against them, tear them down.

    python tests/harness.py -- python -m pytest

PostgreSQL comes from Debian's server binaries (installed with apt-get when missing and we
are root). It runs from a throwaway directory on a free loopback port; PostgreSQL refuses to
run as root, so as root the cluster is owned and run by the `postgres` user. Redis (the
Celery broker) likewise: Debian's redis-server on a free port, nothing saved to disk.
"""

import contextlib
import glob
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


def postgres_bin() -> Path:
    def found():
        dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name))
        return Path(dirs[-1]) if dirs else None

    if found() is None:
        apt_install("postgresql")
    bin_dir = found()
    if bin_dir is None:
        sys.exit("[harness] PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin")
    return bin_dir


def as_db_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if is_root() else cmd


@contextlib.contextmanager
def postgres():
    bin_dir = postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="jobdash-pg-"))
    data = root / "data"
    if is_root():
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    quiet = {"stdout": subprocess.DEVNULL}
    subprocess.run(
        as_db_owner(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "jobdash", "--auth=trust", "-E", "UTF8", "--no-sync"]
        ),
        check=True,
        **quiet,
    )
    # Durability off: a test database is thrown away, and fsync costs most of the suite's time.
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    # e.g. "-c shared_preload_libraries=pg_stat_statements", to see where a benchmark's database time goes
    options += " " + os.environ.get("HARNESS_POSTGRES_OPTIONS", "")
    subprocess.run(
        as_db_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]),
        check=True,
        **quiet,
    )
    try:
        subprocess.run(
            as_db_owner([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "jobdash", "jobdash"]),
            check=True,
        )
        log(f"PostgreSQL {bin_dir.parent.name} on 127.0.0.1:{port}")
        yield f"postgres://jobdash@127.0.0.1:{port}/jobdash"
    finally:
        subprocess.run(as_db_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]), **quiet)
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
