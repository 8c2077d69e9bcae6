"""A workbook's DDE links as Excel writes them, where LibreOffice writes a function Excel has not.

A cell of an .xls may take its value from another program over DDE: ``=MTX|DATA!'dgate.SON'``, a market data
terminal's last price, kept up to date while the workbook is open. The .xls holds the link as a SUPBOOK of the
service and topic and an EXTERNNAME for each item (``Inventory.dde``), and the formula names the item. LibreOffice's
import makes the reference its own function, ``DDE("MTX";"DATA";"dgate.SON")``, and its export writes that function
into the .xlsx (a plain ``soffice`` too): Excel has no such function, so the cell shows ``#NAME?`` once it
calculates, and Excel's list of links has none.

``mend`` writes each DDE link of the .xls as an external link part (ISO/IEC 29500-1 18.14: a ``ddeLink`` of its
service and topic with its items, each one's ``advise``, ``preferPic`` and ``ole``) listed in the workbook's
``externalReferences``, and each call of LibreOffice's function in the formulas of the sheets and of the defined
names that names one of its items as the reference Excel writes, ``[n]!'dgate.SON'``: n is the link's place among
the workbook's external references ([MS-OI29500] 3.2.3.1.9 writes an OLE item so). Only the calls change, every
other byte of a formula as it was. A call whose service, topic and item are no DDE item of the .xls, or that has a
fourth argument but 0, stays as LibreOffice wrote it, and so does a string that only spells one. The cell's cached
value stays: Excel shows it until the link is updated.

Not written, so that the report names them: a link whose service starts a program rather than serving data (``cmd``,
``powershell``, a topic that names a program or climbs out of a folder: the form an attack on a workbook takes,
``=cmd|'/c calc'!A0``, which LibreOffice's function leaves dead), and an item or a link whose name holds a
character XML cannot.
"""

import logging
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import ERRORS, MAX_EDITED_PART, child_place, free_name
from docshift.engine.inventory.common import DdeLink
from docshift.engine.inventory.package import NS_R, NS_S, SEP, Package
from docshift.engine.sheet_names import FORMULA
from docshift.engine.sheet_xf import NOT_XML

log = logging.getLogger("docshift.engine")

MAIN = "xl/workbook.xml"
EXTERNAL_LINK = sheet_objects.REL + "externalLink"
CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.externalLink+xml"
REFERENCES = f"{NS_S}{SEP}externalReferences"
# what follows externalReferences in CT_Workbook's sequence
AFTER = {f"{NS_S}{SEP}{local}" for local in (
    "definedNames", "calcPr", "oleSize", "customWorkbookViews", "pivotCaches", "smartTagPr", "smartTagTypes",
    "webPublishing", "fileRecoveryPr", "webPublishObjects", "extLst")}
STRING = r'"(?:[^"]|"")*"'
# in a formula's text: a string or a quoted sheet name (passed over whole), or a call of LibreOffice's DDE function
# with three strings and no fourth argument but the default mode
CALL = re.compile(rf"{STRING}|'(?:[^']|'')*'|(?<![\w.])DDE\(({STRING}),({STRING}),({STRING})(?:,0)?\)")
REFERENCE = re.compile(r"&(?:(amp|lt|gt|quot|apos)|#([0-9]+)|#x([0-9A-Fa-f]+));")  # XML's, and no other
ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
# the services of a DDE link that start a program to run a command, and what in a service or topic names a program
# or climbs out of a folder (``MSEXCEL|'\..\..\Windows\System32\cmd.exe /c calc'``): no data feed is either
STARTS_PROGRAMS = frozenset({"cmd", "command", "powershell", "pwsh", "mshta", "wscript", "cscript", "rundll32",
                             "regsvr32", "msiexec", "certutil", "bitsadmin", "msbuild", "wmic", "schtasks", "forfiles",
                             "explorer", "hh", "bash", "sh"})
RUNS = re.compile(r"\.\.[\\/]|\.(?:exe|bat|cmd|ps1|vbs|vbe|js|jse|wsf|wsh|hta|scr|pif|cpl|msi|dll)\b", re.I)


def mend(result: Path, kind: str, links: list[DdeLink]) -> int:
    """Write the DDE links of ``links`` (the .xls's) into ``result`` (LibreOffice's export), and the calls of
    LibreOffice's function that name their items as references to them. Returns how many links and calls went in
    (0: the file is untouched). Never raises for what the file holds."""
    if kind != "xls" or not links:
        return 0
    try:
        return _mend(result, links)
    except ERRORS as error:
        log.warning("the DDE links of %s stay LibreOffice's function: %r", result, error)
        return 0


def kept(link: DdeLink) -> bool:
    """Whether ``link`` is written: its service serves data rather than starting a program, and XML holds its
    names."""
    program = re.split(r"[\\/]", link.service.strip())[-1].lower().removesuffix(".exe")
    return program not in STARTS_PROGRAMS and not RUNS.search(link.service + "|" + link.topic) \
        and not NOT_XML.search(link.service + link.topic)


