"""Prometheus metrics for every process, cheap enough for the edge's hot path, summed over granian workers.

Why not prometheus-client's own ``Counter``/``Histogram`` on the hot path: each update takes a lock (and in
its multiprocess mode writes an mmap), a few microseconds per request that the edge's ratio target cannot
spare. Here an update is a dict lookup and an integer add in the process (no lock: one thread serves). Each
process writes its totals, at most once a second and at every scrape, to a file of its own in a directory
its siblings share (``HOOKYARD_METRICS_DIR``; ``hookyard edge``/``control`` make one per server, so the
granian workers of one server find each other). A scrape of ``/metrics`` on any worker sums every file of
its role: counters stay monotonic when a worker is replaced, since the files of exited workers are kept. The
text itself is prometheus-client's (``generate_latest`` over the summed families), so the exposition format
is the library's, not ours.

The metric names are all here, so the dashboard (deploy/grafana/) and docs/ALERTS.md have one source.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import msgspec
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ("CONTENT_TYPE", "Counter", "Histogram", "Metrics", "metrics_dir")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
_WRITE_EVERY_S = 1.0
# One process's totals as written to its file: kind ("c", "h", "g") -> metric -> [label values, value] pairs, a
# histogram's value being its bucket counts.
Snapshot = dict[str, dict[str, list[tuple[list[str], float | list[float]]]]]


class Counter:
    """Counts by a tuple of label values; ``inc`` is the hot-path call."""

    __slots__ = ("help", "labels", "name", "values")

    def __init__(self, name: str, help: str, labels: tuple[str, ...]) -> None:
        self.name, self.help, self.labels = name, help, labels
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, key: tuple[str, ...], amount: float = 1) -> None:
        values = self.values
        values[key] = values.get(key, 0) + amount


class Histogram:
    """Per label tuple: one count per bucket (the last one is +Inf) and the sum of what was observed."""

    __slots__ = ("bounds", "help", "labels", "name", "values")

    def __init__(
        self,
        name: str,
        help: str,
        labels: tuple[str, ...] = (),
        bounds: tuple[float, ...] = LATENCY_BUCKETS,
    ) -> None:
        self.name, self.help, self.labels, self.bounds = name, help, labels, bounds
        self.values: dict[tuple[str, ...], list[float]] = {}

    def observe(self, value: float, key: tuple[str, ...] = ()) -> None:
        counts = self.values.get(key)
        if counts is None:
            counts = self.values[key] = [0] * (len(self.bounds) + 2)  # buckets, +Inf, sum
        counts[bisect.bisect_left(self.bounds, value)] += 1
        counts[-1] += value


class Metrics:
    """One process's counters, histograms and gauges of one role (``edge``, ``control``, ``worker``)."""

    def __init__(self, role: str, directory: str | None = None) -> None:
        self.role = role
        self.directory = Path(directory) if directory else None
        self.counters: dict[str, Counter] = {}
        self.histograms: dict[str, Histogram] = {}
        self.gauges: dict[str, tuple[str, tuple[str, ...], Callable[[], Iterable[tuple[tuple[str, ...], float]]]]] = {}
        """Read at scrape time (per process, summed over the processes' files like the rest)."""
        self._written_at = 0.0

    def counter(self, name: str, help: str, labels: tuple[str, ...] = ()) -> Counter:
        return self.counters.setdefault(name, Counter(name, help, labels))

    def histogram(
        self,
        name: str,
        help: str,
        labels: tuple[str, ...] = (),
        bounds: tuple[float, ...] = LATENCY_BUCKETS,
    ) -> Histogram:
        return self.histograms.setdefault(name, Histogram(name, help, labels, bounds))

    def gauge(
        self,
        name: str,
        help: str,
        labels: tuple[str, ...],
        read: Callable[[], Iterable[tuple[tuple[str, ...], float]]],
    ) -> None:
        self.gauges[name] = (help, labels, read)

    # -- across processes ---------------------------------------------------------------------------

    def _snapshot(self) -> dict[str, object]:
        return {
            "c": {n: [[list(k), v] for k, v in c.values.items()] for n, c in self.counters.items()},
            "h": {n: [[list(k), v] for k, v in h.values.items()] for n, h in self.histograms.items()},
            "g": {n: [[list(k), v] for k, v in g[2]()] for n, g in self.gauges.items()},
        }

    def write(self, *, force: bool = False) -> None:
        """This process's totals into its file (atomic replace); at most once a second unless ``force``."""
        now = time.monotonic()
        if self.directory is None or (not force and now - self._written_at < _WRITE_EVERY_S):
            return
        self._written_at = now
        path = self.directory / f"{self.role}-{os.getpid()}.mp"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(msgspec.msgpack.encode(self._snapshot()))
        os.replace(tmp, path)

    def _snapshots(self) -> list[Snapshot]:
        if self.directory is None:
            return [msgspec.msgpack.decode(msgspec.msgpack.encode(self._snapshot()))]
        self.write(force=True)
        found = []
        for path in self.directory.glob(f"{self.role}-*.mp"):
            with contextlib.suppress(OSError, msgspec.DecodeError):
                found.append(msgspec.msgpack.decode(path.read_bytes()))
        return found

    def render(self, live: Iterable[Metric] = ()) -> bytes:
        """The exposition text: every metric summed over this role's processes, then ``live`` families
        (deployment-wide values the caller just read, which must not be summed)."""
        snapshots = self._snapshots()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(self, snapshots))
        registry.register(_Live(list(live)))
        return generate_latest(registry)


