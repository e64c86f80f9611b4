"""How long a newcomer waits for `make run`: from a fresh clone to a server that answers,
and from a warm one (its .venv and var/ kept) after Ctrl-C.

    python -m bench.make_run_start [--ref HEAD] [--repo .] [--runs 1]

Each run clones `--repo` at `--ref` into a new directory, runs `make run` there exactly as the
README says (no DATABASE_URL; the machine's pip cache as it is), and times it until
/healthz answers 200, then until a one-second batch Job submitted through the REST API has
Succeeded (the admission cycle works). Then Ctrl-C (SIGINT to the whole process group, as a
terminal sends it), `make run` again in the same clone, the same two times. Any ref works,
so that main of the day and older references are measured in the same sitting. Prints one
JSON line; goals (issue 45): fresh ready <= 60 s, warm ready <= 20 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB_LIMIT_S = 90.0  # from ready to the first job's success, at most
JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: team-a, annotations: {kubesim.io/duration-seconds: "1"}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


def _start(clone: Path, port: int, log: Path, started: float, limit: float) -> tuple[subprocess.Popen, float]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "JOBDASH_VAR_DIR"}}
    env.update(PORT=str(port), JOBDASH_ADMIN_PASSWORD="bench-Admin-1", PYTHONUNBUFFERED="1")
    with open(log, "ab") as out:
        process = subprocess.Popen(
            ["make", "run"], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    while _http("GET", f"http://127.0.0.1:{port}/healthz")[0] != 200:
        if process.poll() is not None or time.monotonic() - started > limit:
            raise SystemExit(f"make run did not answer in {limit:.0f} s; see {log}")
        time.sleep(0.1)
    return process, time.monotonic() - started


def _token(clone: Path) -> str:
    """The admin's API token, made with manage.py beside the running stack (its database)."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(
        [str(clone / ".venv/bin/python"), "manage.py", "drf_create_token", "admin"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r"\b([0-9a-f]{40})\b", done.stdout + done.stderr)
    if not found:
        raise SystemExit(f"no token: {done.stdout} {done.stderr}")
    return found.group(1)


def _job_succeeded(port: int, token: str, name: str, started: float, limit: float) -> float | None:
    """Seconds from the start until the job Succeeded; None if it had not within `limit`
    (a stack whose dispatcher never completes a cycle, as main's on SQLite before issue 45)."""
    headers = {"Authorization": f"Token {token}"}
    status, body = _http(
        "POST", f"http://127.0.0.1:{port}/api/v1/jobs/", (JOB % name).encode(),
        {**headers, "Content-Type": "application/yaml"},
    )  # fmt: skip
    if status != 201:
        raise SystemExit(f"submit answered {status}: {body[:200]!r}")
    job_id = json.loads(body)["id"]
    while time.monotonic() - started < limit:
        status, body = _http("GET", f"http://127.0.0.1:{port}/api/v1/jobs/{job_id}/", headers=headers)
        if status == 200 and json.loads(body)["state"] == "Succeeded":
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def _interrupt(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def one_run(repo: Path, ref: str, limit: float) -> dict:
    home = Path(tempfile.mkdtemp(prefix="jobdash-start-"))
    clone = home / "jobdash"
    log = home / "make-run.log"
    result: dict = {}
    try:
        subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", ref], check=True)
        for phase in ("fresh", "warm"):
            port = _free_port()
            started = time.monotonic()
            process, ready = _start(clone, port, log, started, limit)
            try:
                token = _token(clone)
                result[f"{phase}_ready_s"] = round(ready, 1)
                succeeded = _job_succeeded(port, token, f"{phase}-job", started, ready + JOB_LIMIT_S)
                result[f"{phase}_first_job_s"] = None if succeeded is None else round(succeeded, 1)
            finally:
                _interrupt(process)
        result["var_mib"] = round(sum(f.stat().st_size for f in (clone / "var").rglob("*") if f.is_file()) / 2**20)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=str(ROOT), help="the repository to clone (default: this checkout)")
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--limit", type=float, default=600.0, help="seconds a start may take before giving up")
    args = parser.parse_args()
    ref = subprocess.run(
        ["git", "-C", args.repo, "rev-parse", "--short", args.ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    runs = [one_run(Path(args.repo), ref, args.limit) for _ in range(args.runs)]
    summary = {key: [run[key] for run in runs] for key in runs[0]}
    print(
        json.dumps(
            {
                "bench": "make_run_start",
                "ref": ref,
                "runs": summary,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "load": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
