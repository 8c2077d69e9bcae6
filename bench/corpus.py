"""Compatibility of the conversion engine over any folder of .doc/.xls/.ppt files, against a cold
``soffice --convert-to`` of the same LibreOffice on the same files, in the same run.

Each file goes through the worker's engine (pre-check, then a fresh child of a preinitialised LibreOffice:
detection, load, OOXML, its XML read back and compared); its outcome is set beside the cold soffice's (a valid
OOXML document or not), and where both converted, what our result holds is compared with the cold one's: sheet
names, slide count, text. No running docshift is needed.

    .venv/bin/python bench/corpus.py [FOLDER]        # default ../shared/corpus
"""

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

import reference

from docshift.engine import Forkit, convert, precheck
from docshift.errors import ConversionFailed

HERE = Path(__file__).resolve().parent


def convert_warm(office, path, timeout):
    """(outcome, detected_format, content of our result or None, seconds) of one file."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-") as work:
        try:
            precheck.check(path)
            converted = convert.convert(office, path, reference.kind(path), work, timeout)
        except ConversionFailed as failure:
            return f"FAILED {failure.code}", failure.detected_format, None, time.perf_counter() - started
        ours = reference.content(converted.path, reference.kind(path))
    return "SUCCEEDED", converted.detected_format, ours, time.perf_counter() - started


def amount(facts):
    """Sheets, slides and non-whitespace characters of text, as one row of counts."""
    facts = facts or {}
    return Counter(sheets=len(facts.get("sheets", [])), slides=facts.get("slides", 0),
                   text=sum(facts.get("text", {}).values()))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, nargs="?", default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per file, ours and cold")
    args = parser.parse_args()
    files = sorted(p for p in args.folder.rglob("*") if p.suffix.lower() in (".doc", ".xls", ".ppt"))
    if not files:
        raise SystemExit(f"no .doc, .xls or .ppt files under {args.folder}")

    cold = reference.Cold(files, args.timeout)
    office = Forkit(Path(tempfile.mkdtemp(prefix="bench-office-")), name="bench")
    office.start()
    rows = []
    try:
        for path in files:
            outcome, found, ours, seconds = convert_warm(office, path, args.timeout)
            expected, _ = cold.result(path)
            rows.append((path, outcome, found, ours, expected, seconds))
    finally:
        office.close()
        cold.close()

    print(f"# docshift engine against a cold soffice: {len(files)} files under {args.folder.name}\n")
    print("| type | files | cold soffice valid | SUCCEEDED | both | only cold | only ours | content as cold |")
    print("|---|---|---|---|---|---|---|---|")
    disagreements, kept, cold_total = [], Counter(), Counter()
    for kind in ["doc", "xls", "ppt", "all"]:
        mine = [r for r in rows if kind == "all" or reference.kind(r[0]) == kind]
        valid = [r for r in mine if r[4] is not None]
        succeeded = [r for r in mine if r[1] == "SUCCEEDED"]
        both = [r for r in valid if r[1] == "SUCCEEDED"]
        same = [r for r in both if convert.content_lost(r[4], r[3]) is None]
        print(f"| {kind} | {len(mine)} | {len(valid)} | {len(succeeded)} | {len(both)} | {len(valid) - len(both)} "
              f"| {len(succeeded) - len(both)} | {len(same)}/{len(both)} |")
        if kind == "all":
            for path, outcome, found, ours, expected, _ in mine:
                if (expected is not None) != (outcome == "SUCCEEDED"):
                    disagreements.append(f"{path.relative_to(args.folder)}: cold "
                                         f"{'valid' if expected is not None else 'nothing'}, ours {outcome} ({found})")
                elif expected is not None and convert.content_lost(expected, ours):
                    disagreements.append(f"{path.relative_to(args.folder)}: {convert.content_lost(expected, ours)}")
                if expected is not None and outcome == "SUCCEEDED":
                    kept.update(amount(ours))
                    cold_total.update(amount(expected))

    print("\ncontent of the files both converted, ours / the cold soffice's:")
    for what in ("sheets", "slides", "text"):
        print(f"- {what}: {kept[what]} / {cold_total[what]}")
    print("\noutcomes:")
    for (outcome, found), n in sorted(Counter((r[1], r[2]) for r in rows).items(), key=str):
        print(f"- {outcome} {found or ''}: {n}")
    seconds = sorted(r[5] for r in rows)
    print(f"\nours, per file: median {seconds[len(seconds) // 2]:.2f} s, max {seconds[-1]:.1f} s, "
          f"total {sum(seconds):.0f} s")
    print(f"\ndisagreements with the cold soffice: {len(disagreements)}")
    for line in disagreements:
        print(f"  {line}")
    failed = [r for r in rows if r[1] != "SUCCEEDED"]
    print(f"\nfailed here ({len(failed)}), and what the cold soffice made of each:")
    for path, outcome, found, _, expected, _ in failed:
        print(f"  {path.relative_to(args.folder)}: ours {outcome} ({found}), cold "
              f"{'valid' if expected is not None else 'nothing'}")


if __name__ == "__main__":
    main()
