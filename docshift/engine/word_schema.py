"""A text's XML as its schema has it: properties in their order, dates that are dates, shape types that are numbers,
no attribute VML has not.

WordprocessingML gives the children of most property elements as a sequence: each child has its place. LibreOffice
25.2's DOCX export writes some of them out of it (a plain ``soffice --convert-to`` the same), each seen in the
corpus's 58 .doc files:

- a list level's number format after its paragraph style or its legal numbering (``<w:lvl><w:start/><w:pStyle/>
  <w:numFmt/>``), in every level of a list bound to heading styles: 21 of the 58;
- a section's properties first in the properties of the paragraph that ends it (``<w:pPr><w:sectPr>...``), where
  they come after the paragraph's own and its mark's: 5;
- a paragraph mark's tracked insertion or deletion after its formatting, where they come first (``w:rPr``): 1;
- the protection of a form after the compatibility settings at the end of the settings, where it comes near their
  start (``w:documentProtection``): 1; and, in 2 of 528 other texts, the rule not to hyphenate capitals before the
  hyphenation zone, which it follows.

It also writes a tracked change or a comment whose .doc gives it no date (Word 97 keeps none for a comment) with
the date ``0-00-00T00:00:00Z``, which is no date at all (the schema makes ``w:date`` optional), and the shape type
of an embedded object's picture as its relationship's id (``<v:shapetype o:spt="ole_rId2" path="m@4@5l@4@11@9@11
@9@5xe"``), where VML has a number: that path is a picture frame's, shape type 75, as Word writes it (4 of the 58).
A tracked change of a run's formatting whose .doc names no formatting it had comes out as ``<w:rPrChange .../>``,
where the schema requires the formatting it had inside (1 of 528 other texts, 7 changes): Word writes an empty
``<w:rPr/>`` there, which says the same. In the VML it writes as each drawing's fallback (read by Word 2007; Word
2010 and later read the DrawingML beside it), a shape's name goes into ``ID``, an attribute VML has not, beside VML's
own ``id`` (``<v:rect id="shape_0" ID="Freeform 83"``: every named shape), and an arc, a rectangle or an oval may
have a ``path``, which only a free shape and a shape type have (24 of the 528 other texts held no other error).

Word for Windows reads such a part; a reader that follows the schema (the Open XML SDK's validator) refuses it, and
Word for the web is reported to open such a file as damaged. ``mend`` moves each child of those elements to its
place, its bytes as they were and the bytes between them where they were, leaves out each ``w:date`` that is not
a date, numbers those shape types, gives those changes their empty formatting and leaves out those VML attributes
(the DrawingML's ``wp:docPr`` keeps the shape's name): nothing else is added, removed or changed. An element
holding a child the tables below do not know (another namespace's, an extension) is left in the order it has.
"""

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from docshift.engine import ooxml
from docshift.engine.embedding import PartEdit, edited, root_frame, spliced
from docshift.engine.inventory.common import Unreadable
from docshift.engine.inventory.package import NS_W, SEP, Package

NS_M = "http://schemas.openxmlformats.org/officeDocument/2006/math"
NS_SL = "http://schemas.openxmlformats.org/schemaLibrary/2006/main"
PARTS = r"word/(?:document|header\d*|footer\d*|footnotes|endnotes|comments|numbering|settings|styles)\.xml"
# what LibreOffice writes out of order, as its bytes show it: (a string a part holding it must hold, found fast, and
# the pattern that tells); a part without any of these is not parsed
SUSPECTS = [
    (b"</w:sectPr>", re.compile(rb"</w:sectPr>\s*<w:(?!pPrChange[\s/>])")),  # a sibling after a paragraph's section
    *((f"<w:{change}".encode(), re.compile(rf"/>\s*<w:{change}\s".encode()))  # a mark's change after its formatting
      for change in ("ins", "del", "moveFrom", "moveTo")),
    *((f"<w:{first}".encode(), re.compile(rf"<w:{first}\b[^>]*/>\s*<w:(?:start|numFmt|lvlRestart)[\s/>]".encode()))
      for first in ("pStyle", "isLgl")),  # a level's format after its style or its legal numbering
    (b"Protection", re.compile(rb"<w:(?:documentProtection|writeProtection)[\s/>]"))]  # anywhere in the settings
