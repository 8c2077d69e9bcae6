"""An OOXML result as a package: its members streamed with bounds, their relationships, and the one pass over a
content part (text, pictures, equations, placeholders) that the counts of .docx, .xlsx and .pptx share."""

import posixpath
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docshift.engine import ooxml
from docshift.engine.inventory.common import CHUNK, MAX_PART, Unreadable

SEP, W_CHARACTERS = ooxml.SEPARATOR, ooxml.WORD_CHARACTERS
NS_W, NS_P, NS_S = ooxml.WORD, ooxml.PRESENTATION, ooxml.SPREADSHEET
NS_R, NS_PR = ooxml.RELATIONSHIPS, ooxml.PACKAGE_RELATIONSHIPS
NS_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
NS_V = "urn:schemas-microsoft-com:vml"
NS_O = "urn:schemas-microsoft-com:office:office"
NS_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
NS_M = "http://schemas.openxmlformats.org/officeDocument/2006/math"
IMAGE_RELATIONSHIP = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/image"
# elements whose pictures are the rendering of something else: OLE objects, controls, alternative content
NOT_PICTURES = {f"{NS_W}{SEP}object", f"{NS_W}{SEP}control", f"{NS_P}{SEP}oleObj", f"{NS_P}{SEP}control",
                f"{NS_S}{SEP}objectPr", f"{NS_S}{SEP}controlPr", f"{NS_MC}{SEP}Fallback"}
PICTURE_REFERENCES = {f"{NS_A}{SEP}blip": (f"{NS_R}{SEP}embed",),
                      f"{NS_V}{SEP}imagedata": (f"{NS_R}{SEP}id", f"{NS_O}{SEP}relid"),
                      f"{NS_V}{SEP}fill": (f"{NS_R}{SEP}id", f"{NS_O}{SEP}relid")}
MATH = {f"{NS_M}{SEP}oMath", f"{NS_M}{SEP}oMathPara"}
HEADER_FOOTER_CONTENT = {f"{NS_W}{SEP}drawing", f"{NS_W}{SEP}pict", f"{NS_W}{SEP}object",
                         f"{NS_W}{SEP}fldSimple"}
SYMBOL, SHAPE, PLACEHOLDER = f"{NS_W}{SEP}sym", f"{NS_P}{SEP}sp", f"{NS_P}{SEP}ph"
# a hyperlink of DrawingML (a click's; the mouse passing over a shape, over a run), and the actions that are one:
# to a slide, a file, a deck
HYPERLINKS = {f"{NS_A}{SEP}hlinkClick", f"{NS_A}{SEP}hlinkHover", f"{NS_A}{SEP}hlinkMouseOver"}
LINK_ACTIONS = ("ppaction://hlinksldjump", "ppaction://hlinkfile", "ppaction://hlinkpres")
ACTIONS = ("ppaction://ole?", "ppaction://macro?")  # run a verb of the object the shape shows (verb=n), a macro
# what a scan looks at besides its text tags and counted elements; most elements of a part are formatting (run
# properties, fills, geometry), and they are let go at once
SCANNED_STARTS = W_CHARACTERS.keys() | {SYMBOL, SHAPE, PLACEHOLDER} | NOT_PICTURES | PICTURE_REFERENCES.keys() | \
    MATH | HEADER_FOOTER_CONTENT | HYPERLINKS | ooxml.FieldResults.TAGS
SCANNED_ENDS = NOT_PICTURES | MATH | {SHAPE} | ooxml.FieldResults.TAGS


def relationships_part(name: str) -> str:
    """The name of part ``name``'s relationships part (OPC: ``_rels/<name>.rels`` beside it)."""
    folder, base = posixpath.split(name)
    return posixpath.join(folder, "_rels", base + ".rels")


