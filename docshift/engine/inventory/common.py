"""What the readers of the inventory share: the kinds and their labels, :class:`Inventory`, the record budget, the
values of cells, the text as counted, and the OLE helpers of the three legacy formats.

Work is bounded: OLE streams are read whole only up to ``MAX_STREAM``, zip members are streamed and never inflated
past the size they declare nor ``MAX_PART``, record walks share a budget of ``MAX_RECORDS`` per file and nest at
most ``MAX_DEPTH`` deep.
"""

import re
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import olefile

from docshift.errors import InventoryUnreadable as Unreadable

KINDS = {
    "doc": ("characters", "images", "embedded_objects", "comments", "headers_footers", "macros"),
    "xls": ("sheets", "cells", "images", "embedded_objects", "charts", "shapes", "comments", "headers_footers",
            "controls", "hyperlinks", "actions", "macros", "macro_sheets", "dde_links"),
    "ppt": ("slides", "notes", "characters", "images", "embedded_objects", "sounds", "comments", "headers_footers",
            "hyperlinks", "actions", "macros"),
}
LABELS = {"sheets": "sheets", "slides": "slides", "notes": "notes pages", "images": "images",
          "embedded_objects": "embedded objects", "charts": "charts", "comments": "comments",
          "headers_footers": "headers and footers", "macros": "VBA modules", "cells": "cells",
          "characters": "characters", "sounds": "sounds", "hyperlinks": "hyperlinks",
          "actions": "actions", "controls": "controls", "shapes": "drawing shapes",
          "macro_sheets": "Excel 4.0 macro sheets", "dde_links": "DDE links"}
SHEET_NAME_LIMIT = 31
MAX_STREAM = 16 << 20  # uploads are at most 4 MiB (settings.MAX_UPLOAD_BYTES)
MAX_PART = 256 << 20
MAX_RECORDS = 2_000_000
MAX_DEPTH = 32
CHUNK = 1 << 20

# MS Graph and Equation Editor (LibreOffice turns them into a chart / a formula) by the CLSID of their storage
MSGRAPH_CLSIDS = {"00020801-0000-0000-C000-000000000046", "00020803-0000-0000-C000-000000000046"}
EQUATION_CLSIDS = {"0002CE02-0000-0000-C000-000000000046"}
EMBEDDED = ("object", "equation", "chart")  # the kinds of OLE storage that count as embedded objects
# Microsoft Clip Gallery's picture in an OLE 1 wrapper: the clip's category and path, nothing to open, no server
# anywhere; Office and LibreOffice show its picture (a .doc's preview, or nothing), so it is no embedded object
CLIP_ART = "MS_ClipArt_Gallery"

CONTROL: dict[int, str | None] = dict.fromkeys(range(0x20))
CONTROL.update({0x1E: "\u2011", 0x1F: "\u00ad"})  # non-breaking and soft hyphens: .docx writes them as elements
# a sheet's header or footer codes that place or format what follows and show nothing themselves: its sections,
# a font and its size, bold, italic, underline, strikeout, super- and subscript, a colour
FORMAT_CODES = re.compile(r'&(?:[LCRBIUESXYH]|"[^"]*"|[0-9]+|K[0-9A-Fa-f]{6}|K[0-9]{2}[+-][0-9]{3})')
FOLDED = "\uffff"  # stands for any character beyond ASCII in the text of a Word 6/95 file


class ErrorValue(str):
    """An error value of a cell (#N/A, #DIV/0! ...), told apart from text."""


class StoredDate(float):
    """A number stored in a date-formatted .xls cell (shifted when the result's 1904 date system differs)."""


class Link(NamedTuple):
    """A hyperlink of a sheet's cells (.xls, as xlrd reads its HLINK record): the rows and columns it covers (0-based,
    first and last), where it goes (a URL or a file's path; "" for a place in the workbook), the place in the
    workbook or the target it goes to ("" for none), its text and its tip."""
    rows: tuple[int, int]
    columns: tuple[int, int]
    target: str
    location: str
    display: str
    tip: str


