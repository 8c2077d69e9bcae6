"""Copies of a legacy file that LibreOffice converts better than the file as it is.

Two kinds, each made only when LibreOffice's first try shows the need, so that a file that needs neither costs nothing:

- **Mended** (the file converted, but LibreOffice lost part of it): a deck whose chain of saves is broken, relinked
  (``ppt_edits``); a workbook whose notes have boxes of no height, given boxes (``xls_notes``); a text whose continuous
  sections have headers of their own, its sections made to start pages, and the result's made continuous again
  (``doc_sections``). The copy is the file with the streams the mend changed written over, each the same size as
  before.
- **Salvaged** (LibreOffice refused the file or could not load it): a compound file whose structure is damaged, as a
  file cut short in a download is, or one whose directory gives a stream more bytes than the file holds. LibreOffice's
  reader then gives up on the whole file, and its type detection takes it for plain text, even where the stream that
  holds the document itself is whole (a workbook cut at 95% or 80% of its length, its summary properties or its VBA
  project's last stream running past the end: a plain ``soffice --convert-to`` made a sheet of the file's bytes as
  text). olefile reads such a file stream by stream. The copy holds every stream that reads whole, written as a
  sound compound file (``cfb.write``); those that do not are left out, and the fidelity report names them. A file is
  salvaged only when olefile finds its structure damaged and the document's own stream (``MAIN``) reads whole: a
  sound file that LibreOffice cannot load gains nothing from being written again.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import olefile

from docshift.engine import cfb, doc_sections, inventory, ppt_edits, xls_notes
from docshift.engine.inventory import Inventory

# the stream that holds the document itself, by type; without it whole there is nothing to salvage
MAIN = {"doc": ("worddocument",), "xls": ("workbook", "book"), "ppt": ("powerpoint document",)}
DAMAGED = ("It is a damaged compound file (the container of .doc, .xls and .ppt files), as a file cut short is, "
           "and too little of it can be read to convert.")


@dataclass(frozen=True)
class Copy:
    path: Path
    left_out: tuple[str, ...] | None = None  # salvaged: the streams that could not be read whole, left out
    finish: Callable[[Path], bool] | None = None  # mended: what the result still needs, and whether it could be done

    def kept(self, report: dict[str, Any], result: Path, kind: str) -> bool:
        """Whether LibreOffice's ``report`` on this copy, and its ``result``, stand in for the first outcome: it
        converted, and a salvaged copy's result holds something (cells, or characters): a workbook whose own stream
        is damaged too loads as one empty sheet, which is no document to bill, and the refusal, which names the
        damage, stands. A mended copy's result that needs finishing is finished here, or not kept."""
        if report["outcome"] != "converted":
            return False
        if self.left_out is None:
            return self.finish is None or self.finish(result)
        return bool(inventory.of_result(result, kind).counts.get("cells" if kind == "xls" else "characters"))


def copy(kind: str, loaded: Path, outcome: str, holds: Callable[[], Inventory], workdir: Path,
         result: Path | None = None) -> Copy | None:
    """The copy of ``loaded`` that LibreOffice's first ``outcome`` on it, and its first ``result``, call for, or
    None. ``holds()`` is what the legacy file holds (asked only of a file that converted)."""
    if outcome == "converted":
        return _mended(kind, loaded, holds(), workdir, result)
    if outcome in ("refused", "not_loaded"):
        return _salvaged(kind, loaded, workdir)
    return None


def _mended(kind: str, loaded: Path, holds: Inventory, workdir: Path, result: Path | None) -> Copy | None:
    finish = None
    if kind == "ppt" and holds.broken_chain:
        name, streams = "relinked.ppt", ppt_edits.relinked(loaded)
    elif kind == "xls" and holds.unsized_notes:
        name, streams = "sized.xls", xls_notes.sized(loaded, holds.unsized_notes)
    elif kind == "doc" and holds.continuous_headers and _headers_lost(holds, result):
        name, streams = "paged.doc", doc_sections.paged(loaded, holds.continuous_headers)
        finish = partial(doc_sections.restore, sections=holds.sections, breaks=set(holds.continuous_headers))
    else:
        return None
    if not streams:
        return None
    target = workdir / name
    shutil.copyfile(loaded, target)
    with olefile.OleFileIO(str(target), write_mode=True) as ole:
        for stream, data in streams.items():
            ole.write_stream(stream, data)
    return Copy(target, finish=finish)


def _headers_lost(holds: Inventory, result: Path | None) -> bool:
    """Whether LibreOffice's first result of a .doc has fewer headers and footers than the .doc shows on its pages:
    where it kept them all, no copy of the file is converted again."""
    found = None if result is None else inventory.of_result(result, "doc").counts.get("headers_footers")
    return found is None or found < (holds.counts.get("headers_footers") or 0)


def _salvaged(kind: str, loaded: Path, workdir: Path) -> Copy | None:
    read = _readable(loaded)
    if read is None:
        return None
    root, left_out, damaged = read
    whole = {child.name.lower() for child in root.children if child.data}
    if not damaged or not whole & set(MAIN[kind]):
        return None
    try:
        data = cfb.write(root)
    # a name no sound compound file holds, siblings of one name, storages nested past Python's stack
    except (ValueError, RecursionError):
        return None
    target = workdir / f"salvaged.{kind}"
    target.write_bytes(data)
    return Copy(target, tuple(left_out))


def damaged(path: Path) -> bool:
    """Whether ``path`` is a compound file (by its signature) whose structure is damaged: olefile cannot open it,
    finds defects in it, or cannot read one of its streams whole, or a chain of its FAT loops or crosses another.
    A file that ends within the signature, after its first half, is one cut short too."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(olefile.MAGIC))
    except OSError:
        return False
    if head != olefile.MAGIC:
        return len(olefile.MAGIC) // 2 <= len(head) < len(olefile.MAGIC) and olefile.MAGIC.startswith(head)
    read = _readable(path)
    return read is None or read[2]


def _readable(path: Path) -> tuple[cfb.Entry, list[str], bool] | None:
    """(the storage tree of every stream of ``path`` that reads whole, the paths of those that do not, whether the
    file is damaged), or None when olefile cannot open it as a compound file. The streams read add up to twice the
    file's size at most: a damaged file's chains may cross, and one that loops is not followed past that."""
    left_out: list[str] = []
    try:
        with cfb.CompoundFile(path) as ole:
            root = cfb.read_storage(ole, "", 2 * path.stat().st_size, left_out=left_out)
            return root, left_out, bool(left_out or ole.parsing_issues or cfb.chains_cross(ole))
    except Exception:  # olefile raises many kinds on a damaged file
        return None


def report(fidelity: dict[str, Any], left_out: tuple[str, ...]) -> dict[str, Any]:
    """The fidelity report of a result made from a salvaged copy: incomplete, with the streams left out named."""
    shown = ", ".join("/".join(part.lstrip("\x01\x03\x05") for part in name.split("/")) for name in left_out)
    detail = "The file is damaged (its compound file structure is broken, as in a file cut short): the result was " \
             "made from the streams that could be read. " + \
             (f"{len(left_out)} could not be read whole and were left out: {shown}." if left_out else
              "Every stream its directory still names was read whole; any it no longer names is not in the result.")
    return {**fidelity, "complete": False,
            "lost": [*fidelity["lost"], {"what": "streams", "count": len(left_out), "detail": detail}]}
