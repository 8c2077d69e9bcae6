"""End-to-end benchmark against a running docshift.

Converts every file of a folder (default: ../shared/corpus) through the HTTP API,
one at a time, and compares each outcome with ``expected.csv``. In the same run
it converts the same files with a cold ``soffice --convert-to`` and prints
submit->SUCCEEDED latency p50/p90 beside the cold times, as a ratio.

    DOCSHIFT_URL=http://127.0.0.1:8000 DOCSHIFT_API_KEY=dsk_... python bench/e2e.py [--limit N]
"""

from collections import defaultdict

import harness
from harness import quantile


def main():
    args = harness.arguments(__doc__).parse_args()
    rows = harness.corpus(args)
    bodies, api_seconds, cold_seconds = [], defaultdict(list), defaultdict(list)
    for row in rows:
        path = args.corpus / row["file"]
        seconds, body = harness.convert_through_api(args.url, args.key, path)
        bodies.append(body)
        cold, _ = harness.convert_cold(path)
        if body["status"] == "SUCCEEDED":
            api_seconds[harness.kind(row["file"])].append(seconds)
            cold_seconds[harness.kind(row["file"])].append(cold)

    print(f"# docshift e2e: {len(rows)} files from {args.corpus.name}, against {args.url}\n")
    harness.print_outcomes(rows, bodies)
    print("\nsucceeded files, submit->SUCCEEDED through the API vs a cold soffice, same files, same run:")
    print("| type | files | api p50 s | api p90 s | cold p50 s | cold p90 s | p50 api/cold |")
    print("|---|---|---|---|---|---|---|")
    for k in sorted(api_seconds) + ["all"]:
        a = [s for v in api_seconds.values() for s in v] if k == "all" else api_seconds[k]
        c = [s for v in cold_seconds.values() for s in v] if k == "all" else cold_seconds[k]
        print(f"| {k} | {len(a)} | {quantile(a, .5):.2f} | {quantile(a, .9):.2f} | {quantile(c, .5):.2f} "
              f"| {quantile(c, .9):.2f} | {quantile(a, .5) / quantile(c, .5):.2f} |")


if __name__ == "__main__":
    main()
