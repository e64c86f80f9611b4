"""The `jobdash` command: submit, list, queue, describe, cancel, checkpointed, wait, watch,
workflows, workflow, usage, status and login, on top of jobdash_client.Client. `jobdash COMMAND --help` says more."""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import requests
import yaml

from . import (
    FINISHED,
    Client,
    FieldError,
    Job,
    JobdashError,
    Unreachable,
    WaitTimeout,
    cli_options,
    cli_parser,
    cli_status,
    cli_usage,
)
from . import cli_output as out
from .cli_config import ConfigError, config_path, resolve, write_config

# wait's exit codes: reached, ended in another final state, timed out; and any error.
REACHED, OTHER_END, TIMED_OUT, WAIT_ERROR = 0, 1, 2, 3


class Failure(Exception):
    """A one-line error for stderr."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    error_code = WAIT_ERROR if args.command == "wait" else 1
    try:
        return int(args.run(args))
    except BrokenPipeError:
        return _reader_gone()
    except (Failure, ConfigError, Unreachable) as error:
        _say(str(error))
    except JobdashError as error:
        _say(_refused(error, getattr(args, "subject", "")))
    except requests.exceptions.JSONDecodeError as error:  # a 2xx answer that is not JSON
        _say(f"{_server(args)} did not answer as jobdash's API does ({error}); is the server URL right?")
    except requests.RequestException as error:
        _say(f"request to {_server(args)} failed: {error}")
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # never a traceback, unless asked for
        if os.environ.get("JOBDASH_DEBUG"):
            raise
        _say(f"unexpected error: {type(error).__name__}: {error} (JOBDASH_DEBUG=1 shows the traceback)")
    return error_code


# --- commands ---


def login(args: argparse.Namespace) -> int:
    server = getattr(args, "server", None) or os.environ.get("JOBDASH_URL")
    token = getattr(args, "token", None) or os.environ.get("JOBDASH_TOKEN")
    if not server:
        raise Failure("login needs --server URL (or JOBDASH_URL)")
    if not token and sys.stdin.isatty():
        token = getpass.getpass("Token: ")
    if not token:
        raise Failure("login needs --token (or JOBDASH_TOKEN)")
    if not server.startswith(("http://", "https://")):
        raise Failure(f"the server must be an http:// or https:// URL, not {server!r}")
    path = config_path()
    write_config(path, server, token)
    print(f"Saved the server {server} and its token to {path}")
    return 0


def submit(args: argparse.Namespace) -> int:
    """One manifest: one job (or with --array, one job per index). Several (files, or
    documents of a file): one bulk request, so every job is queued or none is; a file led by
    a jobdash.io/v1 Workflow document: one workflow of the jobs after it."""
    client, manifests = _client(args), _manifests(args.files)
    options = cli_options.from_args(args)
    texts = [text for _, text in manifests]
    workflow = cli_options.declares_workflow(texts[0])
    _check_submission(args, manifests, workflow)
    labels = [label for label, _ in manifests]  # (a workflow's errors count its header as [0], as the file does)
    jobs = len(labels) - (1 if workflow else 0)
    try:
        if workflow:
            submitted = client.submit_workflow(
                *texts, namespace=args.namespace, priority_class=args.priority_class, **options
            )
            _show(args, out.workflow_data(submitted), lambda: out.describe_workflow(submitted))
            return 0
        if args.array is not None:
            created = client.submit(
                texts[0], args.priority, args.namespace, args.priority_class, array=args.array, **options
            )
        elif len(manifests) == 1:
            created = [client.submit(texts[0], args.priority, args.namespace, args.priority_class, **options)]
        else:
            created = client.submit_many(texts, args.priority, args.namespace, args.priority_class, **options)
    except JobdashError as error:
        if error.status in (401, 404):
            raise  # the same for every file
        problems: list[FieldError | None] = list(error.errors) or [None]
        for problem in problems:
            label, detail = _located(problem, labels)
            _say(f"{label + ': ' if label else ''}refused (HTTP {error.status})" + (f": {detail}" if detail else ""))
        if jobs > 1:
            _say(f"nothing was submitted: the {jobs} jobs go in one request, all or none")
        return 1
    human = out.submitted_rows(created)
    if args.array is not None and created:
        workflow_id = created[0].workflow
        human += f"\narray {workflow_id}: {len(created)} jobs (jobdash workflow {workflow_id} describes it)"
    _show(args, out.to_data(created), lambda: human)
    return 0


def _check_submission(args: argparse.Namespace, manifests: list[tuple[str, str]], workflow: bool) -> None:
    """What the command can tell at once: an array is of one manifest, a workflow is its own file."""
    heads = [label for label, text in manifests[1:] if cli_options.declares_workflow(text)]
    if heads:
        raise Failure(f"{heads[0]}: a Workflow document comes first, in a file submitted on its own")
    if workflow and len(args.files) > 1:
        raise Failure(f"{_label(args.files[0])}: a workflow file is submitted on its own")
    if workflow and args.array is not None:
        raise Failure("--array makes an array of one manifest, not of a workflow")
    if args.array is not None and len(manifests) > 1:
        raise Failure(f"--array makes an array of one manifest; {len(manifests)} were given")


def _located(problem: FieldError | None, labels: list[str]) -> tuple[str, str]:
    """(the label of the manifest at fault, the problem within it); a bulk request's paths
    start with the manifest's index, `[2].spec...`. No label for the request as a whole."""
    if problem is None:
        return (labels[0] if len(labels) == 1 else ""), ""
    if len(labels) == 1:
        return labels[0], str(problem)
    found = re.match(r"\[(\d+)\]\.?", problem.path)
    if found is None or int(found.group(1)) >= len(labels):
        return "", str(problem) if problem.path else problem.message
    return labels[int(found.group(1))], str(FieldError(problem.path[found.end() :], problem.message))


