"""Font names that LibreOffice's exports write as an "MS" substitute: the engine's profile takes the substitutes of
the names legacy files give away (``profile.KEPT_FONT_NAMES``), and keeps those of LibreOffice's own fonts."""

import re
import struct
import zipfile

import openpyxl
from conftest import ROOT
from conftest import _soffice_save as soffice
from openpyxl.styles import Font
from workbooks import record, rewritten, saved_as_xls, with_workbook_stream

from docshift.engine import convert

# the names each cell's font gets in the .xls, and what a plain soffice writes for each
NAMED = {"Helvetica": "Arial", "Times": "Times New Roman", "Courier": "Courier New", "Algerian": "comic",
         "Tms Rmn": "Times New Roman"}
WORKBOOK = ROOT.parent / "shared" / "corpus" / "xls" / "45365.xls"  # in Arial, Helv, Helvetica, MS Sans Serif
DECK = ROOT.parent / "shared" / "corpus" / "ppt" / "56260.ppt"  # its font collection names Helvetica, not Arial


def font_names(result):
    """The name of each font of the workbook ``result``'s font list, in order."""
    with zipfile.ZipFile(result) as package:
        styles = package.read("xl/styles.xml").decode()
    fonts = styles.split("<fonts", 1)[1].split("</fonts>", 1)[0]
    return re.findall(r'<name val="([^"]*)"', fonts)


def typefaces(result):
    """The typefaces the slides and masters of the deck ``result`` name, each once."""
    with zipfile.ZipFile(result) as package:
        return {face for name in package.namelist() if re.fullmatch(r"ppt/(slides|slideMasters)/\w+\.xml", name)
                for face in re.findall(r'typeface="([^"]*)"', package.read(name).decode())}


def with_font_names(source, out):
    """The .xls ``source`` with each FONT record that names Placeholder<n> naming the n-th of ``NAMED``."""
    names = list(NAMED)

    def edit(rec_type, body, _):
        # a BIFF8 FONT's name: its length at byte 14, then a flag (1: UTF-16), then its characters
        written = body[16:].decode("utf-16-le" if body[15] & 1 else "latin-1") if rec_type == 0x0031 else ""
        if not written.startswith("Placeholder"):
            return None
        index = int(written.removeprefix("Placeholder"))
        name = names[index].encode("latin-1")
        return record(rec_type, body[:14] + struct.pack("<BB", len(name), 0) + name)

    return with_workbook_stream(source, lambda stream: rewritten(stream, edit), out)


def test_a_workbook_keeps_the_font_names_it_gives(office, tmp_path):
    """Cells in Helvetica, Times, Courier, Algerian and Tms Rmn: a plain soffice writes their fonts as Arial, Times
    New Roman, Courier New, "comic" (no font has that name) and Times New Roman; docshift's result names each as the
    .xls does, and every other font as the plain one does."""
    book = openpyxl.Workbook()
    for row, _ in enumerate(NAMED, 1):
        book.active.cell(row, 1, f"row {row}").font = Font(name=f"Placeholder{row - 1}", size=10 + row)
    source = with_font_names(saved_as_xls(book, tmp_path, "fonts"), tmp_path / "named.xls")
    plain = font_names(soffice(source, "xlsx", tmp_path / "plain"))
    ours = font_names(convert.convert(office, source, "xls", tmp_path / "work", 60).path)
    assert plain[-len(NAMED):] == list(NAMED.values())
    assert ours[-len(NAMED):] == list(NAMED)
    assert ours[:-len(NAMED)] == plain[:-len(NAMED)]


def test_libreoffice_s_own_default_font_is_still_written_as_arial(office, tmp_path):
    """``45365.xls``: the first font of the result, LibreOffice's default cell style's, is its own Liberation Sans,
    which its table's substitute (kept) writes as Arial, on both sides. Its Helv and Helvetica stay."""
    plain = font_names(soffice(WORKBOOK, "xlsx", tmp_path / "plain"))
    ours = font_names(convert.convert(office, WORKBOOK, "xls", tmp_path / "work", 60).path)
    assert ours[0] == plain[0] == "Arial" and not any("Liberation" in name for name in ours)
    assert {"Helv", "Helvetica"} <= set(ours) and not {"Helv", "Helvetica"} & set(plain)


def test_a_deck_keeps_the_font_names_it_gives(office, tmp_path):
    """``56260.ppt``'s text is in Helvetica (its font collection names no Arial): a plain soffice writes it as
    Arial, docshift's result as Helvetica."""
    plain = typefaces(soffice(DECK, "pptx", tmp_path / "plain"))
    ours = typefaces(convert.convert(office, DECK, "ppt", tmp_path / "work", 120).path)
    assert "Arial" in plain and "Helvetica" not in plain
    assert "Helvetica" in ours and "Arial" not in ours
    assert plain - {"Arial"} == ours - {"Helvetica"}
