"""The command sequences of README.md and docs/*.md run in order on a fresh `make run`: every
file they read exists in the checkout or is written earlier in the same document, and no two
submit a job of the same name (the second would be a 409: an active job holds it). Read from
the text, without a stack: each submission's job names come from the example it sends, as
the command sends it (an array's indexes, a stream built with cat, a copy renamed with sed,
a heredoc, a loop). Also: the README says where `jobdash` and `kubectl` come from before it
uses them, and how long a simulated job runs without `kubesim.io/duration-seconds`."""

import re
import shlex
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from queueing.workflows import array_name, parse_array

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(sh|python)\n(.*?)```", re.S)
HEREDOC = re.compile(r"<<-?'?(\w+)'?\n(.*?)\n\1\n", re.S)
EXAMPLE = re.compile(r"examples/[\w./-]+\.ya?ml")


def blocks(document: Path) -> list[tuple[str, str]]:
    return BLOCK.findall(document.read_text())


def job_names(text: str) -> list[str]:
    """The jobs a manifest or stream submits (a Workflow document submits none itself)."""
    names = []
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind") != "Workflow":
            labels = doc["metadata"].get("labels") or {}
            names.append(labels.get("jobdash.io/pod-group") or doc["metadata"]["name"])
    return names


def example_names(path: str, renames: list[tuple[str, str]] = (), array: str | None = None) -> list[str]:
    text = (ROOT / path).read_text()
    for old, new in renames:
        text = text.replace(old, new)
    names = job_names(text)
    if array is None:
        return names
    return [array_name(name, index) for name in names for index in parse_array(array).indexes]


def logical_lines(body: str) -> list[str]:
    """Shell lines with their continuations joined and comments dropped (heredocs kept apart)."""
    joined = re.sub(r"\\\n\s*", " ", body)
    joined = re.sub(r"\|\n\s*", "| ", joined)
    return [line.split(" # ")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def sh_submissions(body: str, written: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """(job names submitted, files read that are neither in the checkout nor written before)."""
    names: list[str] = []
    missing: list[str] = []
    loop = re.search(r"for (\w+) in ([^;]+); do", body)
    for _, heredoc in HEREDOC.findall(body):
        found = job_names(heredoc)
        if loop and f"${loop.group(1)}" in heredoc:  # one object per loop value: a pod group counts once
            found = sorted(set(job_names(heredoc.replace(f"${loop.group(1)}", loop.group(2).split()[0]))))
        names += found
    body = HEREDOC.sub("\n", body)
    for line in logical_lines(body):
        words = shlex.split(line.replace("$(", "( "), comments=True)
        if ">" in words:  # a file written for later: `{ cat a; echo ---; cat b; } > two.yaml`
            written[words[words.index(">") + 1]] = EXAMPLE.findall(line)
        read = [w[1:] for w in words if w.startswith("@") and w != "@-"]
        read += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("<", "-f") and words[i + 1] != "-"]
        if words[:2] == ["jobdash", "submit"]:
            read += [w for w in words[2:] if w.endswith((".yaml", ".yml"))]
        for path in dict.fromkeys(read):
            if path not in written and not (ROOT / path).is_file():
                missing.append(path)
        if not ({"submit", "--data-binary", "-d"} & set(words) or "create" in words and "-f" in words):
            continue
        array = re.search(r"--array (\S+)|[?&]array=([^&'\" ]+)", line)
        spec = unquote(array.group(1) or array.group(2)) if array else None
        renames = re.findall(r"sed 's/([^/]+)/([^/]+)/g'", line)
        for path in dict.fromkeys(p for p in read if p not in ("-",)):
            for source in written.get(path, [path]):
                if source.startswith("examples/"):
                    names += example_names(source, renames, spec)
        if "@-" in words and renames:
            names += example_names(EXAMPLE.findall(line)[0], renames, spec)
    return names, missing


def python_submissions(body: str) -> tuple[list[str], list[str]]:
    paths = re.findall(r"client\.submit(?:_many|_workflow)?\(\[?([^)\]]*)", body)
    files = [p for group in paths for p in re.findall(r"\"(examples/[^\"]+)\"", group)]
    return [n for f in files for n in example_names(f)], [f for f in files if not (ROOT / f).is_file()]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_a_documents_commands_run_in_order_without_a_409_or_a_missing_file(document):
    written: dict[str, list[str]] = {}
    names: list[str] = []
    missing: list[str] = []
    for language, body in blocks(document):
        found, absent = sh_submissions(body, written) if language == "sh" else python_submissions(body)
        names += found
        missing += absent
    assert missing == [], f"{document.name} reads files that exist nowhere: {missing}"
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    assert twice == [], f"{document.name} submits these names twice (409): {twice}"


def test_the_checker_sees_what_the_readme_submits():
    names = []
    written: dict[str, list[str]] = {}
    for language, body in blocks(ROOT / "README.md"):
        names += sh_submissions(body, written)[0] if language == "sh" else python_submissions(body)[0]
    assert {"pytorch-ddp", "ddp", "too-big", "mnist-cpu", "batch-job", "xgboost-iris", "jax-cpu"} <= set(names)
    assert {"dist-mnist-ps", "mpi-horovod", "batch-indexed", "trainjob-torch", "mnist-train", "lr-sweep-119"} <= set(
        names
    )
    # and it would see a 409 and a missing file
    assert sh_submissions("jobdash submit examples/mnist-cpu.yaml - < other.yaml\n", {}) == (
        ["mnist-cpu"],
        ["other.yaml"],
    )
    twice = "jobdash submit examples/workflows/sweep.yaml --array 0-9%3\ncurl --data-binary @examples/workflows/sweep.yaml 'http://x/?array=5-6'\n"
    assert Counter(sh_submissions(twice, {})[0])["lr-sweep-5"] == 2


def test_the_readme_says_where_jobdash_and_kubectl_are_before_using_them():
    readme = (ROOT / "README.md").read_text()
    first_use = min(
        match.start() for match in BLOCK.finditer(readme) if re.search(r"^(kubectl|jobdash) ", match.group(2), re.M)
    )
    said = readme.find("`source .venv/bin/activate` puts `jobdash`, `kubectl`")
    assert 0 <= said < first_use
    assert ".venv/bin/jobdash" in readme[:said] and ".venv/bin/kubectl" in readme[:said]


def test_the_readme_says_how_long_a_simulated_job_runs_as_make_run_configures_it():
    config = yaml.safe_load((ROOT / "jobdash/embedded/embedded_cluster.yaml").read_text())
    default = config["workload"]["default_duration_seconds"]
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The simulated cluster", 1)[1].split("\n## ", 1)[0]
    assert "kubesim.io/duration-seconds" in section
    assert f"runs {default:g} s (`workload: {{default_duration_seconds: {default}}}`" in section
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        if "kubesim.io/duration-seconds" not in example.read_text():
            assert f"`{example.name}`" in section, f"{example.name} runs the default: the section names it"
