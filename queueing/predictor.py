"""How long will a job run?  An online duration predictor with a calibrated late bound.

In the spirit of Helios' QSSF predictor (Hu et al., SC'21): a job's duration is
predicted from the history of the most similar jobs that finished before it,
using only what is known at submission (``JobFeatures``): namespace,
submitter, kind, the job name's meaningful tokens (``name_tokens``), GPU and
pod count, and the user's stated expectation if any.

History levels, most specific first (``LEVELS``); the first whose key holds
at least ``min_samples`` runs answers, and ``Prediction.source`` names it:

    user+name        same submitter, same name tokens (in the namespace)
    name             same name tokens in the namespace (any submitter)
    user             the submitter's runs in the namespace
    namespace+shape  the namespace's runs of the same kind, pods and GPUs
    namespace        the namespace's runs
    shape            the cluster's runs of the same kind, pods and GPUs
    cluster          every run (answers from one sample on)

A stated expectation (e.g. the ``jobdash.io/expected-duration`` annotation)
takes precedence over history, corrected by the median ratio actual/stated of
that submitter's past stated jobs (source ``stated+user``), else of the
namespace's (``stated+namespace``), else as is (``stated``).  With no history
and no statement the source is ``none`` and both figures are None.

Everything works in log-duration space: the median is the lower median of the
key's last ``runs_per_key`` runs (an order statistic, so adding runs longer
than it never lowers it), and the late bound ``p90_s`` is split-conformal:
``median * exp(q)``, where q is the conformal 90% quantile of the signed
log-residuals ``log(actual) - log(predicted median)`` of the last
``calibration_window`` predictions the same source made (falling back to all
sources' residuals, then to the key's own 90th percentile, then to
``DEFAULT_SPREAD`` x the median).  On a stream whose errors are exchangeable,
``actual <= p90_s`` then holds for about 90% of jobs.  Real streams are
bursty (a user's sweep of similar jobs errs together), so the window is long
(5000 by default): on the Philly trace a 500-residual window covered 86%, 5000
covers 89% (bench/results/predictor_accuracy.md).  q is never below 0, so
``p90_s >= median_s``.

Memory is bounded: at most ``max_keys`` keys per level (least recently used
evicted), ``runs_per_key`` runs per key, ``calibration_window`` residuals per
source.  No randomness, no clock: the same stream gives the same predictions.
Pure Python, standard library only (and the core's ``Workload``).

``likely_total`` answers for a job that is running already: the median of the
runs on record that lasted longer than it has so far (the planner's forecast
uses it for running jobs' ends, so a job past its median is not taken to end
at once).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from functools import cached_property
from statistics import NormalDist
from typing import NamedTuple

from .eta import DURATION_ANNOTATION, parse_duration
from .run_tails import RunTails
from .sorted_window import SortedWindow, conformal_quantile, lower_median
from .workload import Workload

LEVELS: tuple[str, ...] = ("user+name", "name", "user", "namespace+shape", "namespace", "shape", "cluster")
STATED_SOURCES: tuple[str, ...] = ("stated+user", "stated+namespace", "stated")
SOURCES: tuple[str, ...] = (*STATED_SOURCES, *LEVELS, "none")

COVERAGE = 0.9
TAIL_COVERAGE = 0.99
DEFAULT_SPREAD = 4.0  # p90 / median when nothing calibrates the bound yet
MIN_CALIBRATION = 20  # residuals a source needs before its own quantile is used
MIN_DURATION_S = 1.0  # durations are clamped to at least a second before taking logs
MAX_NAME_TOKENS = 8

_SPLIT = re.compile(r"[^a-z0-9]+")
_NUMBERISH = re.compile(r"^\d+(?:e\d*)?$|^\d{4,}[a-z]?\d*$")  # 128, 3e (of 3e-4), 1e5, 20240105t1200
_RUN_ID = re.compile(
    r"^(?:run|trial|seed|exp|try|attempt|rep|repeat|iter|it|step|ep|epoch|fold|shard|part|job|id|v|ver|version|r|t)\d+$"
)
_HYPERPARAMETER = re.compile(
    r"^(?:lr|bs|wd|mom|momentum|dropout|drop|warmup|gamma|beta|alpha|lambda|lam|temp|tau|eps|clip|decay|gbs|mbs)\d"
)
_HEX = re.compile(r"^(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}$")  # hashes, uuid parts
# generateName / Katib suffixes use Kubernetes' random alphabet: no vowels, no 0, 1, 3.
_RANDOM_SUFFIX = re.compile(r"^(?=.*\d)[bcdfghjklmnpqrstvwxz2456789]{5,}$")


def name_tokens(name: str) -> tuple[str, ...]:
    """The tokens of a job name that say what it is, not which run it is.

    "bert-large-ft-lr3e-4-run7" -> ("bert", "large", "ft"); "resnet50-imagenet-x7k2p"
    -> ("resnet50", "imagenet").  Dropped: numbers and exponents, dates and
    timestamps, run ids (run7, trial12, seed3, v2), hyperparameter values
    (lr3e, bs256, wd1), hex hashes, random generateName suffixes.  Lower case,
    first occurrence only, at most ``MAX_NAME_TOKENS``.
    """
    tokens: list[str] = []
    for token in _SPLIT.split(name.lower()):
        if (
            not token
            or token in tokens
            or _NUMBERISH.match(token)
            or _RUN_ID.match(token)
            or _HYPERPARAMETER.match(token)
            or _HEX.match(token)
            or _RANDOM_SUFFIX.match(token)
        ):
            continue
        tokens.append(token)
        if len(tokens) == MAX_NAME_TOKENS:
            break
    return tuple(tokens)


@dataclass(frozen=True)
class JobFeatures:
    """What is known of a job at submission.  ``submitter`` and ``name`` may be
    empty; ``stated_s``: the user's own expectation in seconds, if any."""

    namespace: str
    submitter: str = ""
    kind: str = ""
    name: str = ""
    gpus: int = 0
    pods: int = 1
    stated_s: float | None = None

    @classmethod
    def of(cls, workload: Workload, namespace: str, submitter: str = "") -> JobFeatures:
        """A submitted job's features: its kind, name, GPUs and pods, and its
        ``jobdash.io/expected-duration`` annotation as the stated expectation."""
        gpus = sum(amount for name, amount in workload.requests.items() if name.endswith("/gpu"))
        stated = workload.annotations.get(DURATION_ANNOTATION)
        return cls(
            namespace=namespace,
            submitter=submitter,
            kind=workload.kind,
            name=workload.name,
            gpus=gpus,
            pods=workload.pods,
            stated_s=parse_duration(stated) if stated else None,
        )

    def keys(self) -> tuple[tuple[str, Hashable] | None, ...]:
        """(level, key) per level of ``LEVELS``, None where the job lacks the feature."""
        return self._keys

    @cached_property
    def _keys(self) -> tuple[tuple[str, Hashable] | None, ...]:
        # (Computed once per JobFeatures: a running job's are asked every cycle.)
        tokens = "-".join(name_tokens(self.name))
        shape = (self.kind, self.pods, self.gpus)
        user = (self.namespace, self.submitter) if self.submitter else None
        return (
            ("user+name", (*user, tokens)) if user and tokens else None,
            ("name", (self.namespace, tokens)) if tokens else None,
            ("user", user) if user else None,
            ("namespace+shape", (self.namespace, *shape)),
            ("namespace", self.namespace),
            ("shape", shape),
            ("cluster", ""),
        )