class DdeItem(NamedTuple):
    """An item of a DDE link (an EXTERNNAME of the link's SUPBOOK: [MS-XLS] 2.4.106): its name, whether Excel asks
    the server for updates (fWantAdvise) and for a picture (fWantPict), and whether it is the link's
    ``StdDocumentName`` (fOle), which names the topic itself and no value."""
    name: str
    advise: bool
    picture: bool
    ole: bool


class DdeLink(NamedTuple):
    """A DDE link of an .xls: the server's service and topic (a SUPBOOK's virtPath, split at its 0x03) and its
    items."""
    service: str
    topic: str
    items: list[DdeItem]


class View(NamedTuple):
    """How a sheet of an .xls shows when the workbook opens, as xlrd reads its WINDOW2, SCL and PANE records: the
    zoom (percent) of the normal view and of the page break preview, and whether that preview shows; whether it
    shows gridlines, zero values, row and column headings, formulas in place of their values, its columns from the
    right; whether its tab is selected, and whether it is the sheet shown; the cell at its top left (row, column,
    0-based); its frozen panes, (rows, columns, the first row and column of the pane below and right of them, the
    active pane as PANE's pnnAct numbers it), or None."""
    zoom: int
    preview_zoom: int
    preview: bool
    grid: bool
    zeros: bool
    headings: bool
    formulas: bool
    right_to_left: bool
    selected: bool
    shown: bool
    top_left: tuple[int, int]
    frozen: tuple[int, int, int, int, int] | None


class Selection(NamedTuple):
    """What a pane of an .xls sheet has selected (a SELECTION record, [MS-XLS] 2.4.248): the pane (PANE's pnn: 3 the
    top left, 1 the top right, 2 the bottom left, 0 the bottom right), the active cell (row, column, 0-based), which
    of the ranges holds it, and the ranges (first and last row, first and last column; a whole row or column reaches
    to the end of an Excel 2007 sheet)."""
    pane: int
    active: tuple[int, int]
    active_range: int
    ranges: tuple[tuple[int, int, int, int], ...]


class Ignored(NamedTuple):
    """Cells of an .xls sheet whose errors Excel is not to flag (a FEAT record of ISFFEC2): their ranges (first and
    last row, first and last column, 0-based) and the checks, as ``ignoredError`` names them
    (``numberStoredAsText``)."""
    ranges: tuple[tuple[int, int, int, int], ...]
    checks: tuple[str, ...]


class Scale(NamedTuple):
    """A conditional format of Excel 2007 on an .xls sheet that needs no formula (a CF12 record): its ranges (first
    and last row, first and last column), its priority, and its rule as a ``cfRule`` writes it: the type
    ("colorScale", "dataBar", "iconSet"), the attributes of the element of that name, each threshold's ``cfvo``
    attributes and each ``color``'s."""
    ranges: tuple[tuple[int, int, int, int], ...]
    priority: int
    kind: str
    attributes: tuple[tuple[str, str], ...]
    thresholds: tuple[tuple[tuple[str, str], ...], ...]
    colours: tuple[tuple[tuple[str, str], ...], ...]


class ThemeFont(NamedTuple):
    """A font of a .ppt's font collection (its FontEntityAtom, [MS-PPT] 2.9.16), as DrawingML names one: its
    typeface, and its LOGFONT's character set and pitch and family, each a signed byte."""
    typeface: str
    charset: int
    pitch_family: int


class Palette(NamedTuple):
    """The theme of a .ppt's main master, as PowerPoint gives it to a .pptx: the name of the colour scheme,
    its twelve colours in ``SCHEME_SLOTS`` order, each (RRGGBB, the system colour it stands for or ""), and whether
    the background is a dark colour (the master's colour map then reads bg1 as dk2, tx1 as lt1, bg2 as dk1 and tx2
    as lt2); and the name of the master's design (its TemplateNameAtom: "Blueprint"), "" where it has none."""
    name: str
    colours: tuple[tuple[str, str], ...]
    dark: bool
    design: str = ""
    fonts: tuple[ThemeFont | None, ...] = ()  # the theme's major Latin, major East Asian, minor Latin, minor East
    # Asian fonts: the master's title's and body's first level's, as the .ppt's font collection names them


