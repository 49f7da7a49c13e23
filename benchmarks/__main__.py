"""``python -m benchmarks [name ...] [--write-docs]``: run kafkapy's benchmarks."""

from __future__ import annotations

import argparse
import time

from benchmarks import Options, available, load, update_docs_section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="name",
                        help=f"benchmarks to run (default: all of {', '.join(available())})")
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the results into docs/performance.md")
    parser.add_argument("--repeats", type=int, default=Options.repeats,
                        help="timed blocks per measurement (default %(default)s)")
    parser.add_argument("--block-seconds", type=float, default=Options.block_seconds,
                        help="approximate length of one timed block (default %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="one tiny block per measurement: checks the benchmarks run, numbers are noise")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(available()))
        return 0
    if args.quick and args.write_docs:
        parser.error("--quick numbers are not worth writing down; drop --write-docs")
    unknown = sorted(set(args.names) - set(available()))
    if unknown:
        parser.error(f"no benchmark {', '.join(unknown)}; available: {', '.join(available())}")
    options = Options(repeats=args.repeats, block_seconds=args.block_seconds, quick=args.quick)
    for name in args.names or available():
        module = load(name)
        started = time.perf_counter()
        print(f"== {name}: {module.TITLE}", flush=True)
        report = module.run(options)
        print(report.text)
        print(f"({name} took {time.perf_counter() - started:.1f} s)\n", flush=True)
        if args.write_docs:
            update_docs_section(name, module.TITLE, report.markdown)
            print(f"wrote the {name!r} section of docs/performance.md\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
