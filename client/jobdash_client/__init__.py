"""A small client for jobdash's REST API, for notebooks and scripts.

from jobdash_client import Client
jd = Client("http://127.0.0.1:8000", token="...")
job = jd.submit("examples/mnist-cpu.yaml", priority=10)
print(job.state, job.position, job.reason, job.eta, job.eta_late)
jobs = jd.submit_many(["a.yaml", "b.yaml"])  # one request: all are queued, or none
evaluate = jd.submit("evaluate.yaml", after=["ok:train"], retry_limit=2, max_run_seconds=7200)
sweep = jd.submit("sweep.yaml", array="0-99%5")  # a list: one job per index, {{index}} replaced
pipeline = jd.submit_workflow("pipeline.yaml")  # a stream led by a jobdash.io/v1 Workflow document
print(jd.workflow(pipeline.id).progress_text())  # 1/3 Succeeded, 1 Running, 1 Queued

jd.wait(job.id, until="finished")
jd.checkpointed(job)  # from inside the running job: it has just written a checkpoint
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, overload

import requests
import yaml

from .options import Moment, Options, moment_text, option_fields, query_parameters
from .workflows import Workflow, WorkflowJob

if TYPE_CHECKING:
    from typing import Unpack  # (Python 3.11; the annotations are not evaluated at run time)

__all__ = [
    "Client",
    "Job",
    "JobdashError",
    "FieldError",
    "FINISHED",
    "Unreachable",
    "WaitTimeout",
    "Workflow",
    "WorkflowJob",
]

FINISHED = ("Succeeded", "Failed", "Cancelled")
UNTIL = ("Released", "Running", *FINISHED, "finished")
_ORDER = ("Queued", "Released", "Running")
PAGE_SIZE = 500  # the server's largest: fewer requests for a long list


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        # No path: the problem is the request's or the whole manifest's, and its message says so.
        return f"{self.path}: {self.message}" if self.path else self.message


class JobdashError(Exception):
    """The server refused: `status` is the HTTP status, `errors` the problems with field paths."""

    def __init__(self, status: int, errors: list[FieldError]):
        self.status = status
        self.errors = errors
        super().__init__(f"HTTP {status}: " + "; ".join(str(e) for e in errors))


class Unreachable(JobdashError):
    """No answer from the server at all (refused, unknown host, TLS, timeout): `status` is 0."""

    def __init__(self, server: str, problem: str):
        self.server = server
        self.problem = problem
        self.status = 0
        self.errors = [FieldError("", problem)]
        Exception.__init__(self, f"cannot reach {server}: {problem}")


class WaitTimeout(TimeoutError):
    def __init__(self, job: Job, until: str):
        self.job = job
        super().__init__(f"job {job.id} is still {job.state} (waited for {until})")


@dataclass(frozen=True)
class Job:
    id: int
    namespace: str
    name: str
    kind: str
    state: str
    priority: int
    position: int | None
    reason: str
    message: str
    eta: str | None  # the likely start (as many jobs start after it as before), ISO 8601
    demand: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False)
    priority_class: str = ""
    eta_late: str | None = None  # the late bound: 90 % of jobs start by then
    predicted_duration_s: float | None = None  # the likely run time
    predicted_p90_s: float | None = None  # 90 % of such jobs finish within it
    predicted_tail_s: float | None = None  # ... 99 % (by default): what lent nodes are admitted by
    prediction_source: str = ""  # which history predicted it: "user+name", ..., "none"
    past_late_bound: bool = False  # queued after the late bound it was first given
    workflow: int | None = None  # the workflow (graph or array) it belongs to
    array_index: int | None = None
    dependencies: Sequence[Mapping[str, Any]] = ()  # {"job", "name", "condition", "state"}: what it waits for
    retries: int = 0  # retries made after failures its policy retries
    retry_limit: int | None = None
    failure: Mapping[str, Any] | None = None  # its last failure: {"class", "message", "exit_code"}
    max_run_seconds: float | None = None  # stopped (DeadlineExceeded) once it has run this long
    start_by: str | None = None  # cancelled if still queued then (ISO 8601)
    checkpoint_every_s: float | None = None  # it writes a checkpoint this often
    checkpoint_on_notice_s: float | None = None  # it needs this long after a notice to write one
    min_runtime_s: float | None = None  # not preempted before it has run this long
    last_checkpoint_at: str | None = None  # the last checkpoint it reported (ISO 8601)
    checkpoints: int = 0  # checkpoints reported while it ran

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Job:
        return cls(
            id=data["id"],
            namespace=data["namespace"],
            name=data["name"],
            kind=data.get("kind", ""),
            state=data["state"],
            priority=data["priority"],
            position=data.get("position"),
            reason=data.get("reason", ""),
            message=data.get("message", ""),
            eta=data.get("eta"),
            demand=data.get("demand", {}),
            raw=data,
            priority_class=data.get("priority_class") or "",
            eta_late=data.get("eta_late"),
            predicted_duration_s=data.get("predicted_duration_s"),
            predicted_p90_s=data.get("predicted_p90_s"),
            predicted_tail_s=data.get("predicted_tail_s"),
            prediction_source=data.get("prediction_source") or "",
            past_late_bound=bool(data.get("past_late_bound")),
            workflow=data.get("workflow"),
            array_index=data.get("array_index"),
            dependencies=tuple(data.get("dependencies") or ()),
            retries=data.get("retries") or 0,
            retry_limit=data.get("retry_limit"),
            failure=data.get("failure"),
            max_run_seconds=data.get("max_run_seconds"),
            start_by=data.get("start_by"),
            **{key: data.get(key) for key in ("checkpoint_every_s", "checkpoint_on_notice_s", "min_runtime_s")},
            last_checkpoint_at=data.get("last_checkpoint_at"),
            checkpoints=data.get("checkpoints") or 0,
        )

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def describe(self) -> str:
        if self.state == "Queued":
            where = f"#{self.position}" if self.position else "not yet placed"
            eta = f", {_start_range(self.eta, self.eta_late)}" if self.eta else ""
            why = f": {self.reason} — {self.message}" if self.reason else ""
            return f"{self.kind} {self.namespace}/{self.name} Queued {where}{eta}{why}".lstrip()
        why = f": {self.message}" if self.state in ("Failed", "Cancelled") and self.message else ""
        return f"{self.kind} {self.namespace}/{self.name} {self.state}{why}".lstrip()


# Union, not |: the client supports Python 3.9, where a runtime alias cannot use |.
ManifestLike = Union[str, Path, Mapping[str, Any]]  # noqa: UP007


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 30.0, session: requests.Session | None = None):
        self.server = url.rstrip("/")
        self.url = self.server + "/api/v1/"
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    # --- calls ---

    @overload
    def submit(
        self,
        manifest: ManifestLike,
        priority: int = 0,
        namespace: str | None = None,
        priority_class: str | None = None,
        *,
        array: None = None,
        **options: Unpack[Options],
    ) -> Job: ...

    @overload
    def submit(
        self,
        manifest: ManifestLike,
        priority: int = 0,
        namespace: str | None = None,
        priority_class: str | None = None,
        *,
        array: str,
        **options: Unpack[Options],
    ) -> list[Job]: ...

    def submit(
        self,
        manifest: ManifestLike,
        priority: int = 0,
        namespace: str | None = None,
        priority_class: str | None = None,
        *,
        array: str | None = None,
        **options: Unpack[Options],
    ) -> Job | list[Job]:
        """Submit a training job: a path to a YAML file, YAML text, or a dict. `priority_class`
        names a PriorityClass of the cluster (within your namespace's limit); a numeric
        `priority` is for staff only.

        Workflow options (jobdash_client.options.Options; each over the manifest's
        jobdash.io/* annotation): `after`, its dependencies ("ok:NAME", "any:ID",
        "notok:NAME"; a bare name or id means ok); `keep_if_never_satisfied`; retries after
        failures of the classes `retry_on` (NodeLost, Evicted, Preempted, ImagePull,
        OOMKilled, ExitCode, Unknown) or of the exit codes `retry_exit_codes`, at most
        `retry_limit` of them, the first after `retry_backoff_seconds` (doubling);
        `max_run_seconds`; `start_by` (an RFC 3339 time, a datetime, or a duration such as
        "2h" from now): cancelled if still queued then.
        With `array` ("0-99", "0-99%5", "1,3,5-7", "0-15:4") one job per index, `{{index}}`
        replaced by it in the manifest, the name suffixed -INDEX (unless it holds {{index}}):
        the answer is the list of the jobs, which form one workflow."""
        body = {**_submission(manifest, priority, namespace, priority_class), **option_fields(**options)}
        if array is not None:
            body["array"] = array
            return [Job.from_json(j) for j in self._request("POST", "jobs/", json=body)]
        return Job.from_json(self._request("POST", "jobs/", json=body))

    def submit_many(
        self,
        manifests: Iterable[ManifestLike],
        priority: int = 0,
        namespace: str | None = None,
        priority_class: str | None = None,
        **options: Unpack[Options],
    ) -> list[Job]:
        """Submit several jobs in one request (each a path, YAML text or a dict, as for
        `submit`; the options, `submit`'s workflow options too, apply to each): the server
        queues all of them, in order, or none. A refusal's error paths start with the index
        of the manifest at fault, `[2].spec...`. At most the server's JOBDASH_BULK_MAX_JOBS
        (1000 by default) per call."""
        fields = option_fields(**options)
        body = [{**_submission(m, priority, namespace, priority_class), **fields} for m in manifests]
        return [Job.from_json(j) for j in self._request("POST", "jobs/", json=body)]

    def submit_workflow(
        self,
        *documents: ManifestLike,
        namespace: str | None = None,
        priority_class: str | None = None,
        **options: Unpack[Options],
    ) -> Workflow:
        """Submit one workflow: a YAML stream (text or a file) whose first document is
        `apiVersion: jobdash.io/v1, kind: Workflow, metadata: {name: NAME}` (optionally
        `spec: {concurrency: N}`), its jobs after it; or the documents one by one, the
        Workflow first. The jobs may name each other in their jobdash.io/after annotations;
        all are queued or none (a cycle or an unknown name is refused). `submit`'s workflow
        options apply to each job."""
        text = "\n---\n".join(_manifest_text(document) for document in documents)
        params: list[tuple[str, str]] = query_parameters(option_fields(**options))
        if namespace:
            params.append(("namespace", namespace))
        if priority_class:
            params.append(("priority_class", priority_class))
        headers = {"Content-Type": "application/yaml"}
        answer = self._request("POST", "workflows/", data=text.encode(), params=params, headers=headers)
        return Workflow.from_json(answer)

    def workflows(self, namespace: str | None = None) -> list[Workflow]:
        """Every workflow you may see (newest first), with its jobs' count per state."""
        params = {"namespace": namespace} if namespace else {}
        return [Workflow.from_json(w) for w in self._pages("workflows/", {**params, "page_size": PAGE_SIZE})]

    def workflow(self, workflow_id: int) -> Workflow:
        """A workflow with its jobs: their states, reasons and what each waits for."""
        return Workflow.from_json(self._request("GET", f"workflows/{workflow_id}/"))

    def cancel_workflow(self, workflow_id: int) -> Workflow:
        """Cancel every active job of the workflow."""
        return Workflow.from_json(self._request("POST", f"workflows/{workflow_id}/cancel/"))

    def set_priority_class(self, job_id: int, name: str) -> Job:
        """Change a Queued job's priority class (and with it its priority)."""
        return Job.from_json(self._request("POST", f"jobs/{job_id}/priority_class/", json={"priority_class": name}))

    def requeue(self, job_id: int, reason: str = "") -> Job:
        """Staff only: put a Released or Running job back in the queue."""
        return Job.from_json(self._request("POST", f"jobs/{job_id}/requeue/", json={"reason": reason}))

    def checkpointed(self, job: int | Job, at: Moment | None = None) -> Job:
        """The running job wrote a checkpoint (at `at`: an RFC 3339 time or a datetime; default
        now, by the server's clock): its `checkpoints` count goes up, `last_checkpoint_at` is kept.
        A job that is not Running is refused (409)."""
        job_id = job.id if isinstance(job, Job) else job
        body = {} if at is None else {"at": moment_text(at)}
        return Job.from_json(self._request("POST", f"jobs/{job_id}/checkpoints/", json=body))

    def get(self, job_id: int) -> Job:
        return Job.from_json(self._request("GET", f"jobs/{job_id}/"))

    def events(self, job_id: int) -> list[dict]:
        return list(self._request("GET", f"jobs/{job_id}/").get("events", []))

    def jobs(
        self,
        namespace: str | None = None,
        state: str | None = None,
        kind: str | None = None,
        name: str | None = None,
        name_contains: str | None = None,
        mine: bool = False,
    ) -> list[Job]:
        """Every job you may see that matches: `name` exactly, `name_contains` a part of it in any
        case; `mine`: only the caller's own jobs (also those created with kubectl as the same person)."""
        given = {"namespace": namespace, "state": state, "kind": kind, "name": name, "name_contains": name_contains}
        params = {k: v for k, v in given.items() if v}
        if mine:
            params["mine"] = "true"
        return [Job.from_json(j) for j in self._pages("jobs/", {**params, "page_size": PAGE_SIZE})]

    def queue(self, namespace: str) -> list[Job]:
        """Pending jobs of a namespace in admission order."""
        return [Job.from_json(j) for j in self._pages(f"namespaces/{namespace}/queue/", {})]

    def cancel(self, job_id: int) -> Job:
        return Job.from_json(self._request("POST", f"jobs/{job_id}/cancel/"))

    def usage(self, from_day: str | None = None, to_day: str | None = None, group_by: Sequence[str] = ()) -> dict:
        """GPU-, CPU- and memory-hours over UTC days (YYYY-MM-DD, both included; the server's
        default: this month so far), grouped by any of namespace, user, kind, priority_class,
        day, borrowed: {"from", "to", "group_by", "rows"}."""
        given = {"from": from_day, "to": to_day, "group_by": ",".join(group_by)}
        return dict(self._request("GET", "usage/", params={k: v for k, v in given.items() if v}))

    def status(self) -> dict:
        """GET /api/v1/status/: the leader, the last cycle, job counts per state, and
        "dispatcher": whether jobs are being released ({"healthy", "cause", "message", ...})."""
        return dict(self._request("GET", "status/"))

    def wait(
        self,
        job_id: int,
        until: str = "finished",
        *,
        timeout: float | None = None,
        poll: float = 2.0,
        progress: Callable[[str], None] | None = None,
    ) -> Job:
        """Block until the job is `until` (Released, Running: or further), or finished; prints
        each change. A job that ends is returned whatever `until` was: check its state."""
        if until not in UNTIL:
            raise ValueError(f"until must be one of {', '.join(UNTIL)}, not {until!r}")
        say = progress if progress is not None else (lambda line: print(line, file=sys.stderr))
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            job = self.get(job_id)
            line = job.describe()
            if line != last:
                say(line)
                last = line
            if _reached(job, until):
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(job, until)
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    # --- plumbing ---

    def _request(self, method: str, path: str, **kwargs) -> Any:
        return self._call(method, self.url + path, **kwargs)

    def _call(self, method: str, url: str, **kwargs) -> Any:
        try:
            response = self.session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.Timeout:
            raise Unreachable(self.server, f"no answer within {self.timeout:g}s") from None
        except requests.ConnectionError as error:
            raise Unreachable(self.server, _connection_problem(error)) from None
        if response.status_code >= 400:
            raise JobdashError(response.status_code, _errors(response))
        return response.json()

    def _pages(self, path: str, params: dict) -> Iterator[dict]:
        page = self._request("GET", path, params=params)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            page = self._call("GET", page["next"])


def _reached(job: Job, until: str) -> bool:
    if job.finished:
        return True  # nothing more will happen
    if until == "finished" or until in FINISHED:
        return False
    return _ORDER.index(job.state) >= _ORDER.index(until)


def _connection_problem(error: requests.ConnectionError) -> str:
    """One plain sentence for why no answer came, instead of urllib3's chain of wrappers."""
    text = str(error)
    if isinstance(error, requests.exceptions.SSLError):
        if "CERTIFICATE_VERIFY_FAILED" in text:
            return "its TLS certificate is not trusted here (self-signed, or another host's name?)"
        if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text or "unknown protocol" in text:
            return "it does not speak TLS there (is the URL http://, not https://?)"
        return "the TLS handshake failed (is the URL's scheme and host right?)"
    if "Connection refused" in text:
        return "connection refused (is jobdash running there?)"
    if "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "unknown host"
    if "RemoteDisconnected" in text or "Connection aborted" in text:
        return "it closed the connection without answering (an https:// server asked with http://?)"
    return text.splitlines()[0][:200]


def _start_range(likely: str, late: str | None) -> str:
    """ "likely start 2026-11-24 14:20 UTC, by 15:05 UTC at the latest (90 %)": fixed times,
    not "in 12 min", so that wait() prints a line only when the estimate changes."""
    likely_at, late_at = _moment(likely), _moment(late) if late else None
    if likely_at is None:
        shown = f"likely start {likely}"
    else:
        shown = f"likely start {likely_at:%Y-%m-%d %H:%M} UTC"
    if not late:
        return shown
    if late_at is None or likely_at is None:
        return f"{shown}, by {late} at the latest (90 %)"
    day = "" if late_at.date() == likely_at.date() else f"{late_at:%Y-%m-%d} "
    return f"{shown}, by {day}{late_at:%H:%M} UTC at the latest (90 %)"


def _moment(text: str) -> datetime | None:
    """An API time (ISO 8601, "Z" for UTC) in UTC; None if it does not read as one."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except (TypeError, ValueError):
        return None
    utc = timezone.utc  # noqa: UP017 (the client supports Python 3.9, which has no datetime.UTC)
    return moment.astimezone(utc) if moment.tzinfo else moment.replace(tzinfo=utc)


def _submission(
    manifest: ManifestLike, priority: int, namespace: str | None, priority_class: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"manifest": _manifest_text(manifest)}
    if priority:
        body["priority"] = priority
    if priority_class:
        body["priority_class"] = priority_class
    if namespace:
        body["namespace"] = namespace
    return body


def _manifest_text(manifest: ManifestLike) -> str:
    if isinstance(manifest, Mapping):
        return yaml.safe_dump(dict(manifest), sort_keys=False)
    if isinstance(manifest, Path):
        return manifest.read_text()
    if "\n" not in manifest and manifest.endswith((".yaml", ".yml")) and Path(manifest).exists():
        return Path(manifest).read_text()
    return manifest


def _errors(response: requests.Response) -> list[FieldError]:
    try:
        body = response.json()
        return [FieldError(e.get("path", ""), e.get("message", "")) for e in body.get("errors", [])]
    except ValueError:
        if response.headers.get("Content-Type", "").startswith("text/html"):
            # A page, not the API's answer (a path this server does not have, a proxy's error):
            # say what was asked, not the page's markup.
            request = response.request
            asked = f"{request.method} {response.url}" if request is not None else response.url
            return [
                FieldError("", f"{response.status_code} {response.reason} for {asked}: not an answer of jobdash's API")
            ]
        return [FieldError("", response.text[:500] or response.reason)]
