"""What a plain ``soffice --convert-to`` keeps that docshift's result does not, part by part, over folders of legacy
files: the check that finds a loss no count of the fidelity report looks for.

Each file goes through a cold ``soffice`` of the same LibreOffice (``reference.Cold``: its own profile, no sandbox)
and through the worker's engine (a fresh child of the preinitialised parent in its sandbox, the mends, the checks).
Where both converted, the two packages are compared:

- media: every picture, sound or video part of the plain result, by its bytes: is the same data in docshift's?
  (docshift's may hold more: objects and sounds it puts back.)
- relationships, by type: does docshift's hold at least as many of each (images, audio, charts, objects,
  hyperlinks, comments, notes, ...)? An object counts once whether it is an OOXML package (LibreOffice's, of an
  Office object it converted) or an OLE storage (docshift's: the legacy file's own). A hyperlink to a file outside
  the package is left out: LibreOffice links a sound there that docshift puts into the package.
- the parts themselves, by kind (slides, sheets, charts, drawings, headers, embedded objects, ...): as many?
- the elements of the XML parts, by part kind and element name (paragraphs and runs, cells and formulas, shapes,
  merged ranges, validations, transitions, ...): as many? A text's pictures and objects count as one kind
  (``elements``).

It prints each file where docshift's result holds less than the plain one, and each that only the plain soffice
converted with docshift's error code, then the totals. Outcomes where one side did not convert are counted, not
compared (``bench/corpus.py`` judges those).

    .venv/bin/python bench/parts.py [FOLDER ...]      # default ../shared/corpus/doc, xls and ppt
"""

import argparse
import hashlib
import re
import xml.etree.ElementTree as ElementTree
import zipfile
from collections import Counter
from pathlib import Path

import reference

from docshift.engine.profile import KEPT_FONT_NAMES

HERE = Path(__file__).resolve().parent
MEDIA = re.compile(r"(word|xl|ppt)/media/")
NUMBERED = re.compile(r"[0-9]+(?=\.[a-z]+$)")
EMBEDDED = re.compile(r"(word|xl|ppt)/embeddings/")
# an embedded object, whichever way it is stored: LibreOffice writes an Office object it converted as an OOXML
# package, docshift puts the legacy file's own OLE storage back in its place
OBJECT_TYPES = {"package": "object", "oleObject": "object", "chartsheet": "worksheet"}
# a chart sheet stands for the worksheet holding its chart alone that LibreOffice writes (``chart_sheets.py``): the
# same kind of part, less what only a worksheet has (its root and its cells' settings), its drawing's cell anchors
# absolute ones
CHART_SHEETS, SHEETS, DRAWINGS = "xl/chartsheets/", "xl/worksheets/", "xl/drawings/drawing.xml"
WORKSHEET_ONLY = ("worksheet", "dimension", "sheetFormatPr", "sheetData", "printOptions", "pageSetUpPr", "selection")
CELL_ANCHOR = {"twoCellAnchor": 1, "from": 1, "to": 1, "col": 2, "row": 2, "colOff": 2, "rowOff": 2}
WORD = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
SPREADSHEET = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
PICTURE_OR_OBJECT = {WORD + "drawing", WORD + "object"}
NOT_XML = "not well-formed"
COLOUR = "srgbClr or sysClr"
TEXT_STYLES = "{http://schemas.openxmlformats.org/presentationml/2006/main}txStyles"
# the formulas LibreOffice makes of TRUE, FALSE and errors typed into an .xls's cells
TYPED = {"", "TRUE()", "FALSE()", "NA()"}
TIMEOUT = 60
FONT, ALT_NAME = WORD + "font", WORD + "altName"


def holds(path):
    """(Counter of media data by SHA-256, Counter of relationship types, Counter of parts by kind) of a package."""
    media, relations, parts = Counter(), Counter(), Counter()
    with zipfile.ZipFile(path) as package:
        for name in package.namelist():
            if MEDIA.match(name):
                media[hashlib.sha256(package.read(name)).hexdigest()] += 1
            elif name.endswith(".rels"):
                for match in re.finditer(rb"<Relationship\b[^>]*>", package.read(name)):
                    tag = match.group(0)
                    kind = re.search(rb'Type="[^"]*/([^/"]+)"', tag)
                    if kind and not (kind.group(1) == b"hyperlink" and b'TargetMode="External"' in tag):
                        relations[OBJECT_TYPES.get(kind.group(1).decode(), kind.group(1).decode())] += 1
            elif EMBEDDED.match(name):
                parts[EMBEDDED.match(name).group(0) + "*"] += 1
            elif not name.endswith("/"):
                parts[NUMBERED.sub("", name).replace(CHART_SHEETS, SHEETS)] += 1
    return media, relations, parts


