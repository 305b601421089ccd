"""Command line: `python -m circuitwidgets report [--top N] [--seed S]` and
`python -m circuitwidgets page NOTEBOOK.ipynb [-o PAGE.html] [--execute]`."""

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
    page = commands.add_parser(
        "page",
        help="write a notebook as one self-contained HTML page, its circuitwidgets interactive",
        description="Write NOTEBOOK as one HTML file that opens from disk with no kernel and no network: markdown "
        "(raw HTML in it shown as text), code, outputs (HTML outputs sanitised), and every circuitwidgets widget "
        "drawn from the widget state saved in the notebook (JupyterLab: Settings > Save Widget State "
        "Automatically; or --execute). Other widgets show their saved text.",
    )
    page.add_argument("notebook", help="the .ipynb file")
    page.add_argument("-o", "--output", help="the .html file to write (default: the notebook's name, .html)")
    page.add_argument("--execute", action="store_true", help="run the notebook first (nbclient, in its folder)")
    page.add_argument("--title", help="the page's title (default: the notebook's first heading)")
    page.add_argument("--timeout", type=int, default=600, help="seconds a cell may run with --execute (default 600)")
    args = parser.parse_args(argv)
    if args.command == "page":
        return _page(args, parser)
    if args.top < 1:
        parser.error(f"--top must be at least 1; got {args.top}")

    from .demo import demo_model
    from .report import format_report

    print(format_report(demo_model(), top=args.top, seed=args.seed))
    return 0


def _page(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .widgets._page import NotebookError, notebook_page

    if args.timeout < 1:
        parser.error(f"--timeout must be at least 1; got {args.timeout}")
    try:
        path = notebook_page(
            args.notebook, args.output, execute=args.execute, title=args.title, timeout=args.timeout,
            log=lambda line: print(line, file=sys.stderr),
        )
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except NotebookError as exc:  # a cell raised under --execute
        print(f"error: the notebook raised while running:\n{exc}", file=sys.stderr)
        return 1
    print(f"{path}: {path.stat().st_size / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
