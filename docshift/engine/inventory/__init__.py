"""What a legacy Office file holds, what its OOXML result holds, and the fidelity report that compares them.

``of_source`` counts from the legacy file itself (its OLE storages and binary records, xlrd's cells), never from
what LibreOffice loaded; ``of_result`` counts the same things in the OOXML package; ``report`` compares the two.
One module reads each format (``xls``, ``doc``, ``ppt``; ``rtf`` an RTF file named .doc, ``spreadsheetml`` a
SpreadsheetML 2003 workbook and ``biff4`` an Excel 2.x-4.0 worksheet named .xls; ``xlsx``, ``docx``, ``pptx``),
``officeart`` the drawings the three legacy formats share, ``package`` the zip parts of a result, ``fidelity``
writes the report.
The kinds of each file type are ``KINDS``; what each one counts:

- ``sheets`` (.xls): BOUNDSHEET records of worksheets, Excel 4 macro sheets and chart sheets (not the VBA module
  sheets of BIFF5) / the sheets of ``xl/workbook.xml``. Names compare cut to Excel's 31 characters. A SpreadsheetML
  2003 workbook named .xls has its sheets, cells, comments and headers read from its XML (``spreadsheetml``), an
  Excel 2.x-4.0 worksheet its one sheet and its cells (``biff4``).
- ``cells`` (.xls): xlrd's cells with a stored value: numbers, dates (the number stored), booleans, error values,
  non-empty text; a formula cell counts with its stored result. Blank cells and empty text do not count. In the
  result: the values of the ``<c>`` elements, shared strings resolved. ``result`` in the report is how many of the
  source's cells are equal in the result: numbers within a relative ``RELATIVE_TOLERANCE`` (LibreOffice writes 15
  significant digits), text exactly (a CR LF equal to an LF, the line break of a cell), booleans and error values
  as such; a workbook saved with the other date system has its date cells shifted by 1462 days.
- ``slides`` (.ppt): the slides of the SlideListWithText that the persist directory resolves / the slide list's
  slide parts.
- ``notes`` (.ppt): notes pages with text in their body placeholder / notes slides with text in ``ph type="body"``.
- ``characters`` (.doc, .ppt): non-whitespace characters of the body text, control characters left out. .doc: the
  main story of the piece table (CP 0 to ccpText) without field codes (0x13 code 0x14 result 0x15: the results
  stay); Word 6/95 files (8-bit text in each run's font's code page, not read here) count the characters beyond
  ASCII as one kind, ``FOLDED``. .docx: ``w:t``, ``w:delText`` and symbols of ``word/document.xml``, as
  ``ooxml.py`` counts them. .ppt: the text atoms of the slides (their SlideListWithText text and their own text
  boxes), without the "*" that fields stand on / ``a:t`` of the slides. The report compares them as multisets:
  ``result`` is how many of the source's characters the result holds, and ``TEXT_TOLERANCE_CHARACTERS`` +
  ``TEXT_TOLERANCE_RATIO`` of them may be missing without a loss (fields LibreOffice computes at load: dates,
  page and slide numbers; the same allowance as the output check of ``convert.py``).
- ``images``: distinct pictures the user placed. Source: the BLIPs (told apart by their MD4 uid, or by their bytes
  where the writer left the uid empty) that OfficeArt shapes show with ``pib`` or a picture/texture ``fillBlip``,
  leaving out deleted shapes, OLE shapes (their preview), the own background of a slide that shows its master's,
  and masters no slide uses; in a .doc also the inline pictures (CHPX runs with sprmCPicLocation on a 0x01 of the
  text, not OLE previews, not form data); in an RTF file named .doc its picture groups that show (``rtf``).
  Result: distinct media parts referenced by ``a:blip``, ``v:imagedata`` or ``v:fill`` from content parts, outside
  OLE objects, controls and ``mc:Fallback`` renderings, and the picture bullets a list level uses (a .doc holds them
  as inline pictures in hidden text); charts' parts are not read.
- ``embedded_objects``: OLE objects: .doc ``ObjectPool`` storages (an RTF file's embedded object groups) and .xls
  ``MBD*`` storages (not linked objects, not ActiveX controls), .ppt ExEmbed objects a shape of a slide, used master
  or notes page shows. MS Graph charts of a .doc/.ppt are such objects (those formats have no charts of their own).
  Result: parts under ``*/embeddings/`` that no chart refers to (a chart's data), plus in .docx/.pptx the chart
  parts (made of MS Graph objects) and equations (``m:oMath``, made of Equation Editor objects).
- ``charts`` (.xls): chart substreams (BOF of type 0x20: chart sheets and embedded charts) / ``xl/charts/chart*``.
- ``comments``: .doc annotations (PlcfandRef; an RTF file's annotation groups), .xls NOTE records, .ppt Comment10
  containers of the slides / ``w:comment``, ``<comment>`` of the sheets' comments parts, ``p:cm`` of the slides'
  comments parts.
- ``headers_footers``: .doc header/footer stories that show something and are in effect (even ones with facing
  pages only, first-page ones in sections with a title page only, a continuous section's own only when a page
  break is in it or it runs past ``doc.PAGE_OF_TEXT`` characters; an empty story takes the previous section's);
  .xls non-empty HEADER/FOOTER records of the worksheets; .ppt the date, slide number and footer the slides show
  (HeadersFootersAtom of the slide or the document, with text for a footer or fixed date, and a placeholder for it
  on the slide's master) / non-empty header and footer parts; non-empty ``oddHeader``/``oddFooter``;
  ``dt``/``sldNum``/``ftr`` placeholders on slides.
- ``macros``: VBA modules (``vba.modules``) on both sides; ``result`` is how many of the source's modules the result
  holds with the same code (line ends and trailing spaces aside).

Unknown: a count that cannot be read (damaged, encrypted or unsupported structures, the record budget spent) is
``None`` in ``Inventory.counts`` and ``null`` in the report. An unknown source count is not compared, so it never
makes a loss; an unknown result count is a loss where the source holds something of that kind. Nothing here raises
for a broken file; the work is bounded (``common``).
"""

