"""Who wrote each note of a workbook, put back into the .xlsx's comments.

An .xls keeps each note's author in its NOTE record (stAuthor), and Excel shows the name on the note and in the
Review pane. LibreOffice's import does not read it: its export, a plain ``soffice``'s too, gives every comment the
one author "Unknown Author", and the name is left only as the bold text Excel starts a note with: in each of the
28 workbooks with notes among 372 of POI's tests (443 notes).

``mend`` writes each sheet's authors (``Inventory.authors``: {sheet: {cell: author}}) into its comments part: the
``authors`` list becomes the names in the order the comments first use them, and each ``comment`` of a cell the .xls
names gets its author's ``authorId``; a comment of a cell the .xls does not name keeps the author it had. Every other
byte stays as LibreOffice wrote it.
"""

from pathlib import Path
from xml.sax.saxutils import escape

from docshift.engine import ooxml
from docshift.engine.embedding import PartEdit, edited
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_S, SEP, Package
from docshift.engine.sheet_objects import worksheets

COMMENTS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/comments"
AUTHORS, AUTHOR, COMMENT = (f"{NS_S}{SEP}{local}" for local in ("authors", "author", "comment"))


def mend(result: Path, kind: str, authors: dict[str, dict[str, str]]) -> int:
    """Give the comments of ``result`` (LibreOffice's export of an .xls) the authors of the legacy file's notes.
    Returns how many comments changed author (0: the file is untouched). Never raises for what the file holds."""
    if kind != "xls" or not any(authors.values()):
        return 0

    def parts(package: Package) -> list[tuple[str, PartEdit]]:
        found = []
        for _, sheet, part in worksheets(package):
            comments = package.related(part, COMMENTS) if authors.get(sheet) else None
            if comments:
                found.append((comments, _edit(authors[sheet])))
        return found

    return edited(result, parts, "the authors of the notes of %s stay as LibreOffice wrote them: %r")


def _edit(named: dict[str, str]) -> PartEdit:
    return lambda data, name: authored(data, name, named)


def authored(data: bytes, name: str, named: dict[str, str]) -> tuple[bytes, int]:
    """(the comments part ``name`` (``data``) with the authors ``named`` ({cell: author}) given; how many comments
    changed author)."""
    old: list[str] = []
    comments: list[tuple[str, str]] = []  # (ref, authorId) of each comment, in order
    places: dict[str, int] = {}
    text: list[str] = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == AUTHORS:
            places.setdefault("authors", reader.CurrentByteIndex)
        elif tag == AUTHOR:
            text.clear()
        elif tag == COMMENT:
            comments.append((attributes.get("ref", ""), attributes.get("authorId", "")))

    def end(tag: str) -> None:
        if tag == AUTHOR:
            old.append("".join(text))
        elif tag == AUTHORS:
            places.setdefault("authors end", reader.CurrentByteIndex)

    reader = ooxml.parser(name, Unreadable, start, end, text.append)
    ooxml.feed(reader, (data,), name, Unreadable)
    if "authors" not in places:
        return data, 0

    def was(author_id: str) -> str:
        return old[int(author_id)] if author_id.isdigit() and int(author_id) < len(old) else ""

    wanted = [named[ref] if ref in named else was(author_id) for ref, author_id in comments]  # '' too
    changed = sum(author != was(author_id) for author, (_, author_id) in zip(wanted, comments, strict=True))
    if not changed:
        return data, 0
    order = list(dict.fromkeys(wanted))
    prefix = ooxml.prefix(data, places["authors"], name)
    listed = "".join(f"<{prefix}author>{escape(author, ooxml.TEXT_REFERENCES)}</{prefix}author>" for author in order)
    end_at = ooxml.element_end(data, places["authors"], places.get("authors end", places["authors"]), name)
    data = data[:places["authors"]] + f"<{prefix}authors>{listed}</{prefix}authors>".encode() + data[end_at:]
    ids = iter(str(order.index(author)) for author in wanted)

    def given(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        if tag != COMMENT:
            return None
        author_id = next(ids)
        return {"authorId": author_id} if attributes.get("authorId") != author_id else None

    return ooxml.edit_tags(data, name, given), changed
