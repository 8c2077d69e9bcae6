"""How an .xls shows and calculates when it opens: each sheet's view (``Inventory.views``), as xlrd reads it with the
cells; from the pass over its records, the workbook's calculation settings (``Inventory.calculation``), the sheets it
keeps out of Excel's menus (``Inventory.very_hidden``), whether it asks to be opened read-only
(``Inventory.sharing``) and whether its structure or windows are protected (``Inventory.protection``), how its sheets
print (``Inventory.printing``), which of their cells' errors Excel is not to flag (``Inventory.ignored``), their
conditional formats of Excel 2007 (``Inventory.scales``) and where their outlines' summary rows and columns are
(``Inventory.outlines``) and what their panes have selected (``Inventory.selections``); and its DDE links
(``Inventory.dde``)."""

import struct
from dataclasses import dataclass, field
from typing import Any

from docshift.engine.inventory import xls_formats
from docshift.engine.inventory.common import (
    DdeItem,
    DdeLink,
    Ignored,
    Inventory,
    Scale,
    Selection,
    View,
    biff_string,
)

# Excel's view of a sheet, but for its tabs' state and the zoom of a page break preview it does not show
PLAIN_VIEW = View(100, 0, False, True, True, True, False, False, False, False, (0, 0), None)
BIFF_CALCMODE, BIFF_REFMODE = 0x000D, 0x000F
CALC_MODES = {0: "manual", -1: "autoNoTable"}  # CALCMODE's, but automatic (1)
BIFF_FILESHARING, VERY_HIDDEN = 0x005B, 2  # and BOUNDSHEET's hsState of a sheet only a macro unhides
BIFF_SETUP = 0x00A1
# the workbook globals' PROTECT, WINDOWPROTECT, PASSWORD, PROT4REV and PROT4REVPASS ([MS-XLS] 2.4.207, 2.4.347,
# 2.4.191, 2.4.205, 2.4.206): workbookProtection's attributes; the passwords' hashes as OOXML keeps them
PROTECTION = {0x0012: "lockStructure", 0x0019: "lockWindows", 0x0013: "workbookPassword", 0x01AF: "lockRevision",
              0x01BC: "revisionsPassword"}
PASSWORDS = {0x0013, 0x01BC}
# the globals' first WINDOW1 ([MS-XLS] 2.4.345): the workbook's window, its first tab shown and its tabs' share of
# the scroll bar (thousandths, as OOXML's), which LibreOffice writes as 0, 0, 16384 x 8192, 0 and 500 for every file
BIFF_WINDOW1 = 0x003D
# the globals' SUPBOOK and EXTERNNAME ([MS-XLS] 2.4.271, 2.4.106): a DDE link is a SUPBOOK of no sheets whose virtPath
# is the service and the topic joined by 0x03 (2.2.7.6), and an EXTERNNAME after it for each item; an item's flags
BIFF_SUPBOOK, BIFF_EXTERNNAME = 0x01AE, 0x0023
BUILT_IN, WANT_ADVISE, WANT_PICTURE, STD_DOCUMENT, OLE_LINK = 0x0001, 0x0002, 0x0004, 0x0008, 0x0010
WORKBOOK_RECORDS = {*PROTECTION, BIFF_WINDOW1, BIFF_SUPBOOK, BIFF_EXTERNNAME}
# a sheet's margins (an Xnum of inches each): pageMargins' attribute
MARGINS = {0x0026: "left", 0x0027: "right", 0x0028: "top", 0x0029: "bottom"}
NO_COLOUR, DRAFT, NOTES, NOTES_AT_END = 0x0008, 0x0010, 0x0020, 0x0200  # Setup's fNoColor, fDraft, fNotes, fEndNotes
# Setup's fNoPls: its paper size, scale, resolutions and copies are the printer's, as pageSetup says by leaving them out
NO_PRINTER_SETTINGS, PRINTER_SETTINGS = 0x0004, ("paperSize", "scale", "horizontalDpi", "verticalDpi", "copies")
ERRORS = {1: "blank", 2: "dash", 3: "NA"}  # Setup's iErrors: how a cell's error prints, but as shown (0)
BIFF_FEAT, ISFFEC2 = 0x0868, 3  # a shared feature, of the kind that tells which errors not to flag
BIFF_WSBOOL, APPLY_STYLES, ROWS_BELOW, COLUMNS_RIGHT = 0x0081, 0x0020, 0x0040, 0x0080  # WsBool's fApplyStyles...
# a sheet's SELECTION ([MS-XLS] 2.4.248); the last row a BIFF8 and a BIFF5 range can name, and the last column
BIFF_SELECTION, LAST_ROWS, LAST_COLUMN = 0x001D, {True: 0xFFFF, False: 0x3FFF}, 0xFF
FIRST_CELL = [Selection(3, (0, 0), 0, ((0, 0, 0, 0),))]  # what a new sheet has selected
SHEET_RECORDS = {BIFF_SETUP, BIFF_FEAT, xls_formats.BIFF_CONDFMT12, xls_formats.BIFF_CF12, xls_formats.BIFF_CONDFMT,
                 xls_formats.BIFF_CFEX, BIFF_WSBOOL, BIFF_SELECTION, *MARGINS}