SETTINGS_PART = "word/settings.xml"  # a few hundred bytes, always parsed: LibreOffice writes a caps rule early too
# an object's picture's shape type that LibreOffice names for the object's relationship: a picture frame
OBJECT_SHAPE_TYPE = re.compile(rb'(<v:shapetype\s[^>]*?\bo:spt=")ole_[^"]*"')
# the start and end tags of the elements a pattern's match is looked for in (1: an end tag; 2: an empty one)
CONTAINER_TAG = re.compile(rb"<(/?)w:(?:pPr|lvl)(?=[\s/>])" + ooxml.IN_TAG + rb"*?(/?)>")
# a tracked change of formatting that names none of the formatting it had (LibreOffice writes one so where the .doc
# gives a run's change no properties: tdf120711.doc), and the element the schema requires inside it: none then
CHANGE_HOLDS = {b"rPrChange": b"rPr", b"pPrChange": b"pPr", b"tblPrChange": b"tblPr", b"trPrChange": b"trPr",
                b"tcPrChange": b"tcPr", b"tblPrExChange": b"tblPrEx"}
EMPTY_CHANGE = re.compile(rb"<w:(" + b"|".join(CHANGE_HOLDS) + rb")(?=[\s/>])(" + ooxml.IN_TAG + rb"*?)"
                          rb"(?:/>|>(\s*)</w:\1>)")
NO_DATE = re.compile(rb'\sw:date="(?!-?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")[^"]*"')
# in a drawing's VML (the fallback of its DrawingML, which Word 2010 and later read): a shape's name in an attribute
# VML has not, ``ID`` (LibreOffice writes it beside VML's own ``id``; the DrawingML's ``wp:docPr`` keeps the name),
# and a path on a shape of a set kind (an arc, a rectangle, an oval), which its kind and size draw: only a free shape
# and a shape type have one; a tag holds each at most once
QUOTED = rb"""(?:"[^"]*"|'[^']*')"""
VML_NAME = re.compile(rb"(<v:[A-Za-z]+(?=\s)" + ooxml.IN_TAG + rb"*?)\sID=" + QUOTED)
VML_PATH = re.compile(rb"(<v:(?!shape(?:type)?\s)[A-Za-z]+(?=\s)" + ooxml.IN_TAG + rb"*?)\spath=" + QUOTED)

# CT_PPrBase, the paragraph's own properties
PARAGRAPH = ["pStyle", "keepNext", "keepLines", "pageBreakBefore", "framePr", "widowControl", "numPr",
             "suppressLineNumbers", "pBdr", "shd", "tabs", "suppressAutoHyphens", "kinsoku", "wordWrap",
             "overflowPunct", "topLinePunct", "autoSpaceDE", "autoSpaceDN", "bidi", "adjustRightInd", "snapToGrid",
             "spacing", "ind", "contextualSpacing", "mirrorIndents", "suppressOverlap", "jc", "textDirection",
             "textAlignment", "textboxTightWrap", "outlineLvl", "divId", "cnfStyle"]
# EG_RPrBase, a run's formatting: a choice, in any order
RUN = ["rStyle", "rFonts", "b", "bCs", "i", "iCs", "caps", "smallCaps", "strike", "dstrike", "outline", "shadow",
       "emboss", "imprint", "noProof", "snapToGrid", "vanish", "webHidden", "color", "spacing", "w", "kern",
       "position", "sz", "szCs", "highlight", "u", "effect", "bdr", "shd", "fitText", "vertAlign", "rtl", "cs", "em",
       "lang", "eastAsianLayout", "specVanish", "oMath"]
LEVEL = ["start", "numFmt", "lvlRestart", "pStyle", "isLgl", "suff", "lvlText", "lvlPicBulletId", "legacy", "lvlJc",
         "pPr", "rPr"]
