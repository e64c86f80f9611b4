"""A manage.py command on the embedded PostgreSQL (what `make run` is) ends, saying why, when
its server stops under it, instead of serving on without a database (found by a new user's
run: a stray SIGINT reached the postmaster only, and the server logged a failed cycle every
tick until it was killed)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_a_command_ends_when_its_embedded_postgresql_stops_under_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("DJANGO_")}
    env.update(JOBDASH_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1")
    command = [sys.executable, "manage.py", "shell", "-c", "import time; print('up', flush=True); time.sleep(120)"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        assert wait_until(lambda: process.stdout.readline().strip() == "up", 60), "the command never started"
        pid_file = tmp_path / "var" / "postgres" / "data" / "postmaster.pid"
        postmaster = int(pid_file.read_text().splitlines()[0])
        os.kill(postmaster, signal.SIGKILL)
        started = time.monotonic()
        assert wait_until(lambda: process.poll() is not None, 20), "the command served on without its database"
        said = process.stdout.read()
        assert process.returncode == 1 and time.monotonic() - started < 20
        assert "PostgreSQL stopped under it" in said and "log" in said, said
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
