"""The 95 % interval of a configuration's distance to the uniform-subsampling frontier, from a bootstrap over seeds
that resamples both axes: pure numpy, no tables.

% time saved is measured, not set: a configuration's savings and every random control's vary from seed to seed as
much as their accuracies do, often more. So an interval that holds the savings fixed at their mean (the old std of
per-seed differences) is too narrow where the frontier is steep. Here each resample draws seeds with replacement and
takes, for the same drawn seeds, the configuration's, every random control's and the baseline's runs together (a
seed's runs share its data order and initialisation), so accuracy and savings both vary, and both vary alike for
the configuration and its frontier. Per resample the frontier is drawn through the resampled means, as
`frontier.curve` draws it through the table's, and read at the configuration's resampled savings (and, for extra
savings, at its resampled accuracy). A fixed generator seed makes the interval a function of the data alone, so
`--from-csv` rebuilds table.csv byte for byte.
"""

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

RESAMPLES = 2000
PERCENTILES = (2.5, 97.5)  # a percentile interval: 95 %
# Two seeds resample to three means only (both of one, or one of each): no interval below three.
MIN_SEEDS = 3
# A resample whose savings fall outside its frontier's range has no difference; when more than this share of them
# do, the interval would describe only the resamples that stayed inside, so there is none.
MAX_UNDEFINED = 0.05
GENERATOR_SEED = 0


class SeedValues(NamedTuple):
    """One configuration or frontier point, seed by seed: seed -> its accuracy, seed -> its % time saved (the mean
    over the seed's timed runs; the baseline's is 0 in every seed, being the reference)."""
    accuracy: Mapping
    savings: Mapping


class Interval(NamedTuple):
    lo: float
    hi: float


NO_INTERVAL = Interval(math.nan, math.nan)


class FrontierIntervals(NamedTuple):
    """The intervals of accuracy - frontier and of extra savings, how many seeds they resampled, and the two
    statistics on those seeds as measured (no resampling): what `recentred` moves the intervals from."""
    accuracy_vs_frontier: Interval
    extra_savings: Interval
    n_seeds: int
    observed: tuple[float, float] = (math.nan, math.nan)


def recentred(interval: Interval, observed: float, estimate: float) -> Interval:
    """The interval moved by (estimate - observed): its width and shape from the resamples of the seeds every point
    shares, placed around the point estimate over each point's own seeds. A row with fewer seeds than its frontier
    (or a seed whose savings were left out) would otherwise print a point estimate outside its own interval;
    where every seed is shared the two statistics agree and nothing moves."""
    if not (np.isfinite(observed) and np.isfinite(estimate)):
        return interval
    return Interval(interval.lo + estimate - observed, interval.hi + estimate - observed)


def _measured(point: SeedValues) -> set:
    return {seed for seed, value in point.accuracy.items()
            if np.isfinite(value) and seed in point.savings and np.isfinite(point.savings[seed])}


def common_seeds(row: SeedValues, points: Sequence[SeedValues]) -> list:
    """The seeds at which the row and every frontier point have both an accuracy and a % time saved, sorted by their
    text: the order, and with it every resample, depends on the seeds alone, not on a dict's order. A seed whose
    savings the timing rules left out (a run at another machine speed than its reference, a kind without baseline)
    for any of them is not resampled: the interval is over the seeds with both axes everywhere."""
    return sorted(_measured(row).intersection(*(_measured(point) for point in points)), key=str)


def seed_draws(n_seeds: int, resamples: int = RESAMPLES) -> np.ndarray:
    """(resamples, n_seeds) positions of seeds drawn with replacement, from a generator of fixed seed: every row of
    a table with as many seeds resamples them alike, and a rebuild gives the same interval."""
    return np.random.default_rng(GENERATOR_SEED).integers(0, n_seeds, size=(resamples, n_seeds))


def resampled_means(by_seed: Mapping, seeds: Sequence, draws: np.ndarray) -> np.ndarray:
    """Per resample, the mean of the drawn seeds' values."""
    return np.array([by_seed[seed] for seed in seeds], dtype=float)[draws].mean(axis=1)