SETTINGS = [
    "writeProtection", "view", "zoom", "removePersonalInformation", "removeDateAndTime", "doNotDisplayPageBoundaries",
    "displayBackgroundShape", "printPostScriptOverText", "printFractionalCharacterWidth", "printFormsData",
    "embedTrueTypeFonts", "embedSystemFonts", "saveSubsetFonts", "saveFormsData", "mirrorMargins",
    "alignBordersAndEdges", "bordersDoNotSurroundHeader", "bordersDoNotSurroundFooter", "gutterAtTop",
    "hideSpellingErrors", "hideGrammaticalErrors", "activeWritingStyle", "proofState", "formsDesign",
    "attachedTemplate", "linkStyles", "stylePaneFormatFilter", "stylePaneSortMethod", "documentType", "mailMerge",
    "revisionView", "trackRevisions", "doNotTrackMoves", "doNotTrackFormatting", "documentProtection",
    "autoFormatOverride", "styleLockTheme", "styleLockQFSet", "defaultTabStop", "autoHyphenation",
    "consecutiveHyphenLimit", "hyphenationZone", "doNotHyphenateCaps", "showEnvelope", "summaryLength",
    "clickAndTypeStyle", "defaultTableStyle", "evenAndOddHeaders", "bookFoldRevPrinting", "bookFoldPrinting",
    "bookFoldPrintingSheets", "drawingGridHorizontalSpacing", "drawingGridVerticalSpacing",
    "displayHorizontalDrawingGridEvery", "displayVerticalDrawingGridEvery", "doNotUseMarginsForDrawingGridOrigin",
    "drawingGridHorizontalOrigin", "drawingGridVerticalOrigin", "doNotShadeFormData", "noPunctuationKerning",
    "characterSpacingControl", "printTwoOnOne", "strictFirstAndLastChars", "noLineBreaksAfter", "noLineBreaksBefore",
    "savePreviewPicture", "doNotValidateAgainstSchema", "saveInvalidXml", "ignoreMixedContent",
    "alwaysShowPlaceholderText", "doNotDemarcateInvalidXml", "saveXmlDataOnly", "useXSLTWhenSaving",
    "saveThroughXslt", "showXMLTags", "alwaysMergeEmptyNamespace", "updateFields", "hdrShapeDefaults", "footnotePr",
    "endnotePr", "compat", "docVars", "rsids", f"{NS_M}{SEP}mathPr", "attachedSchema", "themeFontLang",
    "clrSchemeMapping", "doNotIncludeSubdocsInStats", "doNotAutoCompressPictures", "forceUpgrade", "captions",
    "readModeInkLockDown", "smartTagType", f"{NS_SL}{SEP}schemaLibrary", "shapeDefaults", "doNotEmbedSmartTags",
    "decimalSymbol", "listSeparator"]


def _tag(local: str) -> str:
    """The expat tag of a WordprocessingML element named ``local`` (a tag already, where it has a namespace)."""
    return local if SEP in local else f"{NS_W}{SEP}{local}"


def _places(*groups: list[str]) -> dict[str, int]:
    """{tag: its place}: each group after the one before, the children of a group all in one place."""
    return {_tag(local): place for place, group in enumerate(groups) for local in group}


# {element: {child: its place}}: the paragraph's (CT_PPr; its style's and its change's have fewer children), its
# mark's or a run's (CT_ParaRPr, CT_RPr), a list level's (CT_Lvl), the settings (CT_Settings)
ORDERS: dict[str, dict[str, int]] = {
    _tag("pPr"): _places(*([local] for local in [*PARAGRAPH, "rPr", "sectPr", "pPrChange"])),
    _tag("rPr"): _places(["ins", "del", "moveFrom", "moveTo"], RUN, ["rPrChange"]),
    _tag("lvl"): _places(*([local] for local in LEVEL)),
    _tag("settings"): _places(*([local] for local in SETTINGS)),
}


@dataclass
class _Open:
    """An element being read: where its start tag is, and, where its children have an order, their tags and
    spans."""
    start: int
    places: dict[str, int] | None
    children: list[tuple[str, int, int]] = field(default_factory=list)


def mend(result: Path, kind: str) -> int:
    """Put the children of the properties of the .docx ``result`` in their schema's order, leave out its dates
    that are none and its VML's attributes VML has not, and number its objects' shape types. Returns how many
    elements changed (0: the file is untouched). Never raises for what the file holds."""
    if kind != "doc":
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        for name in package.matching(PARTS):
            yield name, valid

    return edited(result, parts, "the XML of %s stays as LibreOffice wrote it: %r")


def valid(data: bytes, name: str) -> tuple[bytes, int]:
    """Part ``name`` (``data``) put in order (``ordered``) without its dates that are none, its objects' pictures
    typed as picture frames, its empty tracked changes of formatting given what they had (nothing), without the VML
    attributes VML has not, and how many elements changed."""
    data, count = ordered(data, name)
    data, dates = NO_DATE.subn(b"", data) if b'w:date="' in data else (data, 0)
    data, types = OBJECT_SHAPE_TYPE.subn(rb'\g<1>75"', data) if b'o:spt="ole_' in data else (data, 0)
    data, changes = EMPTY_CHANGE.subn(_held, data) if b"PrChange" in data or b"PrExChange" in data else (data, 0)
    data, names = VML_NAME.subn(rb"\1", data) if b"ID=" in data else (data, 0)
    data, paths = VML_PATH.subn(rb"\1", data) if b"path=" in data else (data, 0)
    return data, count + dates + types + changes + names + paths


def _held(change: re.Match[bytes]) -> bytes:
    """An empty tracked change of formatting given the empty properties the schema requires: it had none."""
    kind, attributes, space = change.group(1), change.group(2), change.group(3) or b""
    return b"<w:%s%s><w:%s/>%s</w:%s>" % (kind, attributes, CHANGE_HOLDS[kind], space, kind)


