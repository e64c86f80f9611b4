"""jobdash's QueuedJob as kubesim serves it: the shipped CRD's names, printer columns and
schema (deploy/base/queuedjobs.yaml) are what kubesim answers with."""

from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubesim import discovery, queuedjob
from kubesim.crdschemas import CRD_SCHEMAS, crd_definition_name
from kubesim.resources import QUEUEDJOBS
from kubesim.tables import table
from kubesim.testing import running_kubesim

ROOT = Path(__file__).resolve().parents[2]


def shipped_crd() -> dict:
    documents = yaml.safe_load_all((ROOT / "deploy/base/queuedjobs.yaml").read_text())
    (crd,) = [d for d in documents if d and d["kind"] == "CustomResourceDefinition"]
    return crd


def test_the_shipped_crd_is_what_kubesim_serves():
    crd = shipped_crd()
    names, (version,) = crd["spec"]["names"], crd["spec"]["versions"]
    assert (crd["spec"]["group"], version["name"], names["plural"], names["kind"]) == (
        QUEUEDJOBS.group,
        QUEUEDJOBS.version,
        QUEUEDJOBS.plural,
        QUEUEDJOBS.kind,
    )
    assert crd["spec"]["scope"] == "Namespaced" and QUEUEDJOBS.namespaced
    assert "subresources" not in version and not QUEUEDJOBS.status_subresource
    served = discovery.api_resource(QUEUEDJOBS)
    assert served["shortNames"] == names["shortNames"] == ["qj"]
    assert served["categories"] == names["categories"] == ["jobdash"]
    columns = [
        (c["name"], c["type"], c["jsonPath"], c.get("description", ""), c.get("priority", 0))
        for c in version["additionalPrinterColumns"]
    ]
    assert columns == queuedjob.PRINTER_COLUMNS
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    served_schema = CRD_SCHEMAS[crd_definition_name(QUEUEDJOBS.group, QUEUEDJOBS.kind)]["properties"]
    for part in ("spec", "status"):
        assert set(schema[part]["properties"]) == set(served_schema[part]["properties"])
    assert schema["spec"]["required"] == served_schema["spec"]["required"]


def test_the_table_prints_the_columns():
    obj = {
        "metadata": {"name": "kq-gpu", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"jobId": 7, "kind": "TFJob", "name": "kq-gpu"},
        "status": {"position": 2, "reason": "QuotaExceeded", "likelyStart": "2026-01-01T00:10:00Z"},
    }
    printed = table(QUEUEDJOBS.group, QUEUEDJOBS.plural, [obj], now=1767225660.0, meta={})
    assert [c["name"] for c in printed["columnDefinitions"]][:4] == ["Name", "Kind", "Position", "Reason"]
    assert printed["rows"][0]["cells"] == [
        "kq-gpu",
        "TFJob",
        2,
        "QuotaExceeded",
        "2026-01-01T00:10:00Z",
        None,
        None,
        "60s",
    ]


def test_a_queued_job_missing_its_job_or_of_wrong_types_is_refused():
    with running_kubesim({"namespaces": [{"name": "team-a"}]}, manual_clock=True) as sim:
        api = client.CustomObjectsApi(sim.api_client())
        body = {
            "apiVersion": "jobdash.io/v1alpha1",
            "kind": "QueuedJob",
            "metadata": {"name": "x"},
            "spec": {"kind": "TFJob", "name": "x", "jobId": "seven"},
            "status": {"position": "first"},
        }
        with pytest.raises(ApiException) as refused:
            api.create_namespaced_custom_object("jobdash.io", "v1alpha1", "team-a", "queuedjobs", body)
        assert refused.value.status == 422
        assert "spec.jobId" in refused.value.body and "status.position" in refused.value.body
        body["spec"]["jobId"], body["status"]["position"] = 7, 1
        created = api.create_namespaced_custom_object("jobdash.io", "v1alpha1", "team-a", "queuedjobs", body)
        assert created["status"] == {"position": 1}  # no status subresource: kept as written
