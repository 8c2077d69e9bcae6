"""How a workbook's sheets show when it opens, put back into the .xlsx where LibreOffice's import forgets it.

An .xls keeps each sheet's view in its WINDOW2, SCL and PANE records: the zoom, gridlines, zero values, headings,
formulas shown, columns from the right, the page break preview, the cell at the top left, frozen rows and columns,
and which sheet is selected and shown. LibreOffice 25.2 without a window (as a converter runs it) keeps them for
every sheet but the first, which comes out as a new sheet shows (100 %, gridlines on, no frozen panes), and it opens
the workbook on the first sheet whatever sheet the .xls showed: of 685 workbooks of POI's, LibreOffice's and the
corpus's, 108 lost their first sheet's zoom, hidden gridlines or frozen header rows, and 72 the sheet they opened
on. Its export of the same sheets from an .xlsx keeps all of it. It forgets the first sheet's selected cells too
(SELECTION records, one a pane: the active cell and the ranges selected), and the sheet opens on A1: of the 60
workbooks of unseen set 32 whose first sheet selects another cell, 38 lost it. It keeps the other sheets', but
where a sheet holds a chart or a custom view it adds their selections to the sheet's own.

``mend`` gives each sheet's ``sheetView`` what the legacy file's view holds (``Inventory.views``, read by xlrd with
the cells) where LibreOffice wrote something else, a frozen ``pane`` where the sheet has none, its panes' selections
(``Inventory.selections``) where they differ, and the workbook's ``workbookView`` the shown sheet as its
``activeTab``. What LibreOffice wrote as the .xls has it stays byte for byte.
"""

from collections.abc import Iterator
from pathlib import Path
from xml.parsers import expat

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import PartEdit, edited, spliced
from docshift.engine.inventory.common import Selection, View
from docshift.engine.inventory.package import NS_S, SEP, Package
from docshift.engine.sheet_objects import cell_name, sqref
from docshift.engine.sheet_skeleton import without_cells, without_names

SHEET_VIEW, PANE, WORKBOOK_VIEW, SELECTION = (f"{NS_S}{SEP}{local}" for local in
                                              ("sheetView", "pane", "workbookView", "selection"))
PANES = {0: "bottomRight", 1: "topRight", 2: "bottomLeft", 3: "topLeft"}  # by PANE's pnnAct
PANE_SPLITS = {3: (False, False), 1: (False, True), 2: (True, False), 0: (True, True)}  # (below rows, right of columns)
TRUE = {"true", "1"}
VIEW_DEFAULTS = {"tabRatio": "600"}  # CT_BookView's defaults but 0
# CT_SheetView's defaults: an attribute the view leaves at its default need not be written
DEFAULTS = {"showGridLines": "true", "showZeros": "true", "showRowColHeaders": "true", "showFormulas": "false",
            "rightToLeft": "false", "tabSelected": "false", "view": "normal", "zoomScale": "100",
            "topLeftCell": "A1"}


def mend(result: Path, kind: str, views: dict[str, View], window: dict[str, str] | None = None,
         selections: dict[str, list[Selection]] | None = None) -> int:
    """Give the sheets of ``result`` (LibreOffice's export of an .xls) the ``views`` ({sheet name: its view}) and
    the ``selections`` ({sheet name: its panes' selections}) of the legacy file's where they differ, and the
    workbook the sheet it shows and its ``window`` (workbookView's attributes: where the window is, its size, the
    first tab shown, the tabs' share of the scroll bar). Returns how many parts were given theirs (0: the file is
    untouched). Never raises for what the file holds."""
    if kind != "xls" or not (views or window or selections):
        return 0
    return _mend(result, {name[:31]: view for name, view in views.items()}, window or {},
                 {name[:31]: found for name, found in (selections or {}).items()})


def _mend(result: Path, views: dict[str, View], window: dict[str, str], selections: dict[str, list[Selection]]) -> int:
    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        sheets = sheet_objects.worksheets(package)
        for _, name, part in sheets:
            view, selected = views.get(name), selections.get(name, [])
            if (view is not None or selected) and _differs(package, part, view, selected):
                yield part, _showing(view, selected)
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


def _differs(package: Package, part: str, view: View | None, selections: list[Selection]) -> bool:
    """Whether the worksheet ``part`` shows otherwise than ``view`` and ``selections``, read up to its first
    ``sheetView``'s end (a sheet's cells, which follow, are not read): where that does not tell, the whole part
    will."""
    head = b""
    for chunk in package.chunks(part):
        head += chunk
        if b"</sheetView>" in head or b"<sheetData" in head:
            break
    try:
        return _shown(head, part, view, selections) != head
    except ooxml.Unreadable:
        return True


def _showing(view: View | None, selections: list[Selection]) -> PartEdit:
    """The edit of a worksheet part that shows it as ``view`` (``viewed``) with ``selections`` (``selected``)."""
    return without_cells(lambda data, part: (_shown(data, part, view, selections), 1))


def _shown(data: bytes, part: str, view: View | None, selections: list[Selection]) -> bytes:
    written = data if view is None else viewed(data, part, view)
    return selected(written, part, selections) if selections else written


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
    found = _children(data, part)
    if found is None:
        return data
    at, _, children = found
    panes = [start for tag, start, _, _ in children if tag == PANE]
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


