"""What ``docshift convert --report FILE.csv`` writes: one CSV row per legacy file, and ``FILE.html`` beside it,
a page to look at (counts by type and outcome, the losses by part as bars, then the files that need a look),
self-contained: no script, no CDN, nothing fetched."""

import csv
import html
import os
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from docshift.formats import FORMATS

COLUMNS = ["source", "status", "result", "complete", "lost", "error", "detected_format", "note"]
OUTCOMES = {"converted": "converted", "losses": "converted, with losses", "failed": "failed",
            "expired": "expired", "pending": "not done yet"}


@dataclass
class Row:
    """One legacy file's outcome."""

    source: str                    # as the user gave it
    kind: str                      # doc, xls or ppt
    status: str = "PENDING"        # SUCCEEDED, FAILED, EXPIRED; PENDING when the run stopped before it
    result: str = ""               # where the result was written
    complete: bool | None = None   # the fidelity report's verdict (SUCCEEDED and EXPIRED)
    lost: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""                # the code of a FAILED task, or why the client did not send the file
    message: str = ""              # what the service or the client said about the error
    detected_format: str = ""
    note: str = ""                 # resubmitted after an expiry, not sent, ...
    task_id: str = ""
    billing_class: str = ""
    replayed: bool = False         # re-attached to a task of an earlier run: not charged again
    earlier: bool = False          # finished by an earlier run: not sent at all

    @property
    def outcome(self) -> str:
        if self.status == "SUCCEEDED":
            return "losses" if self.complete is False else "converted"
        return {"FAILED": "failed", "EXPIRED": "expired"}.get(self.status, "pending")

    def cells(self) -> dict[str, str]:
        complete = "" if self.complete is None else str(self.complete).lower()
        lost = "; ".join(str(loss.get("detail") or loss.get("what")) for loss in self.lost)
        return {"source": self.source, "status": self.status, "result": self.result, "complete": complete,
                "lost": lost, "error": self.error, "detected_format": self.detected_format, "note": self.note}


def write(csv_path: Path, rows: list[Row], skipped: int) -> Path:
    """Write the CSV and the HTML beside it (each whole, or not at all); returns the HTML's path."""
    page = csv_path.with_suffix(".html")

    def table(f: Any) -> None:
        out = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        out.writeheader()
        out.writerows(row.cells() for row in rows)

    _atomic(csv_path, table)
    _atomic(page, lambda f: f.write(render(rows, skipped, page.parent)))
    return page


def _atomic(path: Path, fill: Callable[[Any], Any]) -> None:
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            fill(f)
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        os.unlink(partial)
        raise


def summary(rows: list[Row]) -> Counter[tuple[str, str]]:
    """Counts by (kind, outcome), with ``("all", outcome)`` and ``(kind, "total")``."""
    counts: Counter[tuple[str, str]] = Counter()
    for row in rows:
        for kind in (row.kind, "all"):
            counts[kind, row.outcome] += 1
            counts[kind, "total"] += 1
    return counts


def losses(rows: list[Row]) -> list[tuple[str, int, int]]:
    """``(part, files, items)`` for each part some result lost, the most files first."""
    files: Counter[str] = Counter()
    items: Counter[str] = Counter()
    for row in rows:
        for part in {loss.get("what", "other") for loss in row.lost}:
            files[part] += 1
        for loss in row.lost:
            items[loss.get("what", "other")] += int(loss.get("count") or 0)
    return sorted(((part, n, items[part]) for part, n in files.items()), key=lambda x: (-x[1], x[0]))


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _chart(parts: list[tuple[str, int, int]]) -> str:
    if not parts:
        return '<p class="none">No result lost anything the fidelity report counts.</p>'
    top, width, step = max(n for _, n, _ in parts), 360, 30
    label_w = 150
    svg = [f'<svg id="loss-chart" role="img" aria-label="files that lost something, by part" '
           f'width="{label_w + width + 190}" height="{step * len(parts) + 10}" xmlns="http://www.w3.org/2000/svg">']
    for i, (part, n, items) in enumerate(parts):
        y, w = 5 + i * step, max(2, round(width * n / top))
        svg.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">{_e(part.replace("_", " "))}</text>'
                   f'<rect class="bar" data-part="{_e(part)}" data-files="{n}" x="{label_w}" y="{y}" width="{w}" '
                   f'height="22" rx="3"><title>{_e(part)}: {_plural(n, "file")}</title></rect>'
                   f'<text x="{label_w + w + 8}" y="{y + 16}">{_plural(n, "file")}'
                   f'{f", {items:,} lost" if items else ""}</text>')
    svg.append("</svg>")
    return "".join(svg)


