"""Piecewise-linear accuracy curves through measured points, read both ways: pure numpy, no tables.

Two curves use them: the uniform-subsampling frontier (accuracy against % time saved, through the baseline and the
random controls) and the random control's curve (accuracy against % accepted). Linear interpolation between
measured points and nothing beyond them, so every figure can be recomputed by hand from table.csv.
"""

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sift_bench.report.bootstrap import MIN_SEEDS

Curve = tuple[np.ndarray, np.ndarray]


def curve(xs: Sequence[float], ys: Sequence[float]) -> Curve:
    """The points sorted by x, those missing x or y left out. Points at the same x become one, their mean y,
    so the curve is a function of x (two random controls that saved the same time are one measurement)."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    known = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[known], ys[known]
    positions = np.unique(xs)
    return positions, np.array([ys[xs == x].mean() for x in positions])


def value_at(points: Curve, x: float) -> float:
    """The curve's y at x, interpolated linearly between its two neighbouring points; NaN outside [min x, max x]
    (a frontier is only known where it was measured) or when the curve has no points."""
    positions, values = points
    if len(positions) == 0 or not np.isfinite(x) or x < positions[0] or x > positions[-1]:
        return math.nan
    return float(np.interp(x, positions, values))


def largest_x_at(points: Curve, y: float) -> float:
    """The largest x at which the curve equals y: the inverse of a decreasing curve, and on a curve that is not
    monotone the most time uniform subsampling can save and still reach y, the generous reading for it.
    NaN when y is above every point or below all of them (it never reaches y within its range)."""
    positions, values = points
    if len(positions) == 0 or not np.isfinite(y) or y > values.max() or y < values.min():
        return math.nan
    if len(positions) == 1:
        return float(positions[0])
    largest = -math.inf
    for x0, x1, y0, y1 in zip(positions[:-1], positions[1:], values[:-1], values[1:]):
        if min(y0, y1) <= y <= max(y0, y1):
            # A flat segment at y reaches it all along: its right end is the largest x.
            crossing = x1 if y0 == y1 else x0 + (y - y0) * (x1 - x0) / (y1 - y0)
            largest = max(largest, float(crossing))
    return largest


def spread_over_seeds(x: float, row_by_seed: Mapping, point_xs: Sequence[float],
                      points_by_seed: Sequence[Mapping]) -> float:
    """The sample std (ddof=1) over seeds of (row's accuracy - curve at x), with the curve drawn seed by seed
    through each point's accuracy of that seed at the points' fixed (mean) x. Over the seeds the row and every
    point have; NaN with fewer than 2. Interpolation at fixed x is linear in the y values, so with every seed
    present the mean of these differences is the row's mean accuracy minus the mean curve at x. It holds % time
    saved fixed, so it describes the accuracy's spread only: the verdict reads the interval of
    `bootstrap.frontier_intervals`, which resamples both axes."""
    seeds = set(row_by_seed).intersection(*(set(point) for point in points_by_seed))
    differences = []
    for seed in sorted(seeds, key=str):
        frontier_of_seed = value_at(curve(point_xs, [point[seed] for point in points_by_seed]), x)
        difference = row_by_seed[seed] - frontier_of_seed
        if np.isfinite(difference):
            differences.append(difference)
    return float(np.std(differences, ddof=1)) if len(differences) >= 2 else math.nan


WITHIN = "within interval"


def verdict_vs_frontier(frontier_accuracy: float, difference: float, interval: tuple[float, float],
                        n_seeds: int) -> str:
    """`above` the frontier exactly when the 95 % interval of (accuracy - frontier) from the bootstrap over seeds
    (`bootstrap.frontier_intervals`, over n_seeds seeds) lies above 0, `below` exactly when it lies below 0,
    `within interval` when it holds 0. No verdict over fewer than MIN_SEEDS seeds (a gap of any size could be seed
    noise), nor when too many resamples fall outside the frontier's range (a configuration at its edge);
    `outside range` where the frontier was not measured at the row's mean % time saved."""
    if not np.isfinite(frontier_accuracy):
        return "outside range"
    if not np.isfinite(difference):
        return "cannot tell: accuracy missing"
    if n_seeds < MIN_SEEDS:
        return f"cannot tell: needs at least {MIN_SEEDS} seeds"
    lo, hi = interval
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "cannot tell: at the edge of the frontier's range"
    if lo > 0:
        return "above"
    if hi < 0:
        return "below"
    return WITHIN