# FFErrorCheck's bits, as ignoredError names them
CHECKS = ("evalError", "emptyCellReference", "numberStoredAsText", "formulaRange", "formula", "twoDigitTextYear",
          "unlockedFormula", "listDataValidation")


@dataclass
class Settings:
    """What the records of an .xls's sheets say of how each prints and its margins, which errors it does not flag,
    its conditional formats of Excel 2007 and where its outline's summaries are (by sheet name); and, of each sheet,
    the ranges of the CONDFMT12 record that its CF12 records follow."""
    printing: dict[str, dict[str, str | None]] = field(default_factory=dict)
    margins: dict[str, dict[str, float]] = field(default_factory=dict)
    outlines: dict[str, dict[str, str]] = field(default_factory=dict)
    ignored: dict[str, list[Ignored]] = field(default_factory=dict)
    scales: dict[str, list[Scale]] = field(default_factory=dict)
    ranges: dict[str, tuple[tuple[int, int, int, int], ...]] = field(default_factory=dict)
    protection: dict[str, str] = field(default_factory=dict)  # the workbook's, as its globals' records say it
    authors: dict[str, dict[str, str]] = field(default_factory=dict)  # {sheet: {cell: its note's author}}
    selections: dict[str, list[Selection]] = field(default_factory=dict)  # {sheet: its panes' selections}
    window: dict[str, str] = field(default_factory=dict)  # workbookView's attributes, as the first WINDOW1 says
    links: list[DdeLink | None] = field(default_factory=list)  # each SUPBOOK's DDE link (None: of another kind)
    biff8: bool = True  # whether the workbook is BIFF8 (BIFF5 keeps its DDE links in EXTERNSHEET records, not read)

    def into(self, inventory: Inventory) -> None:
        inventory.printing, inventory.ignored, inventory.scales = self.printing, self.ignored, self.scales
        inventory.outlines, inventory.margins, inventory.authors = self.outlines, self.margins, self.authors
        # a password alone protects nothing: Excel asks for it only to unlock what a lock locks
        locked = self.protection.keys() - {PROTECTION[rec_type] for rec_type in PASSWORDS}
        inventory.protection = dict(self.protection) if locked else {}
        inventory.window = self.window
        inventory.selections = {sheet: found for sheet, found in self.selections.items() if found != FIRST_CELL}
        inventory.dde = [link for link in self.links if link is not None and link.items]
        inventory.where["dde_links"] = [f"{link.service}|{link.topic}!{item.name}"
                                        for link in inventory.dde for item in link.items if not item.ole]
        inventory.counts["dde_links"] = len(inventory.where["dde_links"]) if self.biff8 else None

    def workbook_record(self, rec_type: int, body: bytes) -> None:
        """What a workbook globals' PROTECT, WINDOWPROTECT or PROT4REV (a flag), PASSWORD or PROT4REVPASS (its
        hash) or first WINDOW1 record (``body``) says."""
        if rec_type == BIFF_WINDOW1:
            if len(body) >= 18 and not self.window:
                left, top, width, height, _, _, first, _, ratio = struct.unpack_from("<hhHHHHHHH", body)
                self.window = {"xWindow": str(left), "yWindow": str(top), "windowWidth": str(width),
                               "windowHeight": str(height), "firstSheet": str(first)}
                if ratio <= 1000:
                    self.window["tabRatio"] = str(ratio)
        elif rec_type == BIFF_SUPBOOK:
            self.links.append(_dde_link(body))
        elif rec_type == BIFF_EXTERNNAME:
            if self.links and (link := self.links[-1]) is not None and len(body) >= 8:
                flags = struct.unpack_from("<H", body)[0]
                if flags & OLE_LINK:  # the SUPBOOK links an OLE object, not a DDE server
                    self.links[-1] = None
                elif not flags & BUILT_IN:
                    link.items.append(DdeItem(biff_string(body, 6, len(body), True, ""), bool(flags & WANT_ADVISE),
                                              bool(flags & WANT_PICTURE), bool(flags & STD_DOCUMENT)))
        elif len(body) >= 2 and (value := struct.unpack_from("<H", body)[0]):
            self.protection[PROTECTION[rec_type]] = f"{value:04X}" if rec_type in PASSWORDS else "1"