def default_log_spread(coverage: float) -> float:
    """log(bound / median) at ``coverage`` when nothing calibrates it: that of a log-normal whose
    90 % bound is ``DEFAULT_SPREAD`` x its median (so x 12.4 at 99 %)."""
    normal = NormalDist()
    return math.log(DEFAULT_SPREAD) * normal.inv_cdf(coverage) / normal.inv_cdf(COVERAGE)


class Prediction(NamedTuple):
    """``median_s``: the likely duration; ``p90_s``: the late bound (90%); ``tail_s``: the tail
    bound (``tail_coverage``, 99 % by default), what lent nodes are admitted by (queueing/tide.py):
    from history, its key's own tail (run_tails.py; inf while no key has runs enough), from a
    statement, conformal as ``p90_s``; all None only when ``source`` is "none".  ``samples``:
    runs behind the figure."""

    median_s: float | None
    p90_s: float | None
    source: str
    samples: int = 0
    tail_s: float | None = None


NO_PREDICTION = Prediction(None, None, "none", 0)


class _Table:
    """Windows by key, at most ``max_keys`` of them, least recently used evicted."""

    __slots__ = ("max_keys", "size", "windows")

    def __init__(self, max_keys: int, size: int) -> None:
        self.max_keys = max_keys
        self.size = size
        self.windows: OrderedDict[Hashable, SortedWindow] = OrderedDict()

    def get(self, key: Hashable) -> SortedWindow | None:
        window = self.windows.get(key)
        if window is not None:
            self.windows.move_to_end(key)
        return window

    def add(self, key: Hashable, value: float) -> None:
        window = self.get(key)
        if window is None:
            window = self.windows[key] = SortedWindow(self.size)
            if len(self.windows) > self.max_keys:
                self.windows.popitem(last=False)
        window.add(value)


