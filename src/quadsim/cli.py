"""The ``quadsim`` command. Exit codes: 0 success, 2 bad input, 1 simulation failure."""

from __future__ import annotations

import argparse
import sys

from . import __version__

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quadsim", description="Physics-based quadrotor simulation.")
    p.add_argument("--version", action="version", version=f"quadsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("presets", help="list the drone presets")
    b = sub.add_parser("bench", help="measure drone-steps per second (and the peers, if installed)")
    b.add_argument("--quick", action="store_true", help="a run of about a minute")
    b.add_argument("--json", metavar="FILE", help="also write the table as JSON records")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``quadsim`` command."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "presets":
            from .params import list_presets

            print("\n".join(list_presets()))
            return 0
        if args.command == "bench":
            from .bench import main as bench_main

            return bench_main(quick=args.quick, json_path=args.json)
    except ValueError as e:
        print(f"quadsim: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"quadsim: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
