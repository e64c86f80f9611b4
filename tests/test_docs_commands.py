"""What the README says before its commands: where `jobdash` and `kubectl` come from, and
how long a simulated job runs without `kubesim.io/duration-seconds`."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```(sh|python)\n(.*?)```", re.S)


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
