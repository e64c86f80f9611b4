"""Many clients at once against the real-time cluster: nothing lost, nothing double-counted."""

import threading
import time

from kubernetes import client

from kubesim.quota import pod_usage
from kubesim.resources import PODS, TFJOBS
from kubesim.testing import running_kubesim, tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"


def test_concurrent_clients_and_controllers_stay_consistent(config):
    fast = {**config, "speed": 100.0}
    with running_kubesim(fast) as sim:
        errors = []

        def client_thread(t: int) -> None:
            api_client = sim.api_client()
            api = client.CustomObjectsApi(api_client)
            try:
                for i in range(15):
                    name = f"c{t}-{i}"
                    api.create_namespaced_custom_object(
                        G, V, "team-b", P, tfjob_manifest(name, "team-b", workers=2, cpu="100m", duration=2)
                    )
                    if i % 5 == 1:
                        api.delete_namespaced_custom_object(G, V, "team-b", P, name)
                    elif i % 5 == 2:
                        api.patch_namespaced_custom_object(
                            G, V, "team-b", P, name, {"metadata": {"labels": {"seen": "yes"}}}
                        )
            except Exception as exc:  # reported below
                errors.append(exc)
            finally:
                api_client.close()

        threads = [threading.Thread(target=client_thread, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        expected = {f"c{t}-{i}" for t in range(4) for i in range(15) if i % 5 != 1}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            jobs = {name: sim.cluster.tfjob("team-b", name) for name in expected}
            if all(
                any(c["type"] == "Succeeded" for c in (j.get("status") or {}).get("conditions", []))
                for j in jobs.values()
            ):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("not every job finished")
        assert {j["metadata"]["name"] for j in sim.cluster.store.items(TFJOBS, "team-b")} == expected
        pods = sim.cluster.store.items(PODS, "team-b")
        assert {p["metadata"]["labels"]["training.kubeflow.org/job-name"] for p in pods} == expected
        assert all(p["status"]["phase"] == "Succeeded" for p in pods) and len(pods) == 2 * len(expected)
        # The quota tracker's incremental usage equals a recount from scratch.
        recount: dict[str, int] = {"count/tfjobs.kubeflow.org": len(expected)}
        for pod in pods:
            for key, amount in pod_usage(pod).items():
                recount[key] = recount.get(key, 0) + amount
        assert sim.cluster.quota.used("team-b") == {k: v for k, v in recount.items() if v}
        created = [a["name"] for a in sim.cluster.audit if a["outcome"] == "Created"]
        assert sorted(created) == sorted(f"c{t}-{i}" for t in range(4) for i in range(15))
        assert sim.server.errors == []
