"""The report's plots: accuracy against % time saved (every configuration, the frontier), and accuracy against
cumulative training time (the baseline, the best sifted configuration, its nearest random control). matplotlib
runs headless (Agg); budget.py draws with the same `_pyplot`."""

from pathlib import Path

import pandas as pd

from sift_bench import report
from sift_bench.report import markdown


SAVINGS_PLOT = "accuracy_vs_savings.png"
TIME_PLOT = "accuracy_vs_time.png"
BREAK_EVEN_PLOT = "break_even.png"
PLOT_FILES = (SAVINGS_PLOT, TIME_PLOT, BREAK_EVEN_PLOT)
BREAK_EVEN_CAPTION = ("Per task and scoring rule's configuration: the scoring cost ratio it would break even at "
                      "against the uniform-subsampling frontier at equal work (filled circle; an arrow at the right "
                      "edge where its accuracy is above every frontier point) and the ratio measured here (cross). "
                      "A cross left of its circle: the scoring is cheap enough for the rule to beat the frontier.")
SAVINGS_PLOT_CAPTION = ("Test accuracy against % training time saved, per task: the gray line is the "
                        "uniform-subsampling frontier (the baseline at 0 and the random controls), every other "
                        "configuration a numbered point, its number in the key under the axes. Error bars: std over "
                        "seeds.")


def _pyplot():
    # Only a report that draws loads matplotlib, and pyplot only once the Agg backend (no display) is chosen.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _task_title(rows: pd.DataFrame, task) -> str:
    model, dataset = report.first_present(rows["model"]), report.first_present(rows["dataset"])
    return f"{markdown.fmt(task)} ({markdown.fmt(model)}, {markdown.fmt(dataset)})"


# Offsets (points, from the label's lower left corner) tried in turn for a point's number: eight directions on
# rings ever farther out, so the numbers of crowded points do not overlap; beyond the first ring a thin line
# leads back to the point.
LABEL_SIZE = (11, 9)  # a number's box in points at fontsize 7: up to two digits
LABEL_OFFSETS = tuple((round(radius * dx) - (LABEL_SIZE[0] if dx < 0 else 0) + (2 if dx >= 0 else -2),
                       round(radius * dy) - (LABEL_SIZE[1] if dy < 0 else 0) + (2 if dy >= 0 else -2))
                      for radius in (4, 14, 26, 40)
                      for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0)))
NEAR_LABELS = 8  # the first ring: no leader line


def place_labels(axis, positions: list[tuple[float, float]]) -> list[int]:
    """Greedy placement: for each point (data coordinates) the index into LABEL_OFFSETS of the first offset whose
    label box overlaps neither an earlier label nor any point's marker; the first offset when all overlap."""
    to_points = 72.0 / axis.figure.dpi
    anchors = [tuple(axis.transData.transform(position) * to_points) for position in positions]
    width, height = LABEL_SIZE
    markers = [(x - 3, y - 3, x + 3, y + 3) for x, y in anchors]
    placed, chosen = [], []
    for x, y in anchors:
        def overlaps(box):
            return any(box[0] < other[2] and other[0] < box[2] and box[1] < other[3] and other[1] < box[3]
                       for other in placed + markers)
        boxes = [(x + dx, y + dy, x + dx + width, y + dy + height) for dx, dy in LABEL_OFFSETS]
        free = next((i for i, box in enumerate(boxes) if not overlaps(box)), 0)
        placed.append(boxes[free])
        chosen.append(free)
    return chosen