SCHEME_SLOTS = ("dk1", "lt1", "dk2", "lt2", "accent1", "accent2", "accent3", "accent4", "accent5", "accent6",
                "hlink", "folHlink")


@dataclass
class Inventory:
    """What one file holds: ``counts`` {what: int, or None when unknown}, and what the report compares in detail."""
    kind: str
    counts: dict[str, int | None]
    sheets: list[str] | None = None  # sheet names in order (.xls / .xlsx)
    cells: dict[str, dict[bytes, Any]] | None = None  # {sheet name: {b"B1": value}}; None when unreadable
    formulas: dict[str, set[bytes]] = field(default_factory=dict)  # result: {sheet: {refs of cells with a formula}}
    date1904: bool = False
    text: Counter[str] | None = None  # non-whitespace characters of the body text
    computed: Counter[str] | None = None  # a .docx result's: those of them in fields' results
    macros: dict[str, str] | None = None  # {VBA module name: code}
    project: Any = None  # .doc/.xls and their results: the VBA project storage (``vbaproject.Storage``), if any
    where: dict[str, list[str]] = field(default_factory=dict)  # {what: [place names]} to name what is missing
    broken_chain: bool = False  # .ppt: its chain of edits (UserEditAtoms) does not reach the first save
    macro_actions: list[str] = field(default_factory=list)  # of ``where["actions"]``, those that run a macro
    unsized_notes: list[bytes] = field(default_factory=list)  # .xls: the cell anchors of notes whose box has no height
    # .doc whose pages show a header or footer: its sections, and {section: where its break code is in the
    # WordDocument stream} of the continuous ones (after the first) whose own headers or footers a page shows, which
    # LibreOffice's import drops
    sections: int = 0
    continuous_headers: dict[int, int] = field(default_factory=dict)
    # pictures placed: an RTF source's (it keeps no store of distinct pictures, so ``images`` counts each it shows),
    # and a .docx result's (each picture relationship of its content parts, as LibreOffice writes one a placement)
    placed_pictures: int | None = None
    # a SpreadsheetML source's: LibreOffice's import drops its booleans and errors, which the result gets back
    # (``stored.restore``)
    cells_restored: bool = False
    links: dict[str, list[Link]] = field(default_factory=dict)  # an .xls's: {sheet name: the hyperlinks of its cells}
    # a .ppt's: {slide number: (milliseconds after which it moves on by itself or None, whether a click moves it on)}
    # of the slides that do not wait for a click alone
    advances: dict[int, tuple[int | None, bool]] = field(default_factory=dict)
    # an .xls's: {sheet name: its view}, where a sheet's view is not Excel's default or the sheet shown not the first
    views: dict[str, View] = field(default_factory=dict)
    # an .xls's: {sheet name: what each of its panes has selected}, where that is not the first cell alone
    selections: dict[str, list[Selection]] = field(default_factory=dict)
    # an .xls's: the attributes of calcPr where it calculates by hand or shows R1C1 references ({"calcMode": "manual"})
    calculation: dict[str, str] = field(default_factory=dict)
    # an .xls's: the sheets only a macro unhides, and the attributes of fileSharing where it asks to be opened
    # read-only or has a password to be written
    very_hidden: list[str] = field(default_factory=list)
    chart_sheets: list[str] = field(default_factory=list)  # an .xls's sheets that are a chart alone (BOUNDSHEET dt 2)
    sharing: dict[str, str] = field(default_factory=dict)
    protection: dict[str, str] = field(default_factory=dict)  # an .xls's workbookProtection, where locked
    window: dict[str, str] = field(default_factory=dict)  # an .xls's workbookView: its window, first tab, tab ratio
    dde: list[DdeLink] = field(default_factory=list)  # an .xls's DDE links, in its SUPBOOKs' order
    # an Excel 2.x-4.0 worksheet's: the name its one sheet is counted under; it has none of its own, and is compared
    # with the result's one sheet, whatever LibreOffice names that (the file's name, or Sheet1)
    unnamed_sheet: str | None = None
    properties: dict[str, str] = field(default_factory=dict)  # {docProps element: text} LibreOffice drops
    # the custom XML parts of its data store, each (its XML, its properties' XML or None), which LibreOffice drops
    data_store: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    authors: dict[str, dict[str, str]] = field(default_factory=dict)  # an .xls's: {sheet: {cell: its note's author}}
    # an .xls's: {sheet name: the attributes of pageSetup} where it prints otherwise than Excel's default
    printing: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # an .xls's: {sheet name: its margins, in inches, as pageMargins names them} where its records give them
    margins: dict[str, dict[str, float]] = field(default_factory=dict)
    ignored: dict[str, list[Ignored]] = field(default_factory=dict)  # an .xls's: {sheet name: errors not to flag}
    scales: dict[str, list[Scale]] = field(default_factory=dict)  # an .xls's: {sheet name: its formats of Excel 2007}
    # an .xls's: {sheet name: the attributes of outlinePr} where a sheet's outline is not as Excel's default
    outlines: dict[str, dict[str, str]] = field(default_factory=dict)
    # a .ppt's: {slide number: the theme colours of the main master it uses}
    palettes: dict[int, Palette] = field(default_factory=dict)
    # a .ppt's: the attributes of the presentation that its DocumentAtom's flags give (no footers on title slides,
    # right to left), where LibreOffice writes their defaults
    presentation: dict[str, str] = field(default_factory=dict)
    # a .ppt's: whether any text's formatting turns a text shadow on (None: unknown)
    shadows: bool | None = None

    def facts(self) -> dict[str, Any] | None:
        """Of a result's inventory: the facts that the output check compares (``ooxml.facts``), read from the same
        parts in the same way, or None where its reader could not tell."""
        if self.kind == "xls":
            return None if self.sheets is None else {"sheets": self.sheets}
        if self.kind == "ppt":
            return None if self.counts.get("slides") is None else {"slides": self.counts["slides"]}
        return None if self.text is None else {"text": self.text, "computed": self.computed or Counter()}


