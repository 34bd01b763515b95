"""``python -m conformance --adapter "<command>" [--transport redis|http] [-k pattern]
[--json]``: start the servers, run the checks against the adapter, print one line per
check and a summary; exit 0 when every check passed, 1 when one failed, 2 on a usage
mistake (one line)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import shutil
import sys

from conformance.runner import as_json, run_checks, select, summary
from conformance.stack import ROOT, running_stack
from worker.embedded import EmbeddedServerError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"conformance: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m conformance",
                     description="Check a memfleet client through its adapter program.")
    parser.add_argument("--adapter", required=True,
                        help='the adapter\'s command line, e.g. "node clients/typescript/dist/'
                             'conformance/adapter.js" (run from the repository root)')
    parser.add_argument("--transport", choices=("redis", "http"), default="redis")
    parser.add_argument("-k", dest="pattern", help="only the checks whose name holds this")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    return parser


async def _run(args: argparse.Namespace) -> int:
    checks = select(args.pattern)
    async with running_stack(http=args.transport == "http") as stack:
        results = await run_checks(stack, args.adapter, args.transport, checks)
    if args.json:
        print(json.dumps(as_json(args.adapter, args.transport, results)))
    else:
        for result in results:
            print(result.line())
        print(summary(results))
    return 0 if all(r.passed for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        argv = shlex.split(args.adapter)
        if not argv:
            raise ValueError("the command is empty")
        if shutil.which(argv[0], path=None if "/" not in argv[0] else "") is None \
                and not (ROOT / argv[0]).is_file():
            raise ValueError(f"no program {argv[0]!r}")
    except ValueError as exc:
        print(f"conformance: --adapter: {exc}", file=sys.stderr)
        return 2
    if not select(args.pattern):
        print(f"conformance: -k {args.pattern!r} names no check", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args))
    except (RuntimeError, OSError, EmbeddedServerError) as exc:  # the servers, not a check
        print(f"conformance: the servers did not start: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
