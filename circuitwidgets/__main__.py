"""Command line: `python -m circuitwidgets report [--top N] [--seed S]`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m circuitwidgets", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "report",
        help="print a table of the demo model's heads",
        description="Print, for every head of the shipped demo model, its previous-token, duplicate-token, "
        "induction, prefix-matching and direct-copying scores (on repeated random tokens), its OV copying "
        "score, and the strongest Q-, K- and V-composition pairs with their baseline-corrected values.",
    )
    report.add_argument("--top", type=int, default=5, help="composition pairs listed per kind (default 5)")
    report.add_argument("--seed", type=int, default=0, help="seed of the random tokens (default 0)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top must be at least 1; got {args.top}")

    from .demo import demo_model
    from .report import format_report

    print(format_report(demo_model(), top=args.top, seed=args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
