"""How a workbook's sheets show when it opens, put back into the .xlsx where LibreOffice's import forgets it.

An .xls keeps each sheet's view in its WINDOW2, SCL and PANE records: the zoom, gridlines, zero values, headings,
formulas shown, columns from the right, the page break preview, the cell at the top left, frozen rows and columns,
and which sheet is selected and shown. LibreOffice 25.2 without a window (as a converter runs it) keeps them for
every sheet but the first, which comes out as a new sheet shows (100 %, gridlines on, no frozen panes), and it opens
the workbook on the first sheet whatever sheet the .xls showed: of 685 workbooks of POI's, LibreOffice's and the
corpus's, 108 lost their first sheet's zoom, hidden gridlines or frozen header rows, and 72 the sheet they opened
on. Its export of the same sheets from an .xlsx keeps all of it.

``mend`` gives each sheet's ``sheetView`` what the legacy file's view holds (``Inventory.views``, read by xlrd with
the cells) where LibreOffice wrote something else, a frozen ``pane`` where the sheet has none, and the workbook's
``workbookView`` the shown sheet as its ``activeTab``. What LibreOffice wrote as the .xls has it stays byte for
byte.
"""

from collections.abc import Iterator
from pathlib import Path
from xml.parsers import expat

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import PartEdit, edited
from docshift.engine.inventory.common import View
from docshift.engine.inventory.package import NS_S, SEP, Package
from docshift.engine.sheet_objects import cell_name
from docshift.engine.sheet_skeleton import without_cells, without_names

SHEET_VIEW, PANE, WORKBOOK_VIEW = (f"{NS_S}{SEP}{local}" for local in ("sheetView", "pane", "workbookView"))
PANES = {0: "bottomRight", 1: "topRight", 2: "bottomLeft", 3: "topLeft"}  # by PANE's pnnAct
TRUE = {"true", "1"}
VIEW_DEFAULTS = {"tabRatio": "600"}  # CT_BookView's defaults but 0
# CT_SheetView's defaults: an attribute the view leaves at its default need not be written
DEFAULTS = {"showGridLines": "true", "showZeros": "true", "showRowColHeaders": "true", "showFormulas": "false",
            "rightToLeft": "false", "tabSelected": "false", "view": "normal", "zoomScale": "100",
            "topLeftCell": "A1"}


def mend(result: Path, kind: str, views: dict[str, View], window: dict[str, str] | None = None) -> int:
    """Give the sheets of ``result`` (LibreOffice's export of an .xls) the ``views`` ({sheet name: its view}) of the
    legacy file's where they differ, and the workbook the sheet it shows and its ``window`` (workbookView's
    attributes: where the window is, its size, the first tab shown, the tabs' share of the scroll bar). Returns how
    many parts were given theirs (0: the file is untouched). Never raises for what the file holds."""
    if kind != "xls" or not (views or window):
        return 0
    return _mend(result, {name[:31]: view for name, view in views.items()}, window or {})


def _mend(result: Path, views: dict[str, View], window: dict[str, str]) -> int:
    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        sheets = sheet_objects.worksheets(package)
        for _, name, part in sheets:
            if name in views and _differs(package, part, views[name]):
                yield part, _showing(views[name])
        shown = [index - 1 for index, name, _ in sheets if name in views and views[name].shown]
        wanted = {key: value for key, value in window.items() if key not in ("windowWidth", "windowHeight")
                  or value != "0"}
        if not wanted.get("firstSheet", "0").isdigit() or int(wanted.get("firstSheet", "0")) >= len(sheets):
            wanted.pop("firstSheet", None)  # a tab the result has not
        if shown:
            wanted["activeTab"] = str(shown[0])
        if wanted and "xl/workbook.xml" in package.names:
            yield "xl/workbook.xml", _opening(wanted)

    return edited(result, parts, "the sheets' views of %s stay as LibreOffice wrote them: %r")


def _differs(package: Package, part: str, view: View) -> bool:
    """Whether the worksheet ``part`` shows otherwise than ``view``, read up to its first ``sheetView``'s end (a
    sheet's cells, which follow, are not read): where that does not tell, the whole part will."""
    head = b""
    for chunk in package.chunks(part):
        head += chunk
        if b"</sheetView>" in head or b"<sheetData" in head:
            break
    try:
        return viewed(head, part, view) != head
    except ooxml.Unreadable:
        return True


def _showing(view: View) -> PartEdit:
    """The edit of a worksheet part that shows it as ``view`` (``viewed``)."""
    return without_cells(lambda data, part: (viewed(data, part, view), 1))


def _opening(wanted: dict[str, str]) -> PartEdit:
    """The edit of the workbook part that gives its first ``workbookView`` the attributes ``wanted`` where it has
    others: the sheet it opens on, its window."""
    def edit(data: bytes, part: str) -> tuple[bytes, int]:
        seen: list[str] = []

        def changes(tag: str, attributes: dict[str, str]) -> dict[str, str] | None:
            if tag != WORKBOOK_VIEW or seen:
                return None
            seen.append(tag)
            return {key: value for key, value in wanted.items()
                    if attributes.get(key, VIEW_DEFAULTS.get(key, "0")) != value} or None

        return ooxml.edit_tags(data, part, changes), 1

    return without_names(edit)