def _dde_link(body: bytes) -> DdeLink | None:
    """The DDE link a SUPBOOK record (``body``) starts, or None where it is of another kind: of the workbook itself,
    of add-ins, of another workbook (sheets, or a path that starts with an encoding mark)."""
    if len(body) < 5 or struct.unpack_from("<H", body)[0] != 0:
        return None
    count = struct.unpack_from("<H", body, 2)[0]
    if not 1 <= count <= 0xFF:
        return None
    path = biff_string(body, 2, len(body), True, "", count_bytes=2)
    service, mark, topic = path.partition("\x03")
    return DdeLink(service, topic, []) if mark and service and service[0] >= " " else None


def sheet_record(rec_type: int, body: bytes, sheet: str, settings: Settings) -> None:
    """Into ``settings``, what a sheet's own SETUP, FEAT, WSBOOL, CONDFMT12 or CF12 record (``body``) says; a classic
    format's CONDFMT or CFEX ends the ranges of the CONDFMT12 before it (a CF12 record after it extends that classic
    format, which LibreOffice keeps)."""
    if rec_type == BIFF_SETUP and len(body) >= 12:
        if setup := printing(body, 0):
            settings.printing[sheet] = setup
        if len(body) >= 32:  # numHdr and numFtr, whether or not the printer's fields hold (fNoPls)
            header, footer = struct.unpack_from("<dd", body, 16)
            settings.margins.setdefault(sheet, {}).update(header=header, footer=footer)
    elif rec_type in MARGINS and len(body) >= 8:
        settings.margins.setdefault(sheet, {})[MARGINS[rec_type]] = struct.unpack_from("<d", body)[0]
    elif rec_type == BIFF_FEAT and (ignoring := ignored(body)):
        settings.ignored.setdefault(sheet, []).append(ignoring)
    elif rec_type == BIFF_WSBOOL and len(body) >= 2 and (found := outline(body)):
        settings.outlines[sheet] = found
    elif rec_type == BIFF_SELECTION and len(body) >= 9:  # a pane's first: Excel writes one a pane
        panes = settings.selections.setdefault(sheet, [])
        if (chosen := selection(body, settings.biff8)).pane not in {known.pane for known in panes}:
            panes.append(chosen)
    elif rec_type == xls_formats.BIFF_CONDFMT12:
        settings.ranges[sheet] = xls_formats.ranges(body) if len(body) >= 26 else ()
    elif rec_type in (xls_formats.BIFF_CONDFMT, xls_formats.BIFF_CFEX):
        settings.ranges[sheet] = ()
    elif rec_type == xls_formats.BIFF_CF12 and len(body) > 13 and \
            (scale := xls_formats.rule(body, settings.ranges.get(sheet, ()))):
        settings.scales.setdefault(sheet, []).append(scale)


def read(sheets: list[Any], inventory: Inventory) -> None:
    """The view of each of xlrd's ``sheets``, where any is not Excel's default or the sheet shown is not the first."""
    views = {sheet.name: View(
        sheet.cooked_normal_view_mag_factor, sheet.cooked_page_break_preview_mag_factor,
        bool(sheet.show_in_page_break_preview), bool(sheet.show_grid_lines), bool(sheet.show_zero_values),
        bool(sheet.show_sheet_headers), bool(sheet.show_formulas), bool(sheet.columns_from_right_to_left),
        bool(sheet.sheet_selected), bool(sheet.sheet_visible), (sheet.first_visible_rowx, sheet.first_visible_colx),
        (sheet.horz_split_pos, sheet.vert_split_pos, sheet.horz_split_first_visible, sheet.vert_split_first_visible,
         sheet.split_active_pane) if sheet.panes_are_frozen and (sheet.horz_split_pos or sheet.vert_split_pos)
        else None) for sheet in sheets}
    if any(view._replace(preview_zoom=0, selected=False, shown=False) != PLAIN_VIEW for view in views.values()) or \
            any(view.shown for view in list(views.values())[1:]):
        inventory.views = views