import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from docshift.engine import vba, vbaproject
from docshift.engine.cfb import CompoundFile
from docshift.engine.inventory import (
    biff4,
    data_store,
    doc,
    docx,
    ppt,
    ppt_links,
    pptx,
    properties,
    rtf,
    spreadsheetml,
    wp42,
    xls,
    xlsx,
)
from docshift.engine.inventory.common import (
    KINDS,
    LABELS,
    SHEET_NAME_LIMIT,
    Budget,
    ErrorValue,
    Inventory,
    StoredDate,
    attempt,
)
from docshift.engine.inventory.fidelity import normal_code, report, same_value
from docshift.engine.inventory.package import Package, has_vba_part

__all__ = ["KINDS", "LABELS", "SHEET_NAME_LIMIT", "ErrorValue", "Inventory", "StoredDate", "normal_code",
           "of_guessed_wordperfect", "of_result", "of_source", "report", "same_value", "unknown"]


# the formats a legacy name may hold that are no compound file and whose counts are read: [(recognise, read)]
OTHER_FORMATS: dict[str, list[tuple[Callable[[str | Path], bool], Callable[[str | Path, Inventory, Budget], None]]]] = {
    "doc": [(rtf.is_rtf, rtf.read)],
    "xls": [(spreadsheetml.is_spreadsheetml, spreadsheetml.read), (biff4.is_worksheet, biff4.read)]}


def unknown(kind: str) -> Inventory:
    """An inventory of ``kind`` that knows nothing: every count None, which no report names as lost."""
    return Inventory(kind, dict.fromkeys(KINDS[kind]))


