"""Kafka's sampled statistics, as its quota sensors compute them.

Theory of operation
-------------------
A :class:`Rate` keeps ``samples`` buckets (``quota.window.num``), each covering
``window`` seconds (``quota.window.size.seconds``). Recording adds to the
current bucket; once the current bucket is a whole window old, the next bucket
is reset and becomes current (a ring). A bucket whose start is older than
``samples * window`` is obsolete and reset before any measurement.

The measured rate is the sum of the buckets divided by the elapsed time since
the oldest bucket started. That elapsed time is padded up to ``samples - 1``
full windows when less time has passed (Kafka's ``Rate.windowSize``), so a
fresh sensor does not report a huge rate after a handful of events, and it is
at least 1 ms.

Quota check (Kafka's ``Sensor.record`` then ``checkQuotas``): the event is
recorded first, then the rate measured; a rate above the bound is a violation.
The throttle time that brings the rate back to the bound, with no further
events, is ``(rate - bound) / bound * windowSize`` (Kafka's
``QuotaUtils.throttleTime``): after that long the elapsed time has grown by the
factor ``rate / bound``, so the same sum over it is exactly the bound.

Times are seconds (floats, a monotonic clock), where Kafka uses milliseconds.

Fast path: the ring keeps the running sum of its samples, and the padded
window is never shorter than ``(samples - 1)`` windows (nor 1 ms). So
``sum / that minimum`` bounds the measured rate from above, and when it is
within the bound the check is over without a purge or a measurement: the same
answer, for the common case of a quota configured but not hit.
"""

from __future__ import annotations

import math

__all__ = ["Avg", "Rate"]


class _Sample:
    __slots__ = ("events", "start", "value")

    def __init__(self, now: float) -> None:
        self.value = 0.0
        self.events = 0
        self.start = now

    def reset(self, now: float) -> None:
        self.value = 0.0
        self.events = 0
        self.start = now


class _Sampled:
    """Kafka's SampledStat: the ring of samples and its purge."""

    def __init__(self, samples: int = 11, window: float = 1.0) -> None:
        if samples < 1 or window <= 0:
            raise ValueError("samples must be >= 1 and window > 0")
        self.num_samples = samples
        self.window = window
        self._samples: list[_Sample] = []
        self._current = 0
        self._total = 0.0  # the sum of every sample's value (see the fast path above)

    def record(self, value: float, now: float) -> None:
        samples = self._samples
        if not samples:
            samples.append(_Sample(now))
            self._current = 0
        sample = samples[self._current]
        if now - sample.start >= self.window:  # complete: move on to the next bucket
            self._current = (self._current + 1) % self.num_samples
            if self._current >= len(samples):
                sample = _Sample(now)
                samples.append(sample)
            else:
                sample = samples[self._current]
                self._total -= sample.value
                sample.reset(now)
        sample.value += value
        sample.events += 1
        self._total += value

    def _purge(self, now: float) -> None:
        expire = self.num_samples * self.window
        for sample in self._samples:
            if now - sample.start >= expire:
                self._total -= sample.value
                sample.reset(now)


class Rate(_Sampled):
    """Events (or amounts) per second over the sampled window, with an optional upper bound."""

    def __init__(self, samples: int = 11, window: float = 1.0, bound: float | None = None) -> None:
        super().__init__(samples, window)
        self.bound = bound
        # The shortest window_size() can return (the padding of a young sensor, or 1 ms).
        self._min_window = max((samples - 1) * window, 0.001)

    def window_size(self, now: float) -> float:
        self._purge(now)
        return self._window_size(now)

    def _window_size(self, now: float) -> float:
        oldest = min((s.start for s in self._samples), default=now)
        elapsed = now - oldest
        full_windows = int(elapsed // self.window)
        min_full_windows = self.num_samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self.window
        return max(elapsed, 0.001)

    def measure(self, now: float) -> float:
        self._purge(now)
        total = sum(s.value for s in self._samples)
        return total / self.window_size(now)

    def throttle_time(self, now: float) -> float:
        """Seconds until the rate is back within the bound (0 when it is within)."""
        bound = self.bound
        if bound is None or math.isnan(bound):
            # Every value violates a NaN bound (value <= NaN is false), and Kafka's throttle time
            # for it, Math.round(NaN), is 0: a NaN quota never throttles.
            return 0.0
        self._purge(now)
        window = self._window_size(now)
        value = sum(s.value for s in self._samples) / window
        if value <= bound:
            return 0.0
        if bound <= 0:
            return math.inf
        return (value - bound) / bound * window

    def record_checked(self, value: float, now: float) -> float:
        """Record, then check the bound: the throttle time of a violation, else 0."""
        self.record(value, now)
        bound = self.bound
        if bound is None or self._total <= bound * self._min_window:
            return 0.0  # the rate cannot exceed the bound (the fast path above)
        return self.throttle_time(now)


class Avg(_Sampled):
    """Kafka's SampledStat Avg: the mean of the values recorded in the window (NaN if none)."""

    def measure(self, now: float) -> float:
        self._purge(now)
        events = sum(s.events for s in self._samples)
        if events == 0:
            return math.nan
        return sum(s.value for s in self._samples) / events
