"""A workbook's defined names as the .xls names them, and hidden where it hides them.

Excel's names may hold periods and backslashes (``First.Quarter``, ``wrn.Report.``, ``PDOC\\10_1\\lab``; [MS-OI29500]
2.1.867). LibreOffice's .xls import makes each period an underscore (every LibreOffice, a plain ``soffice`` too),
and each backslash one as well once the process has read another file (a cold ``soffice`` keeps them, a child of the
engine's parent never does), and writes every name ``hidden="false"``: Solver's and the Report Manager's own names
came out in the Name Manager, and a macro that asks for ``Range("First.Quarter")`` found no such name.

``mend`` reads the NAME records (Lbl: [MS-XLS] 2.4.150) and gives each name of the result that is an .xls name so
changed its own name again, in its ``definedName`` and in every formula that uses it (cells, names, validations,
conditional formats, charts), outside the formulas' strings and quoted sheet names; and ``hidden="1"`` to each
name the .xls hides. A name whose two spellings are both the .xls's, or are both in the result, stays as it is.
"""

import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from xml.sax.saxutils import escape

from docshift.engine import biff, sheet_objects
from docshift.engine.embedding import PartEdit, edited, guarded
from docshift.engine.inventory.package import Package

BIFF_NAME = 0x0018
HIDDEN, BUILT_IN = 0x0001, 0x0020  # Lbl's fHidden, fBuiltin
# a defined name as LibreOffice writes it, its attributes and its formula
DEFINED_NAME = re.compile(rb'<definedName\b([^>]*?)\bname="([^"]*)"([^>]*)>')
SCOPE = re.compile(rb'\blocalSheetId="([0-9]+)"')
# the text of an element that holds a formula: a cell's, a name's, a validation's or conditional format's, a chart's
FORMULA = re.compile(rb"(<(?:[A-Za-z_][\w.-]*:)?(?:f|formula|formula1|formula2|definedName)\b[^>]*(?<!/)>)([^<]*)(<)")
# a name as Office writes and reads one ([MS-OI29500] 2.1.867): a letter, an underscore or a backslash, then those,
# digits, periods and question marks (a name of other characters is one Excel would not load: LibreOffice's stays)
EXCEL_NAME = re.compile(r"(?:[^\W\d]|\\)[\w.\\?]*")
# in a formula as its part writes it: a string or a quoted sheet name (their quotes as characters or references),
# a character reference, what brackets hold (a table's column, another workbook), or a run of the characters a name
# or a reference is made of
TOKEN = re.compile(r'&quot;.*?&quot;|"(?:[^"]|"")*"|&apos;.*?&apos;|\'(?:[^\']|\'\')*\'|&#?\w+;|\[[^\]]*\]|[\w.\\?]+')


def mend(result: Path, source: Path, kind: str) -> int:
    """Give the defined names of ``result`` (LibreOffice's export of the .xls ``source``) the spelling and the hidden
    flag the .xls gives them. Returns how many names were given theirs (0: the file is untouched). Never raises for
    what the files hold."""
    if kind != "xls":
        return 0
    return guarded(_mend, result, source, "the defined names of %s stay as LibreOffice wrote them: %r")


def _mend(result: Path, source: Path) -> int:
    names = names_of(source)
    if not names or not any(hidden or as_libreoffice(name) != name for name, hidden in names.values()):
        return 0

    def parts(package: Package) -> Iterator[tuple[str, PartEdit]]:
        main = "xl/workbook.xml"
        written = {(scope_of(match.group(1) + match.group(3)), match.group(2).decode())
                   for match in DEFINED_NAME.finditer(b"".join(package.chunks(main)))}
        renamed = _renamed(names, written, {name for _, name, _ in sheet_objects.worksheets(package)})
        hidden = set()  # (scope, the name as the result will spell it) of each the .xls hides
        for (scope, spelled), (name, hide) in names.items():
            if hide and ((scope, name) in written or renamed.get(spelled) == name):
                hidden.add((scope, name))
            elif hide and (scope, spelled) in written:
                hidden.add((scope, spelled))
        if not renamed and not hidden:
            return
        yield main, lambda data, name: _workbook(data, renamed, hidden)
        if renamed:
            wanted = [spelled.encode() for spelled in renamed]
            for part in package.names:
                if part != main and part.endswith(".xml") and part.startswith(("xl/worksheets/", "xl/charts/")) \
                        and package.holds(part, *wanted):
                    yield part, lambda data, name: (_formulas(data, renamed), 0)

    return edited(result, parts, "the defined names of %s stay as LibreOffice wrote them: %r", source)


class Name(NamedTuple):
    """A NAME record of the workbook globals: its scope (None for the workbook's, else the sheet's place from 0),
    its flags, its name (a built-in one's code as a character) and its formula's parsed tokens."""
    scope: int | None
    flags: int
    name: str
    formula: bytes