def curves(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`frontier.curve` for every resample (row) at once: the points sorted by x, and each point's y the mean y of
    the points at its x. Points at the same x stay, on one y, so reading between them is well defined."""
    order = np.argsort(xs, axis=1, kind="stable")
    xs, ys = np.take_along_axis(xs, order, axis=1), np.take_along_axis(ys, order, axis=1)
    same = xs[:, :, None] == xs[:, None, :]
    return xs, (same * ys[:, None, :]).sum(axis=2) / same.sum(axis=2)


def values_at(xs: np.ndarray, ys: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`frontier.value_at` per resample: curve i (`curves`, two points or more) read at x[i], linear between its two
    neighbouring points, NaN outside [min x, max x]."""
    right = np.clip((xs <= x[:, None]).sum(axis=1), 1, xs.shape[1] - 1)
    rows = np.arange(len(x))
    x0, x1, y0, y1 = xs[rows, right - 1], xs[rows, right], ys[rows, right - 1], ys[rows, right]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(x1 == x0, y1, y0 + (x - x0) * (y1 - y0) / (x1 - x0))
    return np.where((x >= xs[:, 0]) & (x <= xs[:, -1]), value, math.nan)


def largest_xs_at(xs: np.ndarray, ys: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`frontier.largest_x_at` per resample: the largest x at which curve i reaches y[i], NaN where it never does
    (y[i] above every point or below all of them)."""
    x0, x1, y0, y1 = xs[:, :-1], xs[:, 1:], ys[:, :-1], ys[:, 1:]
    target = y[:, None]
    crosses = (np.minimum(y0, y1) <= target) & (target <= np.maximum(y0, y1))
    with np.errstate(divide="ignore", invalid="ignore"):
        # A flat segment at y reaches it all along: its right end is the largest x.
        crossing = np.where(y0 == y1, x1, x0 + (target - y0) * (x1 - x0) / (y1 - y0))
    largest = np.where(crosses, crossing, -math.inf).max(axis=1)
    return np.where(crosses.any(axis=1), largest, math.nan)


def percentile_interval(statistic: np.ndarray) -> Interval:
    """PERCENTILES of the resampled statistic, its NaN resamples left out; NO_INTERVAL when more than MAX_UNDEFINED
    of them are NaN."""
    defined = statistic[np.isfinite(statistic)]
    if len(statistic) == 0 or len(defined) < (1 - MAX_UNDEFINED) * len(statistic):
        return NO_INTERVAL
    lo, hi = np.percentile(defined, PERCENTILES)
    return Interval(float(lo), float(hi))


def frontier_intervals(row: SeedValues, points: Sequence[SeedValues]) -> FrontierIntervals:
    """The 95 % intervals of the row's accuracy minus the frontier at its % time saved and of its extra savings (% time
    saved minus the largest % time saved at which the frontier reaches its accuracy), from RESAMPLES resamples of
    the seeds the row and every frontier point (the baseline, savings 0, and the random controls) have
    (`common_seeds`). Per resample: the row's mean accuracy and mean savings, each point's, the frontier through
    the points, and the statistic. NO_INTERVAL over fewer than MIN_SEEDS seeds, or with no random control."""
    seeds = common_seeds(row, points)
    if len(seeds) < MIN_SEEDS or len(points) < 2:
        return FrontierIntervals(NO_INTERVAL, NO_INTERVAL, len(seeds))
    resampled = statistics(row, points, seeds, seed_draws(len(seeds)))
    # The same statistics on the shared seeds as measured: one "resample" that draws each seed once.
    observed = statistics(row, points, seeds, np.arange(len(seeds))[None, :])
    return FrontierIntervals(percentile_interval(resampled[0]), percentile_interval(resampled[1]), len(seeds),
                             (float(observed[0][0]), float(observed[1][0])))


def statistics(row: SeedValues, points: Sequence[SeedValues], seeds: Sequence,
               draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per resample (a row of `draws`): accuracy - frontier at the row's savings, and extra savings."""
    xs, ys = curves(np.column_stack([resampled_means(point.savings, seeds, draws) for point in points]),
                    np.column_stack([resampled_means(point.accuracy, seeds, draws) for point in points]))
    savings, accuracy = resampled_means(row.savings, seeds, draws), resampled_means(row.accuracy, seeds, draws)
    return accuracy - values_at(xs, ys, savings), savings - largest_xs_at(xs, ys, accuracy)