def elements(path):
    """Counter of (part kind, element name) over the XML parts of a package (a chart sheet's counted as a
    worksheet's). A text's picture (``w:drawing``) and
    object (``w:object``) count as one kind, and what is inside them not at all: docshift makes an object of a
    picture that stands where the legacy file has an object (``word_objects.py``). A data table's formula counts
    once for each cell of its range, as Excel writes one for the range where LibreOffice writes one a cell
    (``sheet_tables.py``). An RGB colour and a system colour (which names its RGB) count as one kind: the theme a
    deck's master gets back names the window's colours as PowerPoint saved them (``slide_schemes.py``). A slide
    master's text styles count not at all: only docshift writes them (``master_styles.py``), and what is in them
    would stand in for what the master's own paragraphs lack. Nor does a cell's formula that LibreOffice makes of a
    typed value (``TYPED``): docshift's result holds the value alone (``sheet_constants.py``). A cell centred across
    selection with the blanks right of it counts as the merged range LibreOffice makes of them (``sheet_across.py``).
    Nor does a font's alternative name where the font's own name is one whose substitute the engine's profile takes
    away (``KEPT_FONT_NAMES``): LibreOffice writes that substitute there, and Word writes none for such a font."""
    found = Counter()
    kept_font = False
    with zipfile.ZipFile(path) as package:
        across = _centred_across(package)
        for name in package.namelist():
            if not name.endswith(".xml") or EMBEDDED.match(name):
                continue
            kind, inside, styles = NUMBERED.sub("", name).replace(CHART_SHEETS, SHEETS), 0, 0
            runs, merges = _Runs(across), found[kind, "mergeCells"]
            try:
                with package.open(name) as part:
                    for event, element in ElementTree.iterparse(part, ("start", "end")):
                        if event == "end" and across and element.tag == SPREADSHEET + "c":
                            runs.cell(element)
                        if event == "start" and element.tag == FONT:
                            kept_font = _search_name(element.get(WORD + "name", "")) in KEPT_FONT_NAMES
                        if element.tag == ALT_NAME and kept_font:
                            continue
                        if element.tag == TEXT_STYLES or styles:
                            styles += 1 if event == "start" else -1
                            continue
                        tag = element.tag.rsplit("}", 1)[-1]
                        tag = COLOUR if tag in ("srgbClr", "sysClr") else tag
                        shown = element.tag in PICTURE_OR_OBJECT
                        if event == "start":
                            if not inside and tag != "f":
                                found[kind, "picture or object" if shown else tag] += 1
                            inside += shown or bool(inside)
                        else:
                            inside -= shown or bool(inside)
                            if tag == "f" and not inside and (element.get("t") or (element.text or "") not in TYPED):
                                found[kind, tag] += _cells(element) if element.get("t") == "dataTable" else 1
                            element.clear()
            except ElementTree.ParseError as error:
                found[kind, f"{NOT_XML} ({name}: {error})"] += 1
            found[kind, "mergeCell"] += runs.count
            found[kind, "mergeCells"] += bool(runs.count) and found[kind, "mergeCells"] == merges
    return found


def _search_name(name):
    """A font's ``name`` as LibreOffice looks it up in its substitution table: ASCII letters (in lower case),
    digits, semicolons and brackets."""
    return re.sub(r"[^a-z0-9;()]", "", name.lower())


def _centred_across(package):
    """The cell styles of the workbook ``package`` aligned centerContinuous, by their index."""
    if "xl/styles.xml" not in package.namelist():
        return set()
    styles = ElementTree.fromstring(package.read("xl/styles.xml")).find(SPREADSHEET + "cellXfs")
    aligned = [xf.find(SPREADSHEET + "alignment") for xf in (styles if styles is not None else [])]
    return {index for index, alignment in enumerate(aligned)
            if alignment is not None and alignment.get("horizontal") == "centerContinuous"}