def viewed(data: bytes, part: str, view: View) -> bytes:
    """The worksheet part ``part`` (``data``) whose first ``sheetView`` shows as ``view``, every other byte as it
    was."""
    found: list[int] = []  # where the first sheetView's start tag is
    panes: list[int] = []  # where a pane of it starts
    depth, view_depth, ended = 0, -1, False

    def start(tag: str, _: dict[str, str]) -> None:
        nonlocal depth, view_depth
        depth += 1
        if tag == SHEET_VIEW and not found:
            found.append(reader.CurrentByteIndex)
            view_depth = depth
        elif tag == PANE and depth == view_depth + 1:
            panes.append(reader.CurrentByteIndex)

    def end(_: str) -> None:
        nonlocal depth, ended
        ended = ended or depth == view_depth
        depth -= 1

    reader = ooxml.parser(part, ooxml.Unreadable, start, end)
    try:  # a sheetView comes before the cells: the part is read up to the chunk where it ends
        for offset in range(0, len(data), ooxml.CHUNK):
            reader.Parse(data[offset:offset + ooxml.CHUNK], False)
            if ended:
                break
        else:
            reader.Parse(b"", True)
    except expat.ExpatError as error:
        raise ooxml.Unreadable(f"{part}: {error}") from error
    if not found:
        return data
    at = found[0]
    _, tag_end, present = ooxml.start_tag(data, at, part)
    written = {attribute.group(1).decode(): _value(attribute.group()) for attribute in present}
    changes = {key: value for key, value in _attributes(view).items()
               if _same(written.get(key, DEFAULTS.get(key)), value) is False}
    tag, tag_done = ooxml.retagged(data, at, part, changes)
    if view.frozen is None or panes:
        return data[:at] + tag + data[tag_done:]
    rows, columns, first_row, first_column, active = view.frozen
    # a freeze of rows alone shares its columns with the pane above it, one of columns alone its rows
    pane = _pane(rows, columns, first_row if rows else view.top_left[0], first_column if columns else view.top_left[1],
                 active).encode()
    if tag_end.group().endswith(b"/>"):  # <sheetView .../>: opened, given its pane, and closed
        qualified = ooxml.start_tag(data, at, part)[0]
        return data[:at] + tag + b">" + pane + b"</" + qualified + b">" + data[tag_end.end():]
    return data[:at] + tag + data[tag_done:tag_end.end()] + pane + data[tag_end.end():]


def _attributes(view: View) -> dict[str, str]:
    """The ``sheetView`` attributes that show ``view``."""
    flag = {True: "true", False: "false"}
    preview = {"zoomScaleSheetLayoutView": str(view.preview_zoom)} if view.preview else {}
    return preview | {
        "showGridLines": flag[view.grid], "showZeros": flag[view.zeros], "showRowColHeaders": flag[view.headings],
        "showFormulas": flag[view.formulas], "rightToLeft": flag[view.right_to_left],
        "tabSelected": flag[view.selected], "view": "pageBreakPreview" if view.preview else "normal",
        "zoomScale": str(view.preview_zoom if view.preview else view.zoom), "zoomScaleNormal": str(view.zoom),
        "topLeftCell": cell_name(*view.top_left)}


def _pane(rows: int, columns: int, first_row: int, first_column: int, active: int) -> str:
    """A frozen ``pane`` of ``rows`` and ``columns`` whose lower right part starts at (``first_row``,
    ``first_column``), ``active`` being PANE's pnnAct (a pane that the freeze does not make is made its
    neighbour)."""
    name = PANES.get(active, "bottomRight")
    if not columns:
        name = "bottomLeft" if name in ("bottomRight", "bottomLeft") or rows else "topLeft"
    if not rows:
        name = "topRight" if name in ("bottomRight", "topRight") or columns else "topLeft"
    splits = (f' xSplit="{columns}"' if columns else "") + (f' ySplit="{rows}"' if rows else "")
    return (f'<pane xmlns="{NS_S}"{splits} topLeftCell="{cell_name(first_row, first_column)}" activePane="{name}" '
            'state="frozen"/>')


def _value(attribute: bytes) -> str:
    """The value of an attribute as ``ooxml.ATTRIBUTE`` matches it, without its quotes."""
    quote = attribute[-1:]
    return attribute[attribute.index(quote) + 1:-1].decode()


def _same(written: str | None, wanted: str) -> bool | None:
    """Whether ``written`` (a value LibreOffice wrote, or the default where it wrote none) shows as ``wanted``; None
    where nothing was written and nothing is a default."""
    if written is None:
        return None
    if wanted in ("true", "false"):
        return (written in TRUE) == (wanted == "true")
    return written == wanted