def ordered(data: bytes, name: str) -> tuple[bytes, int]:
    """Part ``name`` (``data``) with the children of each element of ``ORDERS`` in their order, and how many
    elements were put in order. Only the paragraph properties and list levels the ``SUSPECTS`` are found in are
    parsed, each on its own (``_fragments``), except in the settings, or where the part's tags do not nest as its
    fragments would need: then the whole part is."""
    if name == SETTINGS_PART:
        return _ordered(data, name)
    hits = [found.start() for marker, pattern in SUSPECTS if marker in data for found in pattern.finditer(data)]
    if not hits:
        return data, 0
    try:
        return _fragments(data, name, hits)
    except Unreadable:  # a prefix declared between the root and a fragment, or tags that do not nest
        return _ordered(data, name)


def _fragments(data: bytes, name: str, hits: list[int]) -> tuple[bytes, int]:
    """``ordered``, the outermost ``w:pPr`` and ``w:lvl`` elements that hold one of ``hits`` parsed together inside
    the part's root start tag (which declares LibreOffice's prefixes), and nothing else parsed."""
    spans = _containers(data, name)
    starts = [lo for lo, _ in spans]
    chosen = sorted({spans[index] for hit in hits if (index := bisect_right(starts, hit) - 1) >= 0
                     and hit < spans[index][1]})
    if not chosen:  # each match lies outside any properties and level (runs inserted after an empty element)
        return data, 0
    frame = root_frame(data)
    if frame is None:
        raise Unreadable(f"{name}: no root element")
    head, tail = frame
    written, count = _ordered(b"".join([head, *(data[lo:hi] for lo, hi in chosen), tail]), name)
    if not count:
        return data, 0
    edits, at = [], len(head)  # putting children in order keeps each element's length: each is where it was
    for lo, hi in chosen:
        if written[at:at + hi - lo] != data[lo:hi]:
            edits.append((lo, hi, written[at:at + hi - lo]))
        at += hi - lo
    return spliced(data, edits), count


def _containers(data: bytes, name: str) -> list[tuple[int, int]]:
    """The spans of the outermost ``w:pPr`` and ``w:lvl`` elements of part ``name`` (``data``) that have children,
    from their tags alone; ``Unreadable`` where those do not nest."""
    spans: list[tuple[int, int]] = []
    depth, opened = 0, 0
    for tag in CONTAINER_TAG.finditer(data):
        if tag.group(1):
            depth -= 1
            if depth < 0:
                raise Unreadable(f"{name}: an end tag with no start")
            if depth == 0:
                spans.append((opened, tag.end()))
        elif not tag.group(2):
            if depth == 0:
                opened = tag.start()
            depth += 1
    if depth:
        raise Unreadable(f"{name}: a start tag with no end")
    return spans


def _ordered(data: bytes, name: str) -> tuple[bytes, int]:
    """``ordered``, the whole part parsed."""
    stack: list[_Open] = []
    edits: list[tuple[int, int, bytes]] = []  # none overlapping; an element put in order holds its children's
    count = 0

    def start(tag: str, _: dict[str, str]) -> None:
        stack.append(_Open(reader.CurrentByteIndex, ORDERS.get(tag)))

    def end(tag: str) -> None:
        nonlocal count
        element = stack.pop()
        if stack and stack[-1].places is not None:
            stack[-1].children.append((tag, element.start,
                                       ooxml.element_end(data, element.start, reader.CurrentByteIndex, name)))
        places, children = element.places, element.children
        if places is None or len(children) < 2 or any(child not in places for child, _, _ in children):
            return
        rank = [places[child] for child, _, _ in children]
        if rank == sorted(rank):
            return
        lo, hi = children[0][1], children[-1][2]
        inner = [edit for edit in edits if lo <= edit[0] and edit[1] <= hi]
        edits[:] = [edit for edit in edits if not (lo <= edit[0] and edit[1] <= hi)]
        moved = sorted(children, key=lambda child: places[child[0]])  # stable: a group keeps its order
        pieces: list[bytes] = []
        for index, (slot, child) in enumerate(zip(children, moved, strict=True)):
            if index:  # what lies between two children stays between them
                pieces.append(_piece(data, children[index - 1][2], slot[1], inner))
            pieces.append(_piece(data, child[1], child[2], inner))
        edits.append((lo, hi, b"".join(pieces)))
        count += 1

    reader = ooxml.parser(name, Unreadable, start, end)
    ooxml.feed(reader, (data,), name, Unreadable)
    return (spliced(data, edits), count) if edits else (data, 0)


def _piece(data: bytes, start: int, end: int, edits: list[tuple[int, int, bytes]]) -> bytes:
    """``data[start:end]`` with those of ``edits`` that lie within it made."""
    within = [(lo - start, hi - start, written) for lo, hi, written in edits if start <= lo and hi <= end]
    return spliced(data[start:end], within)
