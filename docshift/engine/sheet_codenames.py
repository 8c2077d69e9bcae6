"""The code names that bind a workbook's VBA document modules to it and its sheets, put back into the .xlsm.

A workbook's VBA project has a document module for the workbook (``ThisWorkbook``, ``DieseArbeitsmappe``) and one for
each sheet (``Sheet1``, ``Tabelle1``, or a name the author gave); the code of ``Workbook_Open``, ``Worksheet_Change``
and of the sheet's ActiveX controls' events lives in them. Excel ties each to its sheet by code name: an .xls holds
it in a CODENAME record of the workbook's globals and of each sheet, an .xlsx in the ``codeName`` of
``workbookPr`` and of each sheet's ``sheetPr``. LibreOffice loads the code names (its ODF keeps them) and its OOXML
export writes none, with the VBA project it keeps: of 685 workbooks of the corpus and POI's and LibreOffice's
tests, 91 had code names on 268 sheets, and 31 had event or control code in those modules. Excel then binds no
module to the workbook or its sheets: it makes new empty ones beside them, their events never run, and code that
names a sheet by its code name fails.

``mend`` writes each code name of the .xls into the result where the result keeps the VBA project, on the element
the sheet of that name (the workbook) has, or on one of its own, first in the sheet (before the workbook's views).
"""

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from docshift.engine import biff, ooxml, sheet_objects
from docshift.engine.embedding import ERRORS, PartEdit, edit_parts
from docshift.engine.inventory.common import Unreadable, biff_string
from docshift.engine.inventory.package import NS_S, SEP, Package
from docshift.engine.sheet_skeleton import without_cells, without_names

log = logging.getLogger("docshift.engine")

BIFF_CODENAME = 0x01BA
WORKBOOK_PR, SHEET_PR = f"{NS_S}{SEP}workbookPr", f"{NS_S}{SEP}sheetPr"
# the workbook's children that follow workbookPr, and a worksheet's first child (sheetPr comes before all)
AFTER_WORKBOOK_PR = re.compile(rb"<(?:workbookProtection|bookViews|sheets)[\s/>]")
FIRST_IN_SHEET = re.compile(rb"<worksheet\b[^>]*>")
MAX_NAME = 31  # a VBA module's name: Excel refuses a longer code name


def mend(result: Path, source: Path, kind: str, keeps_project: bool) -> int:
    """Give ``result`` (LibreOffice's export of the .xls ``source``) the code names of the .xls's workbook and
    sheets where ``keeps_project`` (the result keeps the VBA project whose modules they name). Returns how many
    went in (0: the file is untouched). Never raises for what the files hold."""
    if kind != "xls" or not keeps_project:
        return 0
    try:
        workbook, sheets = codenames(source)
        if workbook is None and not sheets:
            return 0
        return _mend(result, workbook, sheets)
    except ERRORS as error:
        log.warning("the code names of %s stay out: %r", source, error)
        return 0


def codenames(source: Path) -> tuple[str | None, dict[str, str]]:
    """(the workbook's code name or None, {sheet name: its code name}) from the CODENAME records of the .xls
    ``source``'s globals and sheets (BIFF8)."""
    workbook, sheets = None, {}
    for _, sheet, data, body, end in biff.records(source, {BIFF_CODENAME}):
        name = biff_string(data, body, end, True, "cp1252", count_bytes=2)
        if not name or len(name) > MAX_NAME:
            continue
        if sheet is None:
            workbook = name
        else:
            sheets[sheet[:31]] = name
    return workbook, sheets


def _mend(result: Path, workbook: str | None, sheets: dict[str, str]) -> int:
    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        named = [("xl/workbook.xml", workbook, WORKBOOK_PR)] + [
            (part, sheets[name], SHEET_PR) for _, name, part in sheet_objects.worksheets(package)
            if name in sheets and part.startswith("xl/worksheets/")]
        for part, name, element in named:
            if name is not None and part in package.names:
                yield part, _naming(element, name)

    return edit_parts(result, parts)


def _naming(element: str, name: str) -> PartEdit:
    """The edit of a part that gives its ``element`` the code name ``name`` (``_named``)."""
    def named(data: bytes, part: str) -> tuple[bytes, int]:
        return _named(data, part, element, name), 1

    return without_names(named) if element == WORKBOOK_PR else without_cells(named)


def _named(data: bytes, part: str, element: str, name: str) -> bytes:
    """The part ``part`` (``data``) whose ``element`` (``workbookPr``, ``sheetPr``) has the ``codeName`` ``name``: its
    own where it has one and names none, else one of its own where the schema puts it."""
    seen = False

    def give(tag: str, attributes: dict[str, str]) -> dict[str, str | None] | None:
        nonlocal seen
        if tag != element:
            return None
        seen = True
        return None if "codeName" in attributes else {"codeName": name}

    edited = ooxml.edit_tags(data, part, give)
    if seen:
        return edited
    added = f'<{element.split(SEP)[1]} xmlns="{NS_S}" codeName="{ooxml.attribute_value(name)}"/>'.encode()
    found = (AFTER_WORKBOOK_PR if element == WORKBOOK_PR else FIRST_IN_SHEET).search(data)
    if found is None:
        raise Unreadable(f"{part}: no place for {element}")
    at = found.start() if element == WORKBOOK_PR else found.end()
    return data[:at] + added + data[at:]
