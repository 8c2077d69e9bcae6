"""Who wrote each note of a workbook stays in the result: LibreOffice names every comment's author "Unknown Author".
Read from ``../shared/corpus``: two workbooks with notes of their authors (one of three authors, one a space)."""

import openpyxl
import pytest
from conftest import ROOT
from conftest import _soffice_save as soffice

from docshift.engine import convert, inventory
from docshift.engine.inventory.package import NS_S
from docshift.engine.sheet_authors import authored

CORPUS = ROOT.parent / "shared" / "corpus" / "xls"


def authors(path):
    """{(sheet, cell): the author of its comment} as openpyxl (as Excel) reads them."""
    book = openpyxl.load_workbook(path)
    return {(sheet.title, cell.coordinate): cell.comment.author
            for sheet in book.worksheets for row in sheet.iter_rows() for cell in row if cell.comment}


@pytest.mark.parametrize("name", ["SimpleWithComments.xls", "36947.xls"])
def test_each_note_keeps_its_author(office, name, tmp_path):
    source = CORPUS / name
    written = {(sheet, cell): author for sheet, cells in inventory.of_source(source, "xls").authors.items()
               for cell, author in cells.items()}
    assert written and len(set(written.values())) == (1 if name.startswith("Simple") else 3)
    assert set(authors(soffice(source, "xlsx", tmp_path / "plain")).values()) == {"Unknown Author"}
    converted = convert.convert(office, source, "xls", tmp_path / "work", 60)
    assert authors(converted.path) == written
    assert converted.fidelity["complete"]


PART = (f'<x:comments xmlns:x="{NS_S}"><x:authors><x:author>Unknown Author</x:author><x:author>Kept</x:author>'
        '</x:authors><x:commentList><x:comment ref="A1" authorId="0"><x:text/></x:comment>'
        '<x:comment ref="B2" authorId="1"><x:text/></x:comment><x:comment ref="C3" authorId="0"><x:text/></x:comment>'
        '</x:commentList></x:comments>')


def test_the_authors_list_is_the_names_in_their_order_of_use():
    """A comment of a cell the .xls names gets its author; one it does not name keeps the author it had; the list
    holds the names in the order the comments first use them, escaped, in the part's prefix."""
    data, changed = authored(PART.encode(), "xl/comments1.xml", {"A1": "Ann & Co", "C3": "Bob"})
    assert changed == 2
    assert data.decode() == PART.replace(
        "<x:author>Unknown Author</x:author><x:author>Kept</x:author>",
        "<x:author>Ann &amp; Co</x:author><x:author>Kept</x:author><x:author>Bob</x:author>").replace(
        'ref="C3" authorId="0"', 'ref="C3" authorId="2"')
    assert authored(data, "xl/comments1.xml", {"A1": "Ann & Co", "C3": "Bob"}) == (data, 0)
