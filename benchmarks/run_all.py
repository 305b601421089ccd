"""Run every benchmark script in this folder, one after another (`make bench`).

Each script prints its table and writes JSON to benchmarks/results/; run one alone to pass
it options (e.g. `python benchmarks/bench_analysis.py --skip-tl`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        if subprocess.call([sys.executable, str(script)]) != 0:
            failed.append(script.name)
    limits = HERE / "results" / "limits.json"
    if limits.exists():  # the one table: every view against the work it must do (bench_limits.py)
        sys.path.insert(0, str(HERE))
        from bench_limits import print_table

        print("\n=== every view against its bound (results/limits.json) ===")
        print_table(json.loads(limits.read_text()))
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