def of_source(path: str | Path, kind: str, carries_macros: bool | None = None) -> Inventory:
    """The :class:`Inventory` of the legacy file ``path`` of ``kind`` ("doc", "xls" or "ppt"), counted from its
    OLE storages and records (and xlrd's cells); ``carries_macros``: ``vba.has_project`` of it, when the caller
    has already asked. Never raises: what cannot be read is None (unknown)."""
    inventory = unknown(kind)
    budget = Budget()
    try:
        ole = CompoundFile(path)
    except Exception:  # not an OLE file, or its directory is broken: nothing can be counted
        ole = None
    if ole is not None:
        try:
            inventory.properties = properties.read(ole)
            inventory.data_store = data_store.read(ole)
            {"doc": doc.read, "xls": xls.read, "ppt": ppt.read}[kind](ole, inventory, budget, path)
            if kind == "ppt":  # a reader of its own, as the deck's other counts do not need it
                attempt(ppt_links.read, ole, inventory, budget)
        except Exception:  # a reader missed a case: what it had not counted stays unknown
            pass
        finally:
            ole.close()
    else:  # an RTF file named .doc, a SpreadsheetML workbook or an Excel 4.0 worksheet named .xls
        try:
            read = next((read for recognise, read in OTHER_FORMATS.get(kind, []) if recognise(path)), None)
            if read is not None:
                read(path, inventory, budget)
        except Exception:  # unreadable: its counts stay unknown
            pass
    _count_macros(path, inventory,
                  lambda vba: vba.has_project(path, kind) if carries_macros is None else carries_macros)
    if inventory.macros or carries_macros:
        inventory.project = vbaproject.of_source(path, kind)
    return inventory


def of_guessed_wordperfect(path: str | Path, found: Inventory) -> Inventory:
    """``found`` (the legacy file's inventory, all unknown for a file that is no compound file) with the text of a
    file LibreOffice took for a WordPerfect 4.2 document counted (``wp42``), where it is 8-bit text."""
    if found.text is not None:
        return found
    try:
        wp42.read(path, found)
    except Exception:  # unreadable: its counts stay unknown
        pass
    return found


def of_web_archive(kind: str, found: Any) -> Inventory:
    """The :class:`Inventory` of a web archive (MHT) that Word or Excel saved as ``kind``, from what the child that
    unpacked it read of it (``engine/uno/webarchive.py``): the pictures its pages show and a workbook's sheet names.
    Whatever is not such a count stays unknown."""
    inventory = unknown(kind)
    found = found if isinstance(found, dict) else {}
    pictures, sheets = found.get("pictures"), found.get("sheets")
    if isinstance(pictures, int) and not isinstance(pictures, bool) and pictures >= 0:
        inventory.counts["images"] = pictures
    if kind == "xls" and isinstance(sheets, list) and sheets and all(isinstance(name, str) for name in sheets):
        inventory.sheets, inventory.counts["sheets"] = sheets, len(sheets)
    return inventory


def of_result(path: str | Path, kind: str) -> Inventory:
    """The :class:`Inventory` of the OOXML result ``path`` of a legacy ``kind`` ("doc", "xls" or "ppt"), read from
    its parts as streams. Never raises: what cannot be read is None (unknown)."""
    inventory = unknown(kind)
    try:
        with zipfile.ZipFile(path) as zip_file:
            package = Package(zip_file)
            {"doc": docx.read, "xls": xlsx.read, "ppt": pptx.read}[kind](package, inventory)
    except Exception:  # not a zip, or a reader missed a case: what it had not counted stays unknown
        pass
    _count_macros(path, inventory, lambda _: has_vba_part(path))
    if kind in vbaproject.PROJECT_STORAGE:
        inventory.project = vbaproject.of_result(path)
    return inventory


def _count_macros(path: str | Path, inventory: Inventory, present: Callable[[ModuleType], bool]) -> None:
    """The VBA modules (``vba.modules``) when ``present`` (a cheap look for a project) says there may be some."""
    try:
        inventory.macros = vba.modules(path) if present(vba) else {}
        inventory.counts["macros"] = len(inventory.macros)
    except Exception:  # vba.modules does not raise; this is a last guard: the count stays unknown
        inventory.macros = None
