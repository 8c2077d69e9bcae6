"""A defined name whose formula is an error constant, which LibreOffice writes with no formula at all.

A print area whose range is gone is kept by some programs as a name of the formula ``=#REF!``: gnumeric writes
every sheet's Print_Area so, a NAME record ([MS-XLS] 2.4.150) whose formula is one PtgErr. LibreOffice's import
keeps the name (a built-in one as ``Excel_BuiltIn_Print_Area``) and its export writes it empty,
``<definedName ...></definedName>`` (a plain ``soffice`` too): a name with no formula, which no Excel makes, where
the .xls has one. Of unseen set 28's gnumeric workbooks, 6 had 47 such names.

``mend`` writes the .xls's error constant into each name the result leaves empty whose NAME record (of the same
scope, spelled as LibreOffice spells it) has one as its whole formula; every other byte stays as it was.
"""

import re
from pathlib import Path
from xml.sax.saxutils import unescape

from docshift.engine.embedding import edit_parts, guarded
from docshift.engine.sheet_names import BUILT_IN, as_libreoffice, records_of, scope_of

MAIN = "xl/workbook.xml"
PTG_ERR = 0x1C
ERRORS = {0x00: "#NULL!", 0x07: "#DIV/0!", 0x0F: "#VALUE!", 0x17: "#REF!", 0x1D: "#NAME?", 0x24: "#NUM!",
          0x2A: "#N/A"}
# the built-in names by their code ([MS-XLS] 2.4.150), as LibreOffice's import calls them: Excel_BuiltIn_<name>
BUILT_IN_NAMES = ("Consolidate_Area", "Auto_Open", "Auto_Close", "Extract", "Database", "Criteria", "Print_Area",
                  "Print_Titles", "Recorder", "Data_Form", "Auto_Activate", "Auto_Deactivate", "Sheet_Title",
                  "_FilterDatabase")
# a defined name with nothing in it: its start tag's attributes, and its end tag (none where the tag closes itself)
EMPTY = re.compile(rb"<((?:[\w.-]+:)?definedName)\b([^>]*?)(?:/>|>(</(?:[\w.-]+:)?definedName>))")
NAME = re.compile(rb'\bname="([^"]*)"')
QUOTES = {"&quot;": '"', "&apos;": "'"}


def mend(result: Path, source: Path, kind: str) -> int:
    """Give each defined name of ``result`` (LibreOffice's export of the .xls ``source``) that has no formula the
    error constant the .xls's name has. Returns how many were given one (0: the file is untouched). Never raises
    for what the files hold."""
    if kind != "xls":
        return 0
    return guarded(_mend, result, source, "the empty defined names of %s stay empty: %r")


def _mend(result: Path, source: Path) -> int:
    errors: dict[tuple[int | None, str], str] | None = None

    def filled(data: bytes, name: str) -> tuple[bytes, int]:
        nonlocal errors
        if not EMPTY.search(data):
            return data, 0
        errors = errors if errors is not None else errors_of(source)
        count = 0

        def fill(match: re.Match[bytes]) -> bytes:
            nonlocal count
            found = NAME.search(match.group(2))
            error = errors.get((scope_of(match.group(2)), unescape(found.group(1).decode(), QUOTES))) \
                if found and errors else None
            if error is None:
                return match.group()
            count += 1
            return b"<" + match.group(1) + match.group(2) + b">" + error.encode() + b"</" + match.group(1) + b">"

        return EMPTY.sub(fill, data), count

    return edit_parts(result, lambda package: [(MAIN, filled)] if package.holds(MAIN, b"definedName") else [])


def errors_of(source: Path) -> dict[tuple[int | None, str], str]:
    """{(scope: None for the workbook's, else the sheet's place from 0; the name as LibreOffice spells it, and as the
    .xls does): the error constant} of each NAME record of the .xls ``source`` (BIFF8) whose whole formula is one
    error constant."""
    found: dict[tuple[int | None, str], str] = {}
    for record in records_of(source):
        formula = record.formula
        if len(formula) != 2 or formula[0] != PTG_ERR or formula[1] not in ERRORS:
            continue
        if record.flags & BUILT_IN:
            code = ord(record.name[0])
            if code < len(BUILT_IN_NAMES):
                found[(record.scope, "Excel_BuiltIn_" + BUILT_IN_NAMES[code])] = ERRORS[formula[1]]
        else:  # as LibreOffice spells it, and as the .xls does (``sheet_names`` gives it back)
            for spelled in (as_libreoffice(record.name), record.name):
                found[(record.scope, spelled)] = ERRORS[formula[1]]
    return found
