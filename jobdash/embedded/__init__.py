"""The composition root of `make run`: the one place that puts kubesim, the webhook's TLS
listener, the real cluster gateway and the dispatcher loop together in one process
(stack.py), with the simulated cluster it starts (embedded_cluster.yaml) and its
management command, run_embedded. No layer imports it; tests/jobdash/test_layering.py
keeps kubesim and webhooks.listener out of every other layer."""