class _Runs:
    """The ranges of a worksheet's cells LibreOffice merges where the cells centre across selection: a cell with a
    value, and each blank right of it, of a style ``across`` names."""

    def __init__(self, across):
        self.across, self.count, self.last = across, 0, None  # the last cell of the run, and whether it is blank

    def cell(self, element):
        row, column = _place(element.get("r", ""))
        if int(element.get("s", "0")) not in self.across:
            self.last = None
            return
        blank = not any(child.tag in (SPREADSHEET + "v", SPREADSHEET + "is") for child in element)
        if blank and self.last is not None and self.last[:2] == (row, column - 1):
            self.count += not self.last[2]  # a range counts once, at its first blank
            self.last = (row, column, True)
        else:
            self.last = None if blank else (row, column, False)


def _place(reference):
    """(row, column) of an A1 reference; (0, 0) where it does not read."""
    found = re.fullmatch(r"([A-Z]+)([0-9]+)", reference)
    return (0, 0) if found is None else (int(found.group(2)), _column(found.group(1)))


def _column(letters):
    """The number of the column named ``letters`` (A: 1)."""
    return sum((ord(letter) - 64) * 26 ** power for power, letter in enumerate(reversed(letters)))


def _cells(formula):
    """How many cells the range (``ref``) of a data table's formula element covers; 1 where it does not read."""
    corners = re.fullmatch(r"([A-Z]+)([0-9]+):([A-Z]+)([0-9]+)", formula.get("ref", ""))
    if corners is None:
        return 1
    first_column, first_row, last_column, last_row = corners.groups()
    return (int(last_row) - int(first_row) + 1) * (_column(last_column) - _column(first_column) + 1)


def lacks(plain, ours):
    """What docshift's package ``ours`` holds less of than the plain ``plain``, in words ([] when nothing)."""
    (plain_media, plain_rels, plain_parts), (our_media, our_rels, our_parts) = holds(plain), holds(ours)
    found = []
    missing = sum((plain_media - our_media).values())
    if missing:
        found.append(f"{missing} of {plain_media.total()} media parts")
    found += [f"{kind}: {count - our_rels[kind]} of {count} relationships" for kind, count in sorted(plain_rels.items())
              if our_rels[kind] < count]
    found += [f"{part}: {count - our_parts[part]} of {count} parts" for part, count in sorted(plain_parts.items())
              if our_parts[part] < count]
    plain_elements, our_elements = elements(plain), elements(ours)
    charted = _chart_sheets(ours)
    anchored = our_elements[DRAWINGS, "absoluteAnchor"] - plain_elements[DRAWINGS, "absoluteAnchor"]
    our_elements.update({(f"{SHEETS}sheet.xml", tag): charted for tag in WORKSHEET_ONLY})
    our_elements.update({(DRAWINGS, tag): count * anchored for tag, count in CELL_ANCHOR.items()})
    found += [f"{part}: {tag}" for part, tag in our_elements if tag.startswith(NOT_XML)]
    # a plain part that is no XML (LibreOffice's comments of a deck, unescaped) holds nothing to count against ours
    found += [f"{part} <{tag}>: {count - our_elements[part, tag]} of {count} elements"
              for (part, tag), count in sorted(plain_elements.items())
              if our_elements[part, tag] < count and not tag.startswith(NOT_XML)]
    return found


def _chart_sheets(path):
    """How many chart sheets the package at ``path`` has."""
    with zipfile.ZipFile(path) as package:
        return sum(1 for name in package.namelist() if name.startswith(CHART_SHEETS) and name.endswith(".xml"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus = HERE.parent.parent / "shared" / "corpus"
    parser.add_argument("folders", nargs="*", type=Path, default=[corpus / kind for kind in ("doc", "xls", "ppt")])
    args = parser.parse_args()
    tally, short = Counter(), Counter()
    files = reference.legacy_files(args.folders)
    for path, _, plain_content, plain, ours, code in reference.both(files, "parts", TIMEOUT):
        if plain_content is None or ours is None:
            tally["plain only" if ours is None and plain_content else "not compared"] += 1
            if ours is None and plain_content:
                print(f"{path.parent.name}/{path.name}: converted by the plain soffice only; docshift: {code}",
                      flush=True)
            continue
        tally["compared"] += 1
        found = lacks(plain, ours)
        if found:
            tally["holding less"] += 1
            short.update(entry.split(":")[0] if ":" in entry else "media" for entry in found)
            print(f"{path.parent.name}/{path.name}: {'; '.join(found)}", flush=True)
    print(f"\n{len(files)} files: {dict(tally)}")
    print(f"what docshift's results hold less of, in how many files: {dict(short)}")


if __name__ == "__main__":
    main()
