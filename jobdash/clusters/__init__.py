"""The clusters jobdash dispatches to (issue 49): their configuration, checked at start
(config.py), and what jobdash knows of each, its health above all (models.py). The door to a
cluster itself is jobdash.cluster's gateway; with several, jobdash.cluster.multi's."""