def biff_string(data: bytes, pos: int, end: int, biff8: bool, codepage: str, count_bytes: int = 1) -> str:
    """The text of a BIFF string at ``data[pos:end]``: BIFF8's (a count of ``count_bytes``, its flags, 8-bit
    Latin-1 or UTF-16 characters), or before BIFF8 a byte count and bytes in the workbook's code page (Windows-1252
    for one Python does not know)."""
    if not biff8:
        text = bytes(data[pos + 1:min(end, pos + 1 + data[pos])])
        try:
            return text.decode(codepage, "replace")
        except LookupError:
            return text.decode("cp1252", "replace")
    if end - pos < count_bytes + 1:
        return ""
    count = int.from_bytes(data[pos:pos + count_bytes], "little")
    start = pos + count_bytes + 1
    if data[start - 1] & 1:
        return bytes(data[start:min(end, start + 2 * count)]).decode("utf_16_le", "replace")
    return bytes(data[start:min(end, start + count)]).decode("latin-1")


class Budget:
    """Records left to visit in one file, over all its walks."""

    def __init__(self, records: int = MAX_RECORDS) -> None:
        self.left = records

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise Unreadable("record budget exceeded")


def attempt(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``, or None when the structure it reads is broken."""
    try:
        return function(*args)
    except Exception:
        return None


def stream(ole: olefile.OleFileIO, name: str) -> bytes | None:
    """The whole OLE stream ``name`` (case-insensitive), None when it is missing; too large is unreadable."""
    if not ole.exists(name) or ole.get_type(name) != olefile.STGTY_STREAM:
        return None
    if ole.get_size(name) > MAX_STREAM:
        raise Unreadable(f"stream {name} too large")
    with ole.openstream(name) as opened:
        return opened.read(MAX_STREAM)


def embedded_objects(ole: olefile.OleFileIO, parent: str | None = None, prefix: str = "") -> int | None:
    """How many of the OLE object storages under ``parent`` (the root when None), whose names start with
    ``prefix``, are embedded objects (MS Graph charts and equations included; not linked objects, not ActiveX
    controls); None when one of them cannot be read."""
    storages: list[str] = []
    members: dict[str, set[str]] = {}
    for entry in ole.listdir(streams=True, storages=True):
        depth = 0 if parent is None else 1
        if parent is not None and (len(entry) < 2 or entry[0].lower() != parent.lower()):
            continue
        if len(entry) == depth + 1 and entry[depth].upper().startswith(prefix) \
                and ole.get_type(entry) == olefile.STGTY_STORAGE:
            storages.append("/".join(entry))
        elif len(entry) == depth + 2:
            members.setdefault("/".join(entry[:-1]).lower(), set()).add(entry[-1].lower())
    kinds = [attempt(_object_class, ole, storage, members.get(storage.lower(), set())) for storage in storages]
    return None if None in kinds else sum(1 for kind in kinds if kind in EMBEDDED)


def _object_class(ole: olefile.OleFileIO, storage: str, names: set[str]) -> str:
    """"chart" (MS Graph), "equation", "control" (ActiveX), "link" (linked, not embedded), "clip art", "picture"
    or "object"; ``names`` are the lower-case names in the storage."""
    if names and all(name.startswith("\x03") for name in names):
        # only the streams Word keeps beside an object (ObjInfo, its picture as PIC, META or PICT): no object's data
        # and no class that could open any, so Word, as LibreOffice, shows the picture and nothing more
        return "picture"
    clsid = (ole.getclsid(storage) or "").upper()
    compobj = b""
    if "\x01compobj" in names:
        compobj = attempt(stream, ole, f"{storage}/\x01CompObj") or b""
    if clsid in MSGRAPH_CLSIDS or b"MSGraph.Chart" in compobj:
        return "chart"
    if clsid in EQUATION_CLSIDS or b"Equation.3" in compobj:
        return "equation"
    if CLIP_ART.encode() in compobj:
        return "clip art"
    if "\x03ocxname" in names:
        return "control"
    if "\x01ole" in names:
        ole_stream = attempt(stream, ole, f"{storage}/\x01Ole") or b""
        if len(ole_stream) >= 8 and struct.unpack_from("<I", ole_stream, 4)[0] & 1:
            return "link"
    return "object"


def characters(text: str) -> Counter[str]:
    """The non-whitespace characters of ``text`` as a multiset, control characters left out."""
    return Counter("".join(text.translate(CONTROL).split()))


def fold(counted: Counter[str]) -> Counter[str]:
    """``counted`` (characters as a multiset) with every character beyond ASCII counted as ``FOLDED``."""
    folded = Counter({char: n for char, n in counted.items() if char < "\x80"})
    beyond = sum(n for char, n in counted.items() if char >= "\x80")
    if beyond:
        folded[FOLDED] = beyond
    return folded


def place(sheet: str, where: str) -> str:
    """A place in a workbook as the report names it: "sheet 'Name' B1"."""
    return f"sheet '{sheet[:SHEET_NAME_LIMIT]}' {where}"


def column_number(letters: bytes) -> int:
    """The number of a cell reference's column letters: A is 1, Z 26, AA 27."""
    number = 0
    for letter in letters:
        number = number * 26 + letter - 64
    return number


def header_shows(text: str) -> bool:
    """Does a sheet's header or footer text show anything (text, a field such as &P, a picture's &G), beyond
    the codes that place and format it ("&L&C&R" shows nothing)? "&&" is an ampersand."""
    return bool(FORMAT_CODES.sub("", text.replace("&&", "\x00")).strip())


def code_page(number: int) -> str:
    """The codec of a CODEPAGE record's number. 1200 (UTF-16) is BIFF8's own; an earlier workbook that says it
    (Gnumeric's Excel 95 files) has its 8-bit strings read as Windows-1252 by LibreOffice, as every other unknown
    one."""
    return "cp1252" if number in (1200, 0x8000, 0x8001, 1252) else f"cp{number}"