class DurationPredictor:
    """Learns durations online (``observe`` as jobs finish) and predicts them (``predict``)."""

    def __init__(
        self,
        *,
        runs_per_key: int = 20,
        max_keys: int = 10_000,
        min_samples: int = 3,
        calibration_window: int = 5000,
        coverage: float = COVERAGE,
        tail_coverage: float = TAIL_COVERAGE,
    ) -> None:
        if runs_per_key < 1 or max_keys < 1 or min_samples < 1 or calibration_window < 1:
            raise ValueError("runs_per_key, max_keys, min_samples and calibration_window must be at least 1")
        if not 0 < coverage < 1 or not 0 < tail_coverage < 1:
            raise ValueError("coverage and tail_coverage must lie strictly between 0 and 1")
        self.runs_per_key = runs_per_key
        self.max_keys = max_keys
        self.min_samples = min_samples
        self.calibration_window = calibration_window
        self.coverage = coverage
        self.tail_coverage = tail_coverage
        self.history = {level: _Table(max_keys, runs_per_key) for level in LEVELS}
        # log(actual / stated) per submitter and per namespace
        self.stated_user = _Table(max_keys, runs_per_key)
        self.stated_namespace = _Table(max_keys, runs_per_key)
        # signed log-residuals of past predictions, per source and all together
        self.residuals = {source: SortedWindow(calibration_window) for source in SOURCES if source != "none"}
        self.all_residuals = SortedWindow(calibration_window)
        self.tails = RunTails(max_keys)  # run counts by duration per key, for tail_s
        self.observed = 0

    # -- predicting ---------------------------------------------------------

    def predict(self, features: JobFeatures) -> Prediction:
        """The likely duration and its late bound, from the most specific history that has enough runs."""
        stated = self._stated(features)
        if stated is not None:
            log_median, source, samples = stated
            return self._bounded(log_median, source, samples, None)
        found = self._history(features)
        if found is None:
            return NO_PREDICTION
        level, window = found
        prediction = self._bounded(lower_median(window.ordered), level, len(window), window)
        # A history's tail is its key's own (run_tails.py), not the conformal one _bounded gives.
        tail = max(prediction.p90_s or 0.0, self.tails.bound(features.keys(), self.tail_coverage))
        return prediction._replace(tail_s=tail)

    def likely_total(self, features: JobFeatures, elapsed_s: float) -> float | None:
        """The likely whole duration of a job that has run ``elapsed_s`` so far: the median of
        the history's runs that lasted longer (a run already past most of its peers is one of
        the long ones), and at least twice ``elapsed_s`` (the median of a heavy tail: as long
        again as it has lasted) once fewer than ``min_samples`` runs lasted longer or it is past
        its stated figure.  Without ``elapsed_s`` it is ``predict``'s median; None only with no
        history and no statement."""
        if not elapsed_s > 0:
            return self.predict(features).median_s
        stated = self._stated(features)
        if stated is not None:
            total = math.exp(stated[0])
            return total if total > elapsed_s else 2 * elapsed_s
        found = self._history(features)
        if found is None:
            return None
        ordered = found[1].ordered
        longer = ordered[bisect.bisect_right(ordered, math.log(max(elapsed_s, MIN_DURATION_S))) :]
        if len(longer) < self.min_samples:
            # One or two runs on record lasted longer: too few to say how much longer, and
            # the longest run so far is no ceiling (it would predict an end every cycle).
            return max(math.exp(lower_median(longer)) if longer else 0.0, 2 * elapsed_s)
        return max(math.exp(lower_median(longer)), elapsed_s)

    def _history(self, features: JobFeatures) -> tuple[str, SortedWindow] | None:
        """The most specific level with enough runs for this job, and its window."""
        for entry in features.keys():
            if entry is None:
                continue
            level, key = entry
            window = self.history[level].get(key)
            if window is None:
                continue
            needed = 1 if level == "cluster" else self.min_samples
            if len(window) >= needed:
                return level, window
        return None

    def _stated(self, features: JobFeatures) -> tuple[float, str, int] | None:
        stated = features.stated_s
        if stated is None or not stated > 0 or math.isinf(stated):
            return None
        log_stated = math.log(max(stated, MIN_DURATION_S))
        candidates: list[tuple[str, _Table, Hashable]] = []
        if features.submitter:
            candidates.append(("stated+user", self.stated_user, (features.namespace, features.submitter)))
        candidates.append(("stated+namespace", self.stated_namespace, features.namespace))
        for source, table, key in candidates:
            window = table.get(key)
            if window is not None and len(window) >= self.min_samples:
                return log_stated + lower_median(window.ordered), source, len(window)
        return log_stated, "stated", 0

    def _bounded(self, log_median: float, source: str, samples: int, window: SortedWindow | None) -> Prediction:
        median = math.exp(log_median)

        def bound(coverage: float) -> float:
            residuals = self.residuals[source]
            if len(residuals) < MIN_CALIBRATION:
                residuals = self.all_residuals
            if len(residuals) >= MIN_CALIBRATION:
                spread = conformal_quantile(residuals.ordered, coverage)
            elif window is not None and len(window) >= 2:
                spread = conformal_quantile(window.ordered, coverage) - log_median
            else:
                spread = default_log_spread(coverage)
            return max(median, math.exp(log_median + max(spread, 0.0)))

        p90 = bound(self.coverage)
        return Prediction(median, p90, source, samples, max(p90, bound(self.tail_coverage)))

    # -- learning -----------------------------------------------------------

    def observe(self, features: JobFeatures, seconds: float, predicted: Prediction | None = None) -> None:
        """A job with these features ran ``seconds``.  ``predicted``: what ``predict`` said for it
        at submission, if kept; its error calibrates that source's late bound (without it, the
        prediction the history gives just before this run is added stands in)."""
        if not seconds >= 0 or math.isinf(seconds):
            return  # NaN, negative or infinite: nothing to learn
        log_actual = math.log(max(seconds, MIN_DURATION_S))
        if predicted is None:
            predicted = self.predict(features)
        if predicted.median_s is not None and predicted.source in self.residuals:
            residual = log_actual - math.log(max(predicted.median_s, MIN_DURATION_S))
            self.residuals[predicted.source].add(residual)
            self.all_residuals.add(residual)
        stated = features.stated_s
        if stated is not None and stated > 0 and not math.isinf(stated):
            ratio = log_actual - math.log(max(stated, MIN_DURATION_S))
            if features.submitter:
                self.stated_user.add((features.namespace, features.submitter), ratio)
            self.stated_namespace.add(features.namespace, ratio)
        for entry in features.keys():
            if entry is not None:
                self.history[entry[0]].add(entry[1], log_actual)
        self.tails.add(features.keys(), seconds)
        self.observed += 1

    # -- introspection ------------------------------------------------------

    def key_count(self) -> int:
        """Keys held, over every level and both stated-ratio tables."""
        tables: Iterable[_Table] = (*self.history.values(), self.stated_user, self.stated_namespace)
        return sum(len(table.windows) for table in tables) + self.tails.key_count()

    def max_runs_held(self) -> int:
        """The most runs (or ratios, or residuals) any one window holds."""
        tables: Iterable[_Table] = (*self.history.values(), self.stated_user, self.stated_namespace)
        held = [len(window) for table in tables for window in table.windows.values()]
        held.extend(len(window) for window in (*self.residuals.values(), self.all_residuals))
        return max(held, default=0)
