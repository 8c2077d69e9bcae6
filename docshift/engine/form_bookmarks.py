"""The bookmark Word keeps around each of a document's form fields, put back where LibreOffice's export leaves it out.

Word names a form field (a text box, a check box, a drop-down of a protected form) by a bookmark around it: a
``REF Text1`` field shows what was typed into it, and a macro reaches it as ``FormFields("Text1")`` or
``Bookmarks("Text1")``. LibreOffice keeps the name as the field's own (its ODF's fieldmark, the .docx's
``w:ffData/w:name``) and its OOXML export writes no bookmark: of 253 .doc files of the corpus and LibreOffice's tests,
6 lost 64 such bookmarks, and `tdf120225_textControlCrossRef.doc`'s ``REF Text1`` then points at nothing.

``mend`` reads the .doc's bookmark names (SttbfBkmk) where the result has form fields. In each part of the text
(body, headers, footers, notes), each form field whose name is one of them and no bookmark of the result's gets
``w:bookmarkStart`` before the run that begins it and ``w:bookmarkEnd`` after the run that ends it, as Word writes
them, with ids after those the document uses. A field the .doc leaves unnamed (LibreOffice calls it "Unnamed")
gets none.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from docshift.engine import ooxml
from docshift.engine.cfb import CompoundFile
from docshift.engine.embedding import PartEdit, edit_parts, guarded, part_bytes
from docshift.engine.inventory.common import Unreadable, stream
from docshift.engine.inventory.doc import _fib
from docshift.engine.inventory.doc_bullets import bookmark_names
from docshift.engine.inventory.package import NS_W, SEP, Package

RUN, FIELD_CHAR, NAME, FORM = (f"{NS_W}{SEP}{local}" for local in ("r", "fldChar", "name", "ffData"))
TYPE, VALUE = f"{NS_W}{SEP}fldCharType", f"{NS_W}{SEP}val"
TEXT_PARTS = re.compile(r"word/(document|header[0-9]*|footer[0-9]*|footnotes|endnotes)\.xml")
BOOKMARK = re.compile(rb"<w:bookmarkStart\b[^>]*>")
BOOKMARK_NAME, BOOKMARK_ID = re.compile(rb'\bw:name="([^"]*)"'), re.compile(rb'\bw:id="([0-9]+)"')


@dataclass
class _Taken:
    """The bookmarks of a document: the names it has, the names of the .doc's that may go in, the next id free."""
    names: set[str]
    wanted: set[str]
    next_id: int = 1


@dataclass
class _Field:
    """A field open in a text: where the run that begins it starts, its form field's name, whether it has ended."""
    begins: int
    name: str | None = None
    ended: bool = False


def mend(result: Path, source: Path, kind: str) -> int:
    """Give each form field of ``result`` (LibreOffice's export of the .doc ``source``) the bookmark of its name,
    where the .doc has a bookmark of that name and the result none. Returns how many went in (0: the file is
    untouched). Never raises for what the files hold."""
    if kind != "doc":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        texts = [name for name in package.names if TEXT_PARTS.fullmatch(name)]
        forms = [name for name in texts if package.holds(name, b"<w:ffData")]
        if not forms:
            return
        taken = _Taken(names=set(), wanted=_bookmarks_of(source))
        for name in texts:
            for tag in BOOKMARK.finditer(part_bytes(package, name)):
                named, number = BOOKMARK_NAME.search(tag.group()), BOOKMARK_ID.search(tag.group())
                taken.names.add(named.group(1).decode() if named else "")
                taken.next_id = max(taken.next_id, int(number.group(1)) + 1 if number else 0)
        for name in forms:
            yield name, lambda data, part: bookmarked(data, part, taken)

    return guarded(lambda result, _: edit_parts(result, parts), result, source,
                   "the form fields' bookmarks of %s stay out: %r")


def _bookmarks_of(source: Path) -> set[str]:
    """The names of the bookmarks of the .doc ``source``."""
    with CompoundFile(source) as ole:
        word = stream(ole, "WordDocument")
        if word is None:
            return set()
        doc = _fib(word, lambda name: stream(ole, name))
    return set(bookmark_names(doc.table, doc.pair))


def bookmarked(data: bytes, part: str, taken: _Taken) -> tuple[bytes, int]:
    """(the text part ``part`` (``data``) with a bookmark around each form field whose name ``taken`` lacks,
    ``taken`` brought up to date; how many went in)."""
    runs: list[int] = []  # where each open w:r starts
    fields: list[_Field] = []
    found: list[tuple[int, int, str]] = []  # (where its first run starts, where its last run ends, its name)
    in_form = False

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal in_form
        if tag == RUN:
            runs.append(reader.CurrentByteIndex)
        elif tag == FIELD_CHAR and runs and attributes.get(TYPE) == "begin":
            fields.append(_Field(runs[-1]))
        elif tag == FIELD_CHAR and fields and attributes.get(TYPE) == "end":
            fields[-1].ended = True
        elif tag == FORM:
            in_form = True
        elif tag == NAME and in_form and fields and fields[-1].name is None:
            fields[-1].name = attributes.get(VALUE)

    def end(tag: str) -> None:
        nonlocal in_form
        if tag == FORM:
            in_form = False
        elif tag == RUN and runs:
            runs.pop()
            if fields and fields[-1].ended:
                done = fields.pop()
                if done.name:
                    found.append((done.begins, data.index(b">", reader.CurrentByteIndex) + 1, done.name))

    reader = ooxml.parser(part, Unreadable, start, end)
    ooxml.feed(reader, (data,), part, Unreadable)
    inserts: list[tuple[int, bytes]] = []
    for begins, ends, name in found:
        if name in taken.names or name not in taken.wanted:
            continue
        taken.names.add(name)
        number, taken.next_id = taken.next_id, taken.next_id + 1
        inserts += [(begins, f'<w:bookmarkStart xmlns:w="{NS_W}" w:id="{number}" '
                             f'w:name="{ooxml.attribute_value(name)}"/>'.encode()),
                    (ends, f'<w:bookmarkEnd xmlns:w="{NS_W}" w:id="{number}"/>'.encode())]
    out, at = [], 0
    for position, element in sorted(inserts, key=lambda item: item[0]):
        out += [data[at:position], element]
        at = position
    return b"".join([*out, data[at:]]), len(inserts) // 2