def calculation(rec_type: int, data: bytes, body: int, length: int, found: dict[str, str]) -> None:
    """Into ``found`` (``calcPr``'s attributes), what a worksheet's CALCMODE or REFMODE record says where Excel's
    default is not it: calculation by hand (or automatic but for data tables), R1C1 references. The first sheet's
    say it for the workbook."""
    if rec_type == BIFF_CALCMODE and length >= 2 and "calcMode" not in found:
        found["calcMode"] = CALC_MODES.get(struct.unpack_from("<h", data, body)[0], "auto")
    elif rec_type == BIFF_REFMODE and length >= 2 and "refMode" not in found:
        found["refMode"] = "A1" if struct.unpack_from("<H", data, body)[0] else "R1C1"


def sharing(body: bytes, user: str) -> dict[str, str]:
    """``fileSharing``'s attributes of a FILESHARING record's ``body`` ([MS-XLS] 2.4.118): whether Excel recommends
    opening the workbook read-only, the hash of the password that lets it be written (its reservation password) and
    the ``user`` who set it (the XLUnicodeString after them), where they are set."""
    if len(body) < 4:
        return {}
    recommended, password = struct.unpack_from("<HH", body)
    found = {"readOnlyRecommended": "1"} if recommended else {}
    if password:
        found["reservationPassword"] = f"{password:04X}"
    if user:
        found["userName"] = user
    return found


def printing(data: bytes, body: int) -> dict[str, str | None]:
    """``pageSetup``'s attributes of a sheet's SETUP record at ``body`` ([MS-XLS] 2.4.257) where they are not Excel's
    default: its comments printed as they show or at the end, in black and white, as a draft, its cells' errors
    printed blank, as dashes or as #N/A (these flags hold whether or not the printer's fields do); and, where the
    printer's fields do not hold (fNoPls: the paper is the printer's), None for each attribute that would name them."""
    flags = struct.unpack_from("<H", data, body + 10)[0]
    found: dict[str, str | None] = {"cellComments": "atEnd" if flags & NOTES_AT_END else "asDisplayed"} \
        if flags & NOTES else {}
    found.update({key: "true" for key, flag in (("blackAndWhite", NO_COLOUR), ("draft", DRAFT)) if flags & flag})
    if (errors := flags >> 10 & 0x03) in ERRORS:
        found["errors"] = ERRORS[errors]
    if flags & NO_PRINTER_SETTINGS:
        found.update(dict.fromkeys(PRINTER_SETTINGS))
    return found


def ignored(body: bytes) -> Ignored | None:
    """The cells and checks of a FEAT record's ``body`` ([MS-XLS] 2.4.112) that tells Excel not to flag errors
    (isf ISFFEC2: its Ref8U ranges and the FFErrorCheck of its FeatFormulaErr2); None for another feature."""
    if len(body) < 27 or struct.unpack_from("<H", body, 12)[0] != ISFFEC2:
        return None
    count = struct.unpack_from("<H", body, 19)[0]
    if len(body) < 27 + 8 * count + 4:
        return None
    ranges = tuple((first, last, left, right) for first, last, left, right in
                   (struct.unpack_from("<4H", body, 27 + 8 * index) for index in range(count)))
    flags = struct.unpack_from("<I", body, 27 + 8 * count)[0]
    checks = tuple(name for bit, name in enumerate(CHECKS) if flags >> bit & 1)
    return Ignored(ranges, checks) if ranges and checks else None


def selection(body: bytes, biff8: bool) -> Selection:
    """What a SELECTION record (``body``, of at least 9 bytes) says a pane has selected: a range that spans the
    .xls's rows or columns spans Excel 2007's, as a whole row or column; the active cell alone where no range is
    given."""
    pane, row, column, active, count = struct.unpack_from("<BHHHH", body)
    ranges = []
    for index in range(min(count, (len(body) - 9) // 6)):
        first, last, left, right = struct.unpack_from("<HHBB", body, 9 + 6 * index)
        ranges.append((first, 1_048_575 if first == 0 and last == LAST_ROWS[biff8] else last, left,
                       16_383 if left == 0 and right == LAST_COLUMN else right))
    if not ranges:
        ranges, active = [(row, row, column, column)], 0
    return Selection(pane, (row, column), active if active < len(ranges) else 0, tuple(ranges))


def outline(body: bytes) -> dict[str, str]:
    """``outlinePr``'s attributes of a sheet's WSBOOL record (``body``, [MS-XLS] 2.4.351) where they are not Excel's
    default: the summary rows above their details, the summary columns left of theirs, the outline's styles applied."""
    flags = struct.unpack_from("<H", body)[0]
    found = {key: "0" for key, flag in (("summaryBelow", ROWS_BELOW), ("summaryRight", COLUMNS_RIGHT))
             if not flags & flag}
    return found | ({"applyStyles": "1"} if flags & APPLY_STYLES else {})