def records_of(source: Path) -> Iterator[Name]:
    """Each NAME record (Lbl: [MS-XLS] 2.4.150) of the .xls ``source`` (BIFF8) that has a name."""
    for _, sheet, data, body, end in biff.records(source, {BIFF_NAME}):
        if sheet is not None or end - body < 15:
            continue
        flags, length, size = struct.unpack_from("<H", data, body)[0], data[body + 3], \
            struct.unpack_from("<H", data, body + 4)[0]
        sheet_index = struct.unpack_from("<H", data, body + 8)[0]
        if not length:
            continue
        wide = data[body + 14] & 1
        formula = min(end, body + 15 + length * (2 if wide else 1))
        name = bytes(data[body + 15:formula]).decode("utf_16_le" if wide else "latin-1", "replace")
        yield Name(sheet_index - 1 if sheet_index else None, flags, name, bytes(data[formula:min(end, formula + size)]))


def names_of(source: Path) -> dict[tuple[int | None, str], tuple[str, bool]]:
    """{(scope: None for the workbook's, else the sheet's place from 0; the name as LibreOffice spells it): (the name
    as the .xls spells it, whether it is hidden)} of each NAME record of the .xls ``source`` (BIFF8) that is not a
    built-in name (Print_Area and its kind, which LibreOffice writes as OOXML's own)."""
    found: dict[tuple[int | None, str], tuple[str, bool]] = {}
    for record in records_of(source):
        if record.flags & BUILT_IN:
            continue
        key = (record.scope, as_libreoffice(record.name))
        found[key] = (record.name, bool(record.flags & HIDDEN)) if key not in found else ("", False)  # two: neither
    return {key: value for key, value in found.items() if value[0]}


def as_libreoffice(name: str) -> str:
    """``name`` as LibreOffice's import writes it (``ScfTools::ConvertToScDefinedName``): each character that is
    not a letter, a digit or an underscore an underscore, and a digit too where the name starts."""
    return "".join(c if c == "_" or (c.isalnum() if at else c.isalpha()) else "_" for at, c in enumerate(name))


def scope_of(attributes: bytes) -> int | None:
    found = SCOPE.search(attributes)
    return int(found.group(1)) if found else None


def _renamed(names: dict[tuple[int | None, str], tuple[str, bool]], written: set[tuple[int | None, str]],
             sheets: set[str]) -> dict[str, str]:
    """{the name as the result spells it: as the .xls does} of each name LibreOffice respelled, where neither
    spelling is ambiguous: the .xls's is not in the result, and no name of the .xls (of any scope) nor sheet of
    the workbook is spelled the result's way, case aside, as Excel reads names."""
    taken = {name.lower() for name, _ in names.values()} | {sheet.lower() for sheet in sheets}
    renamed: dict[str, str] = {}
    for (scope, spelled), (name, _) in names.items():
        wanted = spelled != name and (scope, spelled) in written and (scope, name) not in written \
            and EXCEL_NAME.fullmatch(name) is not None and spelled.lower() not in taken
        if wanted and renamed.setdefault(spelled.lower(), name).lower() != name.lower():
            renamed[spelled.lower()] = ""  # two names of two scopes spelled alike: left as they are
    spellings = {spelled.lower(): spelled for (_, spelled) in names}
    return {spellings[lower]: name for lower, name in renamed.items() if name}


def _workbook(data: bytes, renamed: dict[str, str], hidden: set[tuple[int | None, str]]) -> tuple[bytes, int]:
    """The workbook part with its names respelled and hidden, and their formulas' names respelled."""
    count, lower = 0, {spelled.lower(): name for spelled, name in renamed.items()}

    def name(match: re.Match[bytes]) -> bytes:
        nonlocal count
        before, written, after = match.group(1), match.group(2).decode(), match.group(3)
        spelled = lower.get(written.lower(), written)
        attributes = before + b'name="' + escape(spelled, {'"': "&quot;"}).encode() + b'"' + after
        if (scope_of(before + after), spelled) in hidden:
            attributes = re.sub(rb'\s*\bhidden="[^"]*"', b"", attributes) + b' hidden="1"'
        written_tag = b"<definedName" + attributes + b">"
        count += written_tag != match.group(0)
        return written_tag

    data = DEFINED_NAME.sub(name, data)
    return (_formulas(data, renamed) if renamed else data), count


def _formulas(data: bytes, renamed: dict[str, str]) -> bytes:
    """The part ``data`` with each name of ``renamed`` in its formulas respelled."""
    lower = {spelled.lower(): name for spelled, name in renamed.items()}

    def token(match: re.Match[str]) -> str:
        found, text, at = match.group(), match.string, match.start()
        if found[0] in "\"'&[" or text[match.end():match.end() + 1] == "!" or text[max(0, at - 2):at] == "]!":
            return found  # a string, a sheet's or a table's name, or a name of another workbook
        return lower.get(found.lower(), found)

    def formula(match: re.Match[bytes]) -> bytes:
        text = match.group(2).decode()
        changed = TOKEN.sub(token, text)
        return match.group(0) if changed == text else match.group(1) + changed.encode() + match.group(3)

    return FORMULA.sub(formula, data)
