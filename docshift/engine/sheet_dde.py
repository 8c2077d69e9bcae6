"""A workbook's DDE links as Excel writes them, where LibreOffice writes a function Excel has not.

A cell of an .xls may take its value from another program over DDE: ``=MTX|DATA!'dgate.SON'``, a market data
terminal's last price, kept up to date while the workbook is open. The .xls holds the link as a SUPBOOK of the
service and topic and an EXTERNNAME for each item (``Inventory.dde``), and the formula names the item. LibreOffice's
import makes the reference its own function, ``DDE("MTX";"DATA";"dgate.SON")``, and its export writes that function
into the .xlsx (a plain ``soffice`` too): Excel has no such function, so the cell shows ``#NAME?`` once it
calculates, and Excel's list of links has none.

``mend`` writes each DDE link of the .xls that a formula of the result calls as an external link part (ISO/IEC
29500-1 18.14: a ``ddeLink`` of its service and topic with every item of the .xls, each one's ``advise``,
``preferPic`` and ``ole``) listed in the workbook's ``externalReferences``, and each such call in the formulas of
the sheets and of the defined names as the reference Excel writes, ``[n]!'dgate.SON'``: n is the link's place among
the workbook's external references ([MS-OI29500] 3.2.3.1.9 writes an OLE item so). A call whose service, topic and
item are no DDE item of the .xls, or that has a fourth argument but 0, stays as LibreOffice wrote it, and so does
a string that only spells one; a link or an item whose name holds a character XML cannot is not written (the
report names it). The cell's cached value stays: Excel shows it until the link is updated.
"""

import html
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


def mend(result: Path, kind: str, links: list[DdeLink]) -> int:
    """Write the DDE links of ``links`` (the .xls's) that the formulas of ``result`` (LibreOffice's export) call,
    and the calls as references to them. Returns how many calls became references (0: the file is untouched).
    Never raises for what the file holds."""
    if kind != "xls" or not links:
        return 0
    try:
        return _mend(result, links)
    except ERRORS as error:
        log.warning("the DDE links of %s stay LibreOffice's function: %r", result, error)
        return 0


def _mend(result: Path, links: list[DdeLink]) -> int:
    items = {(link.service, link.topic, item.name): (at, item.name) for at, link in enumerate(links)
             if not NOT_XML.search(link.service + link.topic) for item in link.items
             if not item.ole and not NOT_XML.search(item.name)}
    folded = {(service.lower(), topic.lower(), name.lower()): found for (service, topic, name), found in items.items()}
    with zipfile.ZipFile(result) as zf:
        package = Package(zf)
        parts = [MAIN, *(part for _, _, part in sheet_objects.worksheets(package))]
        texts = {part: ooxml.checked(ooxml.read(zf, package.names[part], MAX_EDITED_PART), part) for part in parts
                 if part == MAIN or package.holds(part, b"DDE(")}
        called = {found[0] for data in texts.values() for match in FORMULA.finditer(data)
                  for call in _calls(match.group(2)) if (found := _item_of(call, items, folded))}
        if not called:
            return 0
        order = sorted(called)
        rels_part, rels = sheet_objects.rels_of(package, MAIN)
        fresh = sheet_objects.relationship_ids(rels)
        lower = {name.lower() for name in package.names}
        added: dict[str, tuple[bytes, str]] = {}
        new_rels: list[tuple[str, ...]] = []
        for link in order:
            part = free_name(lower, "xl/externalLinks/externalLink{}.xml")
            added[part] = (_link_part(links[link]), CONTENT_TYPE)
            new_rels.append((fresh(), EXTERNAL_LINK, part.removeprefix("xl/")))
        texts[MAIN], first = _referenced(texts[MAIN], MAIN, [rid for rid, *_ in new_rels])
        number = {link: first + place for place, link in enumerate(order)}
        edits: dict[str, bytes] = {}
        made = 0
        for part, data in texts.items():
            edits[part], count = _rewritten(data, items, folded, number)
            made += count
        sheet_objects.add_relationships(package, rels_part, rels, new_rels, edits, added)
        sheet_objects.write(zf, package, result, edits, added)
    return made


def _calls(text: bytes) -> list[list[str]]:
    """[service, topic, item] of each call of LibreOffice's DDE function in a formula's text as its part has it."""
    if b"DDE(" not in text:
        return []
    return [[_unquoted(argument) for argument in match.groups()]
            for match in CALL.finditer(html.unescape(text.decode())) if match.group(1) is not None]


def _unquoted(string: str) -> str:
    return string[1:-1].replace('""', '"')


Items = dict[tuple[str, str, str], tuple[int, str]]  # {(service, topic, item): (its link's place, its name)}


def _item_of(call: Sequence[str], items: Items, folded: Items) -> tuple[int, str] | None:
    """(the place among the .xls's links of the link whose item ``call`` names, as spelled or else case aside, as
    Excel reads a link's names; the item's name as the .xls spells it), or None."""
    key = (call[0], call[1], call[2])
    found = items.get(key)
    return found if found is not None else folded.get((key[0].lower(), key[1].lower(), key[2].lower()))


def _rewritten(data: bytes, items: Items, folded: Items, number: dict[int, int]) -> tuple[bytes, int]:
    """The part ``data`` with each call of a link of ``number`` in its formulas made a reference to its item."""
    made = 0

    def call(match: re.Match[str]) -> str:
        nonlocal made
        if match.group(1) is None:
            return match.group()
        found = _item_of([_unquoted(argument) for argument in match.groups()], items, folded)
        if found is None or found[0] not in number:
            return match.group()
        made += 1
        return f"[{number[found[0]]}]!'" + found[1].replace("'", "''") + "'"

    def formula(match: re.Match[bytes]) -> bytes:
        if b"DDE(" not in match.group(2):
            return match.group()
        text = html.unescape(match.group(2).decode())
        changed = CALL.sub(call, text)
        return match.group() if changed == text else match.group(1) + escape(changed).encode() + match.group(3)

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