def selected(data: bytes, part: str, selections: list[Selection]) -> bytes:
    """The worksheet part ``part`` (``data``) whose first ``sheetView`` has each of ``selections`` in place of the
    selection it has of the same pane, where they differ; a pane's selection the .xls does not give stays as it
    was, and a selection of a pane the view has not (its ``pane`` splits no rows or columns) is left out."""
    view = _children(data, part)
    if view is None:
        return data
    at, stop, children = view
    split = {key: value for tag, start, _, attributes in children if tag == PANE
             for key, value in attributes.items() if key in ("xSplit", "ySplit")}
    present = {pane for pane, (rows, columns) in PANE_SPLITS.items()
               if (not rows or _value_of(split, "ySplit")) and (not columns or _value_of(split, "xSplit"))}
    wanted = {PANES[found.pane]: found for found in selections if found.pane in present}
    written = [(start, end, attributes.get("pane", "topLeft"), (attributes.get("activeCell", "A1"),
                attributes.get("activeCellId", "0"), attributes.get("sqref", "A1")))
               for tag, start, end, attributes in children if tag == SELECTION]
    if all(any(pane == name and shown == _shown_as(found) for _, _, name, shown in written)
           for pane, found in wanted.items()):
        return data
    prefix = ooxml.prefix(data, at, part)
    edits, done = [], set()
    for start, end, pane, _ in written:  # each of a pane the .xls gives: its own, once
        if pane in wanted:
            edits.append((start, end, b"" if pane in done else _selection_xml(prefix, wanted[pane])))
            done.add(pane)
    xml = b"".join(_selection_xml(prefix, found) for pane, found in wanted.items() if pane not in done)
    if stop < 0:  # <sheetView .../>: opened, given its selections, and closed
        qualified, tag_end, _ = ooxml.start_tag(data, at, part)
        return data[:tag_end.start()] + b">" + xml + b"</" + qualified + b">" + data[tag_end.end():]
    if xml:  # after the selections it has, or its pane, or before its first child, or at its end
        pane_end = next((end for tag, _, end, _ in children if tag == PANE), None)
        place = written[-1][1] if written else pane_end if pane_end is not None else \
            children[0][1] if children else stop
        edits.append((place, place, xml))
    return spliced(data, edits)


def _shown_as(found: Selection) -> tuple[str, str, str]:
    """(activeCell, activeCellId, sqref) of ``found``."""
    return cell_name(*found.active), str(found.active_range), sqref(found.ranges)


def _selection_xml(prefix: str, found: Selection) -> bytes:
    """``found`` as a ``selection`` element whose tag carries ``prefix``."""
    cell, active, ranges = _shown_as(found)
    return (f'<{prefix}selection{_pane_of(found)} activeCell="{cell}" activeCellId="{active}" '
            f'sqref="{ranges}"/>').encode()


def _pane_of(found: Selection) -> str:
    """A ``selection``'s ``pane`` attribute: none for the top left pane, its default."""
    return "" if found.pane == 3 else f' pane="{PANES[found.pane]}"'


def _children(data: bytes, part: str) -> tuple[int, int, list[tuple[str, int, int, dict[str, str]]]] | None:
    """(where the first ``sheetView``'s start tag is, where its end tag is (-1 for an empty element), each child
    (tag, where it starts, where it ends, its attributes)) of the worksheet part ``part`` (``data``); None without a
    view."""
    found: list[int] = []
    children: list[tuple[str, int, int, dict[str, str]]] = []
    depth, view_depth, stop = 0, -1, -1
    open_child: list[tuple[str, int, dict[str, str]]] = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal depth, view_depth
        depth += 1
        if tag == SHEET_VIEW and not found:
            found.append(reader.CurrentByteIndex)
            view_depth = depth
        elif found and depth == view_depth + 1 and stop < 0:
            open_child[:] = [(tag, reader.CurrentByteIndex, attributes)]

    def end(tag: str) -> None:
        nonlocal depth, stop
        if found and depth == view_depth + 1 and open_child and stop < 0:
            child, at, attributes = open_child.pop()
            children.append((child, at, ooxml.element_end(data, at, reader.CurrentByteIndex, part), attributes))
        elif found and depth == view_depth and stop < 0:
            stop = reader.CurrentByteIndex
        depth -= 1

    reader = ooxml.parser(part, ooxml.Unreadable, start, end)
    try:
        for offset in range(0, len(data), ooxml.CHUNK):
            reader.Parse(data[offset:offset + ooxml.CHUNK], False)
            if stop >= 0:
                break
        else:
            reader.Parse(b"", True)
    except expat.ExpatError as error:
        raise ooxml.Unreadable(f"{part}: {error}") from error
    if not found:
        return None
    if stop >= 0 and ooxml.start_tag(data, found[0], part)[1].group().endswith(b"/>"):
        stop = -1
    return found[0], stop, children


def _value_of(attributes: dict[str, str], key: str) -> bool:
    """Whether a split's ``key`` attribute is a number above 0."""
    try:
        return float(attributes.get(key, "0")) > 0
    except ValueError:
        return False


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