def list_jobs(args: argparse.Namespace) -> int:
    jobs = _client(args).jobs(
        namespace=args.namespace,
        state=args.state,
        kind=args.kind,
        name=args.name,
        name_contains=args.name_contains,
        mine=args.mine,
    )
    _show(args, out.to_data(jobs), lambda: out.job_rows(jobs) if jobs else "No jobs.")
    return 0


def queue(args: argparse.Namespace) -> int:
    args.subject = f"namespace {args.namespace}"
    jobs = _client(args).queue(args.namespace)
    _show(args, out.to_data(jobs), lambda: out.queue_rows(jobs))
    return 0


def describe(args: argparse.Namespace) -> int:
    args.subject = f"job {args.id}"
    job = _client(args).get(args.id)
    _show(args, out.to_data(job), lambda: out.describe(job))
    return 0


def cancel(args: argparse.Namespace) -> int:
    client, cancelled, failed = _client(args), [], False
    for job_id in args.ids:
        try:
            cancelled.append(client.cancel(job_id))
        except JobdashError as error:
            if error.status == 401:
                raise
            failed = True
            _say(_refused(error, f"job {job_id}"))
    if cancelled:
        _show(args, out.to_data(cancelled), lambda: "\n".join(f"job {j.id} {j.describe()}" for j in cancelled))
    return 1 if failed else 0


def checkpointed(args: argparse.Namespace) -> int:
    """The running job wrote a checkpoint (now, or --at)."""
    args.subject = f"job {args.id}"
    job = _client(args).checkpointed(args.id, at=args.at)
    _show(
        args,
        out.to_data(job),
        lambda: (
            f"job {job.id} {job.describe()}: {job.checkpoints} checkpoint{'' if job.checkpoints == 1 else 's'}, "
            f"the last at {out.moment(job.last_checkpoint_at)}"
        ),
    )
    return 0


def usage(args: argparse.Namespace) -> int:
    print(cli_usage.run(_client(args), args))
    return 0


def status(args: argparse.Namespace) -> int:
    return cli_status.run(_client(args), args)


def list_workflows(args: argparse.Namespace) -> int:
    workflows = _client(args).workflows(args.namespace)
    _show(
        args,
        [out.workflow_data(w) for w in workflows],
        lambda: out.workflow_rows(workflows) if workflows else "No workflows.",
    )
    return 0


def workflow(args: argparse.Namespace) -> int:
    args.subject = f"workflow {args.id}"
    client = _client(args)
    shown = client.cancel_workflow(args.id) if args.cancel else client.workflow(args.id)
    _show(args, out.workflow_data(shown), lambda: out.describe_workflow(shown))
    return 0


def wait(args: argparse.Namespace) -> int:
    args.subject = f"job {args.id}"
    until = args.state
    progress = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        job = _client(args).wait(args.id, until, timeout=args.timeout, poll=args.poll, progress=progress)
    except WaitTimeout as timeout:
        print(f"job {args.id}: still {timeout.job.state} after {args.timeout:g}s (waited for {args.state})")
        return TIMED_OUT
    if _reached(job, args.state):
        print(f"job {job.id}: {job.state}" + ("" if job.state == args.state else f" (it got to {args.state})"))
        return REACHED
    why = f": {job.message}" if job.message else ""
    print(f"job {job.id}: {job.state}, not {args.state}{why}")
    return OTHER_END


