"""Excel 2007's conditional formats of an .xls sheet, put back into the .xlsx: colour scales, data bars, icon sets.

An .xls saved by Excel 2007 or later keeps such formats in CONDFMT12 and CF12 records, which LibreOffice's import
does not read: the icons, bars and colours were gone from each cell they covered (``inventory/xls_formats.py``).

``mend`` writes each rule the sheet's records hold (``Inventory.scales``) as a ``conditionalFormatting`` of its own
with one ``cfRule``, after the formats LibreOffice wrote (before the sheet's validations, links, print settings,
drawing and extensions, where the schema puts them), with priorities after theirs in the order Excel gave its rules.
A sheet is written to only where it holds such rules; every other byte stays as it was.
"""

from pathlib import Path

from docshift.engine import ooxml, sheet_objects
from docshift.engine.embedding import PartEdit, child_place
from docshift.engine.inventory.common import Scale
from docshift.engine.inventory.package import NS_MC, NS_S, SEP
from docshift.engine.sheet_skeleton import without_cells

CONDITIONAL, RULE = f"{NS_S}{SEP}conditionalFormatting", f"{NS_S}{SEP}cfRule"
# the worksheet's children that follow its conditional formats (CT_Worksheet), and the markup-compatibility wrapper
# LibreOffice writes around its objects and controls
AFTER = {f"{NS_S}{SEP}{local}" for local in (
    "dataValidations", "hyperlinks", "printOptions", "pageMargins", "pageSetup", "headerFooter", "rowBreaks",
    "colBreaks", "customProperties", "cellWatches", "ignoredErrors", "smartTags", "drawing", "legacyDrawing",
    "legacyDrawingHF", "drawingHF", "picture", "oleObjects", "controls", "webPublishItems", "tableParts",
    "extLst")} | {f"{NS_MC}{SEP}AlternateContent"}


def mend(result: Path, kind: str, scales: dict[str, list[Scale]]) -> int:
    """Give the sheets of ``result`` (LibreOffice's export of an .xls) the conditional formats of Excel 2007 of the
    legacy file's (``scales``: {sheet name: its rules}). Returns how many sheets were given theirs (0: the file is
    untouched). Never raises for what the file holds."""
    if kind != "xls" or not scales:
        return 0
    return sheet_objects.edit_sheets(result, scales, _formatting,
                                     "the conditional formats of Excel 2007 of %s stay unwritten: %r")


def _formatting(rules: list[Scale]) -> PartEdit:
    """The edit of a worksheet part that gives it ``rules``."""
    return without_cells(lambda data, name: (formatted(data, name, rules), 1))


def formatted(data: bytes, name: str, rules: list[Scale]) -> bytes:
    """The worksheet part ``name`` (``data``) with ``rules`` as conditional formats after its own, every other byte
    as it was."""
    priorities: list[int] = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == RULE and attributes.get("priority", "").isdigit():
            priorities.append(int(attributes["priority"]))

    ooxml.stream((data,), name, start)
    _, at, root = child_place(data, name, CONDITIONAL, AFTER)
    prefix = ooxml.prefix(data, root, name)
    first = max(priorities, default=0) + 1
    written = "".join(_rule(prefix, rule, first + rank)
                      for rank, rule in enumerate(sorted(rules, key=lambda rule: rule.priority)))
    return data[:at] + written.encode() + data[at:]


def _rule(prefix: str, rule: Scale, priority: int) -> str:
    """``rule`` as a ``conditionalFormatting`` of one ``cfRule`` of ``priority``, its elements in ``prefix``."""
    def attributes(pairs: tuple[tuple[str, str], ...]) -> str:
        return "".join(f' {key}="{ooxml.attribute_value(value)}"' for key, value in pairs)

    inside = "".join(f"<{prefix}cfvo{attributes(threshold)}/>" for threshold in rule.thresholds) + \
        "".join(f"<{prefix}color{attributes(colour)}/>" for colour in rule.colours)
    return (f'<{prefix}conditionalFormatting sqref="{sheet_objects.sqref(rule.ranges)}">'
            f'<{prefix}cfRule type="{rule.kind}" priority="{priority}">'
            f"<{prefix}{rule.kind}{attributes(rule.attributes)}>{inside}</{prefix}{rule.kind}>"
            f"</{prefix}cfRule></{prefix}conditionalFormatting>")
