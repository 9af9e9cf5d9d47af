"""Open a committed store in a real `mlflow ui` and a real headless Chromium, as a reader would, and say what shows.

    apt-get install -y chromium                      # once: Debian's Chromium (not installed on a new machine)
    python experiments/check_mlflow_ui.py results/cpu [--screenshots DIR]

Starts `mlflow ui` on loopback in the store's folder (`sqlite:///mlflow.db`, its artifacts beside it), then loads in
headless Chromium (JavaScript run, the page's DOM dumped after it settles):
- the experiment's page in the model-training workflow (`?workflowType=machine_learning`: MLflow 3.17's UI opens on
  the GenAI overview otherwise, whatever the experiment's `mlflow.experimentKind` tag): it must show its runs table
  (`N matching runs`, the sweeps' parent runs `bert_table cpu ...`);
- the compare view that report.md links for the table's first row (`#/compare-runs?runs=[...]&experiments=[...]`):
  it must show that row's run ids.
Prints one line per page, `ok` or what was missing, saves a screenshot of each with --screenshots, and exits 1 if a
page failed. Nothing leaves the machine: the UI listens on 127.0.0.1, Chromium runs with its background networking
off.
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=20000", "--window-size=1600,1000"]
COMPARE_LINK = re.compile(r"\((http://127\.0\.0\.1:5000/(#/compare-runs\?[^)]+))\)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"check_mlflow_ui: {url} did not answer within {seconds:g} s")


def dump_dom(chromium: str, url: str, profile: Path, screenshot: Path | None) -> str:
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    if screenshot is not None:
        subprocess.run([chromium, *flags, f"--screenshot={screenshot}", url], capture_output=True, timeout=120)
    done = subprocess.run([chromium, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("folder", type=Path, help="a report folder holding mlflow.db and report.md, e.g. results/cpu")
    cli.add_argument("--chromium", default="/usr/bin/chromium")
    cli.add_argument("--screenshots", type=Path, default=None)
    args = cli.parse_args(argv)
    if not (args.folder / "mlflow.db").is_file() or not (args.folder / "report.md").is_file():
        cli.error(f"{args.folder} holds no mlflow.db and report.md")
    if not Path(args.chromium).exists():
        cli.error(f"--chromium {args.chromium} does not exist: apt-get install -y chromium")
    links = COMPARE_LINK.findall((args.folder / "report.md").read_text())
    if not links:
        cli.error(f"{args.folder}/report.md links no compare view (rebuild it with python -m sift_bench.report)")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", "sqlite:///mlflow.db",
                               "--host", "127.0.0.1", "--port", str(port)], cwd=args.folder,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    failed = 0
    try:
        wait_for(f"{base}/health", 90)
        first_run_ids = re.findall(r"%22([0-9a-f]{32})%22", links[0][1])
        # MLflow 3.17's UI opens an experiment in the workflow its global switch holds (GenAI by default, remembered
        # per browser); the URL's workflowType picks model training, as report.md's links do.
        pages = [("experiment", f"{base}/#/experiments/1?workflowType=machine_learning",
                  ["matching runs", "bert_table cpu", "resnet_table cpu"]),
                 ("compare", f"{base}/{links[0][1]}", first_run_ids[:1])]
        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as profile:
            for name, url, wanted in pages:
                shot = args.screenshots / f"{name}.png" if args.screenshots else None
                dom = dump_dom(args.chromium, url, Path(profile), shot)
                # The runs table draws the rows in view only: one of the wanted texts is enough.
                found = any(text in dom for text in wanted)
                status = "ok" if found else f"none of {wanted} on the page"
                failed += status != "ok"
                print(f"{name:10s} {status}  ({url}, {len(dom)} characters of DOM)")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