def _mend(result: Path, links: list[DdeLink]) -> int:
    written = [at for at, link in enumerate(links) if kept(link)]
    if not written:
        return 0
    items = {(links[at].service, links[at].topic, item.name): (at, item.name) for at in written
             for item in links[at].items if not item.ole and not NOT_XML.search(item.name)}
    folded = {(service.lower(), topic.lower(), name.lower()): found for (service, topic, name), found in items.items()}
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        rels_part, rels = sheet_objects.rels_of(package, MAIN)
        fresh = sheet_objects.relationship_ids(rels)
        lower = {name.lower() for name in package.names}
        added: dict[str, tuple[bytes, str]] = {}
        new_rels: list[tuple[str, ...]] = []
        for at in written:
            part = free_name(lower, "xl/externalLinks/externalLink{}.xml")
            added[part] = (_link_part(links[at]), CONTENT_TYPE)
            new_rels.append((fresh(), EXTERNAL_LINK, part.removeprefix("xl/")))
        main = ooxml.checked(ooxml.read(zf, package.names[MAIN], MAX_EDITED_PART), MAIN)
        main, first = _referenced(main, MAIN, [rid for rid, *_ in new_rels])
        number = {at: first + place for place, at in enumerate(written)}
        edits: dict[str, bytes] = {}
        made = len(written)
        for part in [MAIN, *(part for _, _, part in sheet_objects.worksheets(package))]:
            if part == MAIN or package.holds(part, b"DDE("):
                data = main if part == MAIN else \
                    ooxml.checked(ooxml.read(zf, package.names[part], MAX_EDITED_PART), part)
                edits[part], count = _rewritten(data, items, folded, number)
                made += count
        sheet_objects.add_relationships(package, rels_part, rels, new_rels, edits, added)
        sheet_objects.write(zf, package, result, edits, added)
    return made


def _unquoted(string: str) -> str:
    """A string argument of a formula as its part writes it (quotes already characters), as its value."""
    return _unescaped(string[1:-1].replace('""', '"'))


def _unescaped(text: str) -> str:
    """``text`` with XML's references made characters (and no others, as an HTML reader would)."""

    def character(found: re.Match[str]) -> str:
        if found[1]:
            return ENTITIES[found[1]]
        return chr(int(found[2], 10) if found[2] else int(found[3], 16))

    return REFERENCE.sub(character, text)


Items = dict[tuple[str, str, str], tuple[int, str]]  # {(service, topic, item): (its link's place, its name)}


def _item_of(call: Sequence[str], items: Items, folded: Items) -> tuple[int, str] | None:
    """(the place among the .xls's links of the link whose item ``call`` names, as spelled or else case aside, as
    Excel reads a link's names; the item's name as the .xls spells it), or None."""
    key = (call[0], call[1], call[2])
    found = items.get(key)
    return found if found is not None else folded.get((key[0].lower(), key[1].lower(), key[2].lower()))


def _rewritten(data: bytes, items: Items, folded: Items, number: dict[int, int]) -> tuple[bytes, int]:
    """The part ``data`` with each call of a link of ``number`` in its formulas made a reference to its item; every
    other character of a formula as its part wrote it (its quotes as characters)."""
    made = 0

    def call(match: re.Match[str]) -> str:
        nonlocal made
        if match.group(1) is None:
            return match.group()
        found = _item_of([_unquoted(argument) for argument in match.groups()], items, folded)
        if found is None or found[0] not in number:
            return match.group()
        made += 1
        return f"[{number[found[0]]}]!'" + escape(found[1].replace("'", "''"), {"\r": "&#13;"}) + "'"

    def formula(match: re.Match[bytes]) -> bytes:
        if b"DDE(" not in match.group(2):
            return match.group()
        text = match.group(2).decode().replace("&quot;", '"').replace("&apos;", "'")
        changed = CALL.sub(call, text)
        return match.group() if changed == text else match.group(1) + changed.encode() + match.group(3)

    return FORMULA.sub(formula, data), made


def _link_part(link: DdeLink) -> bytes:
    """The external link part of ``link``: its service, topic and items."""
    items = "".join(f'<ddeItem name="{ooxml.attribute_value(item.name)}"' + (' ole="1"' if item.ole else "")
                    + (' advise="1"' if item.advise else "") + (' preferPic="1"' if item.picture else "") + "/>"
                    for item in link.items if not NOT_XML.search(item.name))
    return (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<externalLink xmlns="{NS_S}">'
            f'<ddeLink ddeService="{ooxml.attribute_value(link.service)}" '
            f'ddeTopic="{ooxml.attribute_value(link.topic)}"><ddeItems>{items}</ddeItems></ddeLink>'
            "</externalLink>").encode()


def _referenced(main: bytes, name: str, rids: list[str]) -> tuple[bytes, int]:
    """(the workbook part ``main`` with a reference to each external link of ``rids`` at the end of its
    ``externalReferences``, made where it has none; the place of the first among them, from 1)."""
    present, at, root = child_place(main, name, REFERENCES, AFTER)
    prefix = ooxml.prefix(main, root, name)
    added = "".join(f'<{prefix}externalReference xmlns:r="{NS_R}" r:id="{rid}"/>' for rid in rids)
    if not present:
        return main[:at] + f"<{prefix}externalReferences>{added}</{prefix}externalReferences>".encode() + \
            main[at:], 1
    end = re.search(rb"</(?:[\w.-]+:)?externalReferences>", main)
    if end is None:
        raise ValueError(f"{name}: externalReferences without their end")
    first = len(re.findall(rb"<(?:[\w.-]+:)?externalReference\b", main[:end.start()])) + 1
    return main[:end.start()] + added.encode() + main[end.start():], first