def render(rows: list[Row], skipped: int, here: Path) -> str:
    """The HTML report; links to results are relative to ``here``, the page's folder."""
    counts = summary(rows)
    kinds = [kind for kind in FORMATS if counts[kind, "total"]]
    head = "".join(f"<th>{_e(label)}</th>" for label in OUTCOMES.values())

    def line(kind: str, label: str) -> str:
        cells = "".join(f'<td data-outcome="{o}"{"" if counts[kind, o] else " class=zero"}>{counts[kind, o]:,}</td>'
                        for o in OUTCOMES)
        return (f'<tr data-kind="{kind}"><th>{_e(label)}</th>{cells}'
                f'<td data-outcome="total">{counts[kind, "total"]:,}</td></tr>')

    body = "".join(line(k, f"{FORMATS[k].name} (.{k})") for k in kinds) + line("all", "all")
    look = [row for row in rows if row.outcome != "converted" or row.note]
    items = []
    for row in look:
        what = "; ".join(str(loss.get("detail") or loss.get("what")) for loss in row.lost)
        note = "" if row.note in row.message else row.note
        said = " ".join(p for p in (f"{row.error}:" if row.error else "", row.message, what, note) if p)
        link = ""
        if row.result:
            href = quote(Path(os.path.relpath(Path(row.result).absolute(), here.absolute())).as_posix())
            link = f'<a href="{_e(href)}">{_e(Path(row.result).name)}</a>'
        items.append(f'<tr class="{row.outcome}"><td>{_e(row.source)}</td><td>{_e(row.status)}</td>'
                     f"<td>{_e(said)}</td><td>{link}</td></tr>")
    table = (f'<table id="look-table"><thead><tr><th>source</th><th>status</th><th>what to know</th>'
             f'<th>result</th></tr></thead><tbody>{"".join(items)}</tbody></table>'
             if items else '<p class="none">Nothing: every file converted completely.</p>')
    skipped_line = (f'<p id="skipped">{_plural(skipped, "other file")} skipped: not .doc, .xls or .ppt, '
                    "never sent.</p>")
    written = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>docshift: conversion report</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 64em; padding: 0 1em; color: #222; }}
h1 {{ font-size: 1.5em; }} h2 {{ font-size: 1.15em; margin-top: 2em; }}
table {{ border-collapse: collapse; }} th, td {{ padding: .3em .7em; border-bottom: 1px solid #ddd; text-align: left; }}
#summary td {{ text-align: right; font-variant-numeric: tabular-nums; }}
#summary tr[data-kind="all"] {{ font-weight: bold; }} #summary td.zero {{ color: #aaa; }}
#look-table td:nth-child(3) {{ max-width: 34em; }}
tr.failed td:nth-child(2), tr.expired td:nth-child(2) {{ color: #b00020; font-weight: bold; }}
tr.losses td:nth-child(2) {{ color: #a65e00; }}
svg text {{ font: 13px system-ui, sans-serif; fill: #222; }} rect.bar {{ fill: #c2571a; }}
.none, .when {{ color: #555; }}
</style></head><body>
<h1>docshift conversion report</h1>
<p class="when">{_plural(len(rows), "legacy file")}, written {written}.</p>
<section id="summary"><h2>At a glance</h2>
<table><thead><tr><th>type</th>{head}<th>total</th></tr></thead><tbody>{body}</tbody></table>
{skipped_line}</section>
<section id="losses"><h2>Losses by part</h2>
<p class="none">How many results lost something of each part, as the fidelity report counts it.</p>
{_chart(losses(rows))}</section>
<section id="look"><h2>Files that need a look</h2>{table}</section>
</body></html>
"""