class _Families(Collector):
    def __init__(self, metrics: Metrics, snapshots: list[Snapshot]) -> None:
        self.metrics, self.snapshots = metrics, snapshots

    def _pairs(self, kind: str, name: str) -> Iterator[tuple[tuple[str, ...], float | list[float]]]:
        for snap in self.snapshots:
            for key, value in snap.get(kind, {}).get(name, ()):
                yield tuple(key), value

    def _summed(self, kind: str, name: str) -> dict[tuple[str, ...], float]:
        total: dict[tuple[str, ...], float] = {}
        for key, value in self._pairs(kind, name):
            if not isinstance(value, list):
                total[key] = total.get(key, 0) + value
        return total

    def _summed_buckets(self, name: str) -> dict[tuple[str, ...], list[float]]:
        total: dict[tuple[str, ...], list[float]] = {}
        for key, value in self._pairs("h", name):
            if isinstance(value, list):
                previous = total.get(key)
                total[key] = value if previous is None else [a + b for a, b in zip(previous, value, strict=True)]
        return total

    def collect(self) -> Iterable[Metric]:
        m = self.metrics
        for name, counter in m.counters.items():
            counters = CounterMetricFamily(name, counter.help, labels=counter.labels)
            for key, value in sorted(self._summed("c", name).items()):
                counters.add_metric(key, value)
            yield counters
        for name, histogram in m.histograms.items():
            histograms = HistogramMetricFamily(name, histogram.help, labels=histogram.labels)
            for key, counts in sorted(self._summed_buckets(name).items()):
                running, buckets = 0.0, []
                for bound, count in zip((*histogram.bounds, float("inf")), counts[:-1], strict=True):
                    running += count
                    buckets.append((_bound(bound), running))
                histograms.add_metric(key, buckets, counts[-1])
            yield histograms
        for name, (help_text, labels, _) in m.gauges.items():
            gauges = GaugeMetricFamily(name, help_text, labels=labels)
            for key, value in sorted(self._summed("g", name).items()):
                gauges.add_metric(key, value)
            yield gauges


class _Live(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def metrics_dir(configured: str | None, role: str) -> str:
    """The shared directory of one server's workers: the setting, else one made now (the CLI passes it on
    to granian's workers through the environment before it execs)."""
    if configured:
        Path(configured).mkdir(parents=True, exist_ok=True)
        return configured
    return tempfile.mkdtemp(prefix=f"hookyard-metrics-{role}-")