class Package:
    """A zip package read with bounds: members streamed, never past the size they declare nor ``MAX_PART``."""

    def __init__(self, zip_file: zipfile.ZipFile) -> None:
        self.zip = zip_file
        self.names = {info.filename: info for info in zip_file.infolist()}

    def chunks(self, name: str) -> Iterator[bytes]:
        info = self.names.get(name)
        if info is None:
            raise Unreadable(f"{name} is missing")
        if info.file_size > MAX_PART:
            raise Unreadable(f"{name} is too large")
        read = 0
        with self.zip.open(info) as part:
            while chunk := part.read(CHUNK):
                read += len(chunk)
                if read > info.file_size:
                    raise Unreadable(f"{name} inflates past its declared size")
                yield chunk

    def holds(self, name: str, *needles: bytes) -> bool:
        """Whether the bytes of ``name`` hold any of ``needles``, read with bounds and not parsed. A part whose
        bytes do not hold a name cannot hold an element of that name, nor, unless it holds a character reference
        ("&#"), an attribute value that does: a part declares no DTD, or ``parse`` refuses it."""
        overlap = max(map(len, needles)) - 1
        tail = b""
        for chunk in self.chunks(name):
            data = tail + chunk
            if any(needle in data for needle in needles):
                return True
            tail = data[-overlap:] if overlap else b""
        return False

    def parse(self, name: str, start: Callable[[str, dict[str, str]], None] | None = None,
              end: Callable[[str], None] | None = None, text: Callable[[str], None] | None = None) -> None:
        """Stream ``name`` through expat, namespaces resolved (``uri}local``); no DTDs."""
        ooxml.stream(self.chunks(name), name, start, end, text, unreadable=Unreadable)

    def relationships(self, name: str, required: bool = False) -> dict[str | None, tuple[str, str | None]]:
        """{Id: (type, target part name or None when external)} of part ``name``; a part without relationships
        has none, unless they are ``required`` (a main part's: without them the package does not open)."""
        folder = posixpath.dirname(name)
        rels_name = relationships_part(name)
        found: dict[str | None, tuple[str, str | None]] = {}
        if rels_name not in self.names:
            if required:
                raise Unreadable(f"{rels_name} is missing")
            return found

        def start(tag: str, attributes: dict[str, str]) -> None:
            if tag == f"{NS_PR}{SEP}Relationship":
                target = attributes.get("Target", "")
                resolved: str | None
                if attributes.get("TargetMode") == "External":
                    resolved = None
                elif target.startswith("/"):
                    resolved = posixpath.normpath(target)[1:]
                else:
                    resolved = posixpath.normpath(posixpath.join("/" + folder, target))[1:]
                found[attributes.get("Id")] = (attributes.get("Type", ""), resolved)

        self.parse(rels_name, start)
        return found

    def related(self, name: str, kind: str) -> str | None:
        """The first part of the package that part ``name`` relates to by a relationship of type ``kind``."""
        for rel_type, target in self.relationships(name).values():
            if rel_type == kind and target in self.names:
                return target
        return None

    def matching(self, pattern: str) -> list[str]:
        return sorted(name for name in self.names if re.fullmatch(pattern, name))


@dataclass
class Part:
    """What one content part of the result holds."""
    text: Counter[str] = field(default_factory=Counter)
    pictures: set[str] = field(default_factory=set)  # relationship ids
    math: int = 0
    content: bool = False                            # anything shown (headers and footers)
    placeholders: set[str] = field(default_factory=set)  # PresentationML placeholder types
    note_text: bool = False                          # text in a body placeholder or a free shape (notes)
    elements: Counter[str] = field(default_factory=Counter)
    computed: Counter[str] = field(default_factory=Counter)  # of ``text``: the characters of fields' results
    links: set[str] = field(default_factory=set)  # relationship ids of hyperlinks (``HYPERLINKS``, ``LINK_ACTIONS``)
    actions: int = 0  # clicks and mouse-overs that run a macro or an embedded object's verb (``ACTIONS``)