def plot_accuracy_vs_savings(table: pd.DataFrame, scale: str, path: Path) -> None:
    """Per task, test accuracy against % time saved: the uniform-subsampling frontier as a line through the
    baseline and the random controls, every other configuration a numbered point (error bars = std over seeds)
    coloured by sifter, with a key of number -> configuration under the axes."""
    plt = _pyplot()
    tasks = list(table["task"].drop_duplicates())
    most = max((int(report.is_sifted(table[table["task"] == task]).sum()) for task in tasks), default=0)
    figure, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 4.8 + 0.17 * most), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        rows = table[table["task"] == task]
        axis.set_title(_task_title(rows, task))
        axis.set_xlabel("% training time saved vs baseline")
        axis.set_ylabel("test accuracy (%)")
        if not (rows["sifter"] == report.BASELINE).any():
            axis.text(0.5, 0.5, "no baseline at this scale:\n% savings unknown", transform=axis.transAxes,
                      ha="center", va="center")
            continue
        points = report.frontier_points(rows).dropna(subset=["frontier_x", "test_accuracy"])
        points = points.sort_values("frontier_x", kind="stable")
        axis.plot(points["frontier_x"], points["test_accuracy"], color="gray", marker="s", markersize=4,
                  label="frontier: baseline + random controls")
        sifted = rows[report.is_sifted(rows)].dropna(subset=["pct_time_savings", "test_accuracy"])
        colors = {sifter: f"C{number % 10}" for number, sifter in enumerate(sifted["sifter"].drop_duplicates())}
        keys = []
        for number, (_, row) in enumerate(sifted.iterrows(), start=1):
            axis.errorbar([row["pct_time_savings"]], [row["test_accuracy"]],
                          yerr=[0 if pd.isna(row["test_accuracy_std"]) else row["test_accuracy_std"]],
                          fmt="o", color=colors[row["sifter"]], capsize=3, markersize=4,
                          label=f"{number}: {row['config']} ({row['pct_accepted']:.0f} % kept)")
            keys.append(number)
        axis.autoscale_view()
        positions = list(zip(sifted["pct_time_savings"], sifted["test_accuracy"]))
        for number, position, choice in zip(keys, positions, place_labels(axis, positions)):
            leader = {"arrowstyle": "-", "color": "gray", "linewidth": 0.5} if choice >= NEAR_LABELS else None
            axis.annotate(str(number), position, textcoords="offset points", xytext=LABEL_OFFSETS[choice],
                          fontsize=7, ha="left", va="bottom", arrowprops=leader)
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    figure.suptitle(f"scale={scale}: mean over seeds, error bars = std; a point above the gray line beats uniform "
                    "subsampling at equal time", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def _curve(history: pd.DataFrame, run_ids: list[str]) -> pd.DataFrame:
    """Mean cumulative train time and accuracy over a configuration's seeds at each evaluation step."""
    points = history[history["run_id"].isin(run_ids)].dropna(subset=["train_time_s", "test_accuracy"])
    return points.groupby("step").agg(train_time_s=("train_time_s", "mean"), accuracy=("test_accuracy", "mean"),
                                      accuracy_std=("test_accuracy", "std")).reset_index()


def plot_accuracy_vs_time(table: pd.DataFrame, history: pd.DataFrame, kinds: dict[str, str], scale: str,
                          path: Path) -> dict[str, tuple[str, list[str]]]:
    """Per task, accuracy against cumulative training time for the baseline, the best sifted configuration
    and its paired random control, from the runs of one machine kind (`kinds`: run_id -> kind), the kind with
    the most runs among those configurations, since seconds of two kinds do not compare.
    Returns task -> (the kind drawn, the LINE_ROLES of the lines drawn, in order); empty (and no file) when there
    is no history to draw."""
    best = report.best_sifted(table)
    pairs = report.pair_controls(table)
    tasks = list(table["task"].drop_duplicates())
    plt = _pyplot()
    figure, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.5), squeeze=False)
    drawn = {}
    for axis, task in zip(axes[0], tasks):
        rows = table[table["task"] == task]
        axis.set_title(_task_title(rows, task))
        axis.set_xlabel("cumulative training time (s)")
        axis.set_ylabel("test accuracy (%)")
        lines = [(rows[rows["sifter"] == report.BASELINE].head(1), "baseline (sifter=none)", "black", "-", "baseline")]
        if task in best:
            sifted = table.loc[[best[task]]]
            lines.append((sifted, f"best sifted: {sifted['config'].iloc[0]}", "C0", "-", "sifted"))
            pair = pairs[(pairs["task"] == task) & (pairs["config"] == sifted["config"].iloc[0])]
            if len(pair) and pd.notna(pair["nearest_control"].iloc[0]):
                nearest = pair["nearest_control"].iloc[0]
                control = rows[(rows["sifter"] == report.CONTROL) & (rows["config"] == nearest)]
                lines.append((control, f"nearest control: {nearest}", "C1", "--", "control"))
        lines = [line for line in lines if not line[0].empty]
        run_ids = [run_id for config, *_ in lines for run_id in config["run_ids"].iloc[0].split()]
        plotted = pd.Series([kinds.get(run_id) for run_id in run_ids], dtype=object).dropna()
        kind = plotted.value_counts(sort=False).idxmax() if len(plotted) else None
        for config, label, color, style, role in lines:
            curve = _curve(history, [run_id for run_id in config["run_ids"].iloc[0].split()
                                     if kinds.get(run_id) == kind])
            if curve.empty:
                continue
            axis.errorbar(curve["train_time_s"], curve["accuracy"], yerr=curve["accuracy_std"].fillna(0),
                          color=color, linestyle=style, marker="o", markersize=3, capsize=2, label=label)
            drawn.setdefault(task, (kind, []))[1].append(role)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=8)
        else:
            axis.text(0.5, 0.5, "no metric history", transform=axis.transAxes, ha="center", va="center")
    if drawn:
        figure.suptitle(f"scale={scale}: mean over seeds at each evaluation, error bars = std", fontsize=9)
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    plt.close(figure)
    return drawn


