"""The widget and analysis benchmarks of an earlier commit and of this tree, side by side in one run.

Checks out `--before` (default: the commit before the backend protocol) in a temporary git worktree,
runs ``bench_analysis.py --skip-tl`` and ``bench_widgets.py`` there (its package first on the path,
in the kernel too) and here, alternately for ``--rounds`` rounds, keeping each figure's fastest (load on a shared
machine only ever slows a run down; alternating gives both trees their quiet moments), and prints one table of
both with the ratio after/before. Writes ``results/before_after.json`` (or ``--out``).

    python benchmarks/bench_before_after.py [--before 977dc94] [--rounds 2] [--skip-widgets] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "before_after.json"


def run(tree: Path, script: str, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # that tree's circuitwidgets, in the kernel too
    subprocess.run([sys.executable, script, *args], cwd=tree / "benchmarks", env=env, check=True)


def analysis_rows(path: Path) -> dict[str, float]:
    data = json.loads(path.read_text())
    rows = {row["task"]: row["ours_s"] for row in data["rows"]}
    return {"ModelView build": data["view_s"], **rows}


def widget_rows(path: Path) -> dict[str, float]:
    rows = {}
    for row in json.loads(path.read_text())["rows"]:
        if "error" in row:
            continue
        rows[f"{row['widget']} first picture"] = row["first_picture_s"]
        if row.get("all_drawn_s") is not None:
            rows[f"{row['widget']} all drawn"] = row["all_drawn_s"]
        for kind in ("head", "layer"):
            switch = row.get(f"{kind}_switch") or {}
            if isinstance(switch, dict) and switch.get("median") is not None:
                rows[f"{row['widget']} {kind} switch (median)"] = switch["median"] / 1000
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="977dc94")
    parser.add_argument("--skip-widgets", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (each figure's fastest is kept)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        old = Path(folder) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old), args.before], cwd=REPO, check=True)
        try:
            table: dict[str, dict[str, float]] = {}

            def keep(task: str, name: str, value: float) -> None:
                values = table.setdefault(task, {})
                values[name] = min(value, values.get(name, value))

            for round_ in range(args.rounds):
                print(f"round {round_ + 1} of {args.rounds}", flush=True)
                for name, tree in (("before", old), ("after", REPO)):
                    out = Path(folder) / f"analysis_{name}.json"
                    run(tree, "bench_analysis.py", "--skip-tl", "--out", str(out))
                    for task, value in analysis_rows(out).items():
                        keep(task, name, value)
                if not args.skip_widgets:
                    for name, tree in (("before", old), ("after", REPO)):
                        run(tree, "bench_widgets.py")
                        for task, value in widget_rows(tree / "benchmarks" / "results" / "widgets.json").items():
                            keep(task, name, value)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=REPO, check=False)
    print(f"\n{'work':<52} {'before s':>10} {'after s':>10} {'after/before':>13}")
    for task, values in table.items():
        before, after = values.get("before"), values.get("after")
        ratio = f"{after / before:.2f}" if before and after else "-"
        print(f"{task:<52} {before or float('nan'):>10.3f} {after or float('nan'):>10.3f} {ratio:>13}")
    args.out.write_text(json.dumps({"before": args.before, "rounds": args.rounds, "seconds": table}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