def scan(package: Package, name: str, text_tags: Iterable[str] = (), count: Iterable[str] = ()) -> Part:
    """One pass over a content part: its text (``text_tags``), pictures outside OLE objects and fallbacks,
    equations, placeholders, and how many of the elements ``count`` it holds."""
    part = Part()
    state: dict[str, Any] = {"text": 0, "hidden": 0, "math": 0, "sp": None}
    fields = ooxml.FieldResults()
    text_tags = set(text_tags)
    count = set(count)
    starts, ends = SCANNED_STARTS | text_tags | count, SCANNED_ENDS | text_tags

    def shown(chars: str) -> None:
        part.text.update(chars)
        if fields.inside:
            part.computed.update(chars)

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag not in starts:
            return
        if tag in text_tags:
            state["text"] += 1
        elif tag in W_CHARACTERS:
            shown(W_CHARACTERS[tag])
            part.content = True
        elif tag == SYMBOL:
            try:
                shown(chr(int(attributes.get(f"{NS_W}{SEP}char", ""), 16)))
            except ValueError:
                pass
        elif tag in ooxml.FieldResults.TAGS:
            fields.start(tag, attributes)
        elif tag in HYPERLINKS:
            action = attributes.get("action", "")
            if attributes.get(f"{NS_R}{SEP}id") and (not action or action.startswith(LINK_ACTIONS)):
                part.links.add(attributes[f"{NS_R}{SEP}id"])
            part.actions += action.startswith(ACTIONS)
        if tag in NOT_PICTURES:
            state["hidden"] += 1
        elif tag in PICTURE_REFERENCES and not state["hidden"]:
            for attribute in PICTURE_REFERENCES[tag]:
                if attributes.get(attribute):
                    part.pictures.add(attributes[attribute])
        if tag in MATH:
            if not state["math"]:
                part.math += 1
            state["math"] += 1
        if tag in HEADER_FOOTER_CONTENT:
            part.content = True
        if tag in count:
            part.elements[tag] += 1
        if tag == SHAPE:
            state["sp"] = [None, []]
        elif tag == PLACEHOLDER:
            kind = attributes.get("type", "body")
            part.placeholders.add(kind)
            if state["sp"] is not None:
                state["sp"][0] = kind

    def end(tag: str) -> None:
        if tag not in ends:
            return
        if tag in text_tags:
            state["text"] -= 1
        elif tag in ooxml.FieldResults.TAGS:
            fields.end(tag)
        elif tag in NOT_PICTURES:
            state["hidden"] -= 1
        elif tag in MATH:
            state["math"] -= 1
        elif tag == SHAPE and state["sp"] is not None:
            kind, texts = state["sp"]
            if kind == "body" and "".join("".join(texts).split()):
                part.note_text = True
            state["sp"] = None

    def text(data: str) -> None:
        if state["text"]:
            chars = "".join(data.split())
            if chars:
                shown(chars)
                part.content = True
                if state["sp"] is not None:
                    state["sp"][1].append(chars)

    package.parse(name, start, end, text)
    return part


def pictures_of(package: Package, name: str, part: Part,
                relationships: dict[str | None, tuple[str, str | None]] | None = None) -> set[str]:
    """The media parts that ``part`` (content part ``name``, whose ``relationships`` may be given) shows as
    pictures."""
    return set(picture_references(package, name, part, relationships).values())


def picture_references(package: Package, name: str, part: Part,
                       relationships: dict[str | None, tuple[str, str | None]] | None = None) -> dict[str, str]:
    """{relationship id: media part} of the pictures ``part`` (content part ``name``) shows: LibreOffice writes a
    relationship for each picture it places, so these are its placements, though two may show one media part."""
    if not part.pictures:
        return {}
    relationships = package.relationships(name) if relationships is None else relationships
    found: dict[str, str] = {}
    for rid in part.pictures:
        rel_type, target = relationships.get(rid, ("", None))
        if target and rel_type == IMAGE_RELATIONSHIP and target in package.names:
            found[rid] = target
    return found


def pictures_in(package: Package, name: str) -> set[str]:
    """The media parts that part ``name`` shows as pictures, when nothing else is wanted of it (a master, a
    layout, a drawing): a part with no relationship to a picture shows none, and is not read (a .pptx from
    LibreOffice has a dozen layouts per master, most of them without one)."""
    relationships = package.relationships(name)
    if not any(rel_type == IMAGE_RELATIONSHIP for rel_type, _ in relationships.values()):
        return set()
    return pictures_of(package, name, scan(package, name), relationships)


def has_vba_part(path: str | Path) -> bool:
    """Does the package hold a vbaProject.bin (read from its directory only)? True when that cannot be told."""
    try:
        with zipfile.ZipFile(path) as zip_file:
            return any(name.lower().endswith("vbaproject.bin") for name in zip_file.namelist())
    except Exception:
        return True


def charts_and_objects(package: Package, folder: str) -> tuple[int, int]:
    """(charts, embedded objects) of the package: chart parts, and embeddings no chart refers to."""
    charts = package.matching(rf"{folder}/charts/chart[0-9]*\.xml")
    data: set[str] = set()
    for chart in charts:
        data |= {target for _, target in package.relationships(chart).values() if target}
    objects = [name for name in package.matching(rf"{folder}/embeddings/[^/]+") if name not in data]
    return len(charts), len(objects)