# What each line of accuracy_vs_time.png is, as its caption names it.
LINE_ROLES = {"baseline": "the baseline",
              "sifted": "the best sifted configuration",
              "control": "the random control nearest it in % accepted"}


def time_plot_caption(drawn: dict[str, tuple[str, list[str]]]) -> str:
    """The caption of accuracy_vs_time.png, naming per task the lines drawn there and no others."""
    def listed(roles: list[str]) -> str:
        names = [LINE_ROLES[role] for role in roles]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

    per_task = "; ".join(f"{markdown.fmt(task)} on `{kind}`: {listed(roles)}" for task, (kind, roles) in drawn.items())
    caption = ("Accuracy against cumulative training time at each evaluation (test accuracy, mean over the seeds run "
               f"on one machine kind per task), per task: {per_task}.")
    if any("sifted" in roles for _, roles in drawn.values()):
        caption += (" The best sifted configuration is chosen on validation: the equal-time headline's, else the most "
                    f"time saved within {report.HEADLINE_TOLERANCE:g} points of the baseline, else the most accurate.")
    return caption


def plot_break_even(table: pd.DataFrame, scale: str, path: Path) -> bool:
    """Per task, one line per configuration that scores: its break_even_scoring_cost (a filled circle; an arrow at
    the axis' right edge where it is infinite) and its measured scoring_cost_ratio (a cross). Returns whether it
    drew anything (no file when no configuration scored)."""
    scoring = table[report.is_sifted(table) & (table["samples_scored"] > 0)]
    if scoring.empty:
        return False
    plt = _pyplot()
    tasks = list(scoring["task"].drop_duplicates())
    most = max(int((scoring["task"] == task).sum()) for task in tasks)
    figure, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 1.2 + 0.35 * most), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        rows = scoring[scoring["task"] == task].iloc[::-1]
        finite = rows["break_even_scoring_cost"].replace([float("inf"), float("-inf")], float("nan"))
        right = max(1.0, 1.2 * max(finite.max(skipna=True) if finite.notna().any() else 0.0,
                                   rows["scoring_cost_ratio"].max(skipna=True)))
        left = min(0.0, 1.2 * finite.min(skipna=True)) if finite.notna().any() else 0.0
        positions = range(len(rows))
        axis.scatter(finite, positions, color="C0", label="break-even scoring cost ratio", zorder=3)
        unbounded = rows["break_even_scoring_cost"] == float("inf")
        axis.scatter([right] * int(unbounded.sum()), [p for p, u in zip(positions, unbounded) if u], marker=">",
                     color="C0", zorder=3)
        axis.scatter(rows["scoring_cost_ratio"], positions, marker="x", color="C3", label="measured here", zorder=3)
        axis.axvline(0.0, color="gray", linewidth=0.5)
        axis.set_xlim(left, right * 1.02)
        axis.set_yticks(list(positions), [markdown.fmt(config) for config in rows["config"]], fontsize=7)
        axis.set_xlabel("scoring seconds per sample / training seconds per sample")
        axis.set_title(_task_title(table[table["task"] == task], task), fontsize=9)
        axis.legend(fontsize=7, loc="lower right")
    figure.suptitle(f"scale={scale}: where scoring stops paying, at equal work against uniform subsampling",
                    fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return True