def watch(args: argparse.Namespace) -> int:
    client = _client(args)
    what = f"queue {args.namespace}" if args.namespace else "queues of all namespaces"
    first = True
    try:
        while True:
            try:
                jobs = _waiting(client, args.namespace)
                shown = out.dump(out.to_data(jobs), args.output) if args.output else None
                if shown is None:
                    shown = out.queue_rows(jobs, namespaces=not args.namespace)
                    shown = f"{out.banner(what, None if args.once else args.interval)}\n\n{shown}"
            except (requests.RequestException, JobdashError) as error:
                if first:
                    raise
                problem = error if isinstance(error, (Unreachable, requests.RequestException)) else _refused(error, "")
                shown = f"{out.banner(what, args.interval)}\n\nerror: {problem}"
            first = False
            if args.output == "yaml" and not args.once:
                shown = "---\n" + shown
            elif args.output is None and not args.once and sys.stdout.isatty():
                shown = "\033[H\033[2J" + shown  # redraw in place, like watch(1)
            print(shown, flush=True)
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


# --- plumbing ---


def _client(args: argparse.Namespace) -> Client:
    settings = resolve(getattr(args, "server", None), getattr(args, "token", None))
    args.resolved_server = settings.server
    return Client(settings.server, settings.token, timeout=args.request_timeout)


def _server(args: argparse.Namespace) -> str:
    return getattr(args, "resolved_server", None) or "the server"


def _show(args: argparse.Namespace, data: Any, human: Callable[[], str]) -> None:
    print(out.dump(data, args.output) if args.output else human())


def _manifests(files: Sequence[str]) -> list[tuple[str, str]]:
    """(label, YAML text) per job: each file (`-` is stdin), split at `---` when it holds several."""
    manifests = []
    for name in files:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
        except OSError as error:
            raise Failure(f"{name}: {error.strerror or error}") from None
        label = _label(name)
        documents = [d for d in re.split(r"(?m)^---[ \t]*(?:#.*)?$\n?", text) if not _empty(d)]
        if len(documents) > 1:
            manifests += [(f"{label} (document {i})", d) for i, d in enumerate(documents, 1)]
        else:
            manifests.append((label, text))
    return manifests


def _label(name: str) -> str:
    return "(stdin)" if name == "-" else name


def _empty(document: str) -> bool:
    try:
        return yaml.safe_load(document) is None
    except yaml.YAMLError:
        return False  # the server says what is wrong with it


def _waiting(client: Client, namespace: str | None) -> list[Job]:
    if namespace:
        return client.queue(namespace)
    jobs = client.jobs(state="Queued")
    return sorted(jobs, key=lambda j: (j.namespace, j.position is None, j.position or 0, j.id))


def _reached(job: Job, state: str) -> bool:
    if state == "finished":
        return job.state in FINISHED
    if state in FINISHED:
        return job.state == state
    if job.state == state or (state == "Released" and job.state == "Running"):
        return True
    # Finished since: it got there if it was released or started on the way.
    return job.state == "Succeeded" or bool(job.raw.get("started_at" if state == "Running" else "released_at"))


def _refused(error: JobdashError, subject: str) -> str:
    detail = "; ".join(str(e) for e in error.errors)
    if error.status == 401:
        return f"not authenticated (HTTP 401: {detail or 'token refused'}): check --token, JOBDASH_TOKEN or `jobdash login`"
    if error.status == 403:
        return f"forbidden (HTTP 403){': ' + detail if detail else ''}"
    if error.status == 404:
        return f"{subject} not found (HTTP 404)" if subject else f"not found (HTTP 404): {detail}"
    about = f"{subject}: " if subject else ""
    return f"{about}refused (HTTP {error.status}){': ' + detail if detail else ''}"


def _reader_gone() -> int:
    """`jobdash ... | head`: the reader left, which is no error of ours. Later writes (the
    interpreter's last flush) go nowhere instead of raising again; 141 is what a command
    killed by SIGPIPE exits with."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def _say(message: str) -> None:
    print(f"jobdash: {message}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    runs = {"login": login, "submit": submit, "list": list_jobs, "queue": queue, "describe": describe}
    runs |= {
        "cancel": cancel,
        "checkpointed": checkpointed,
        "wait": wait,
        "workflows": list_workflows,
        "workflow": workflow,
    }
    runs |= {"usage": usage, "status": status, "watch": watch}
    return cli_parser.parser(runs)


if __name__ == "__main__":
    sys.exit(main())
