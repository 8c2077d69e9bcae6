"""The text of a .doc that its fidelity report counts: the results of the fields LibreOffice computes at load (a file
name, a date, a page count, an author) are not counted, a hyperlink's text is, and a symbol (a "(" with
sprmCSymbol) counts as the character it shows, as the result's ``w:sym`` does. Files saved by LibreOffice here,
and corpus files with symbols, converted by a plain soffice."""

import shutil

import pytest
from conftest import ROOT, _soffice_save

from docshift.engine import inventory
from docshift.engine.inventory.common import characters

CORPUS = ROOT.parent / "shared" / "corpus"
FIELDS = """<?xml version="1.0" encoding="UTF-8"?><office:document
 xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:xlink="http://www.w3.org/1999/xlink"
 xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" office:version="1.2"
 office:mimetype="application/vnd.oasis.opendocument.text"><office:meta><meta:initial-creator>Somebody Else
</meta:initial-creator></office:meta><office:body><office:text><text:p>The words of this letter are kept.</text:p>
<text:p>Saved as <text:file-name text:display="name-and-extension">a-stored-file-name.doc</text:file-name> on
<text:date>2001-02-03</text:date>, of <text:page-count>1</text:page-count> page, by
<text:initial-creator>Somebody Else</text:initial-creator>.</text:p>
<text:p>See <text:a xlink:type="simple" xlink:href="https://example.org/">the example website</text:a>.</text:p>
</office:text></office:body></office:document>"""
# what a reader of the .doc sees but the fields LibreOffice computes again
OWN_WORDS = "The words of this letter are kept. Saved as on , of page, by . See the example website."


@pytest.fixture(scope="module")
def fields(tmp_path_factory):
    """(the .doc LibreOffice saved with a FILENAME, DATE, NUMPAGES, AUTHOR and HYPERLINK field, under another name
    than the one its FILENAME field stored; the .docx a plain soffice makes of it)."""
    out = tmp_path_factory.mktemp("fields")
    (out / "a-stored-file-name.fodt").write_text(FIELDS)
    saved = _soffice_save(out / "a-stored-file-name.fodt", "doc:MS Word 97", out)
    renamed = out / "renamed" / "x.doc"
    renamed.parent.mkdir()
    shutil.copy(saved, renamed)
    return renamed, _soffice_save(renamed, "docx", renamed.parent)


def test_the_results_of_fields_computed_at_load_are_not_counted_but_a_hyperlink_s_text_is(fields):
    source, _ = fields
    assert inventory.of_source(source, "doc").text == characters(OWN_WORDS)


def test_a_file_renamed_since_its_file_name_field_was_stored_converts_complete(fields):
    # LibreOffice writes the file's own name where the field stored "a-stored-file-name.fodt": 20 characters
    # missing, past the tolerance, were reported lost
    source, result = fields
    report = inventory.report(inventory.of_source(source, "doc"), inventory.of_result(result, "doc"))
    assert report["complete"] is True, report["lost"]
    own = sum(characters(OWN_WORDS).values())
    assert report["counts"]["characters"] == {"source": own, "result": own}


@pytest.mark.parametrize("name, symbols", [("53379.doc", {"\uf0b0": 23, "\uf061": 2, "\uf06d": 2}),
                                           ("Bug50936_2.doc", {"\uf0e0": 5})])
def test_a_symbol_counts_as_the_character_it_shows(tmp_path, name, symbols):
    source = CORPUS / "doc" / name
    held = inventory.of_source(source, "doc")
    assert {char: held.text[char] for char in symbols} == symbols
    result = _soffice_save(source, "docx", tmp_path)
    report = inventory.report(held, inventory.of_result(result, "doc"))
    # every character found, the symbols included: before, each symbol was a "(" the result did not hold
    counted = report["counts"]["characters"]
    assert counted["source"] == counted["result"] == sum(held.text.values())


def _with_notes(count):
    """A flat ODF text of ``count`` paragraphs, each with a footnote, and an endnote at its end: their numbers
    are LibreOffice's own."""
    note = ('<text:note text:note-class="{0}"><text:note-citation>{1}</text:note-citation><text:note-body>'
            '<text:p>Where paragraph {1} comes from.</text:p></text:note-body></text:note>')
    body = "".join(f"<text:p>Paragraph {n} needs a source.{note.format('footnote', n + 1)}</text:p>"
                   for n in range(count)) + f"<text:p>The end.{note.format('endnote', 1)}</text:p>"
    return FIELDS.split("<office:body>")[0] + \
        f"<office:body><office:text>{body}</office:text></office:body></office:document>"


def test_a_text_with_many_notes_converts(office, tmp_path):
    """A numbered note's mark is text to LibreOffice and an element to a .docx: 40 notes' numbers were 71 of 1,461
    characters the output check found missing, and it refused the file (plain soffice converts it). The marks are
    now left out of what LibreOffice loaded, and the text of the notes is still counted in the report."""
    from docshift.engine import convert

    (tmp_path / "notes.fodt").write_text(_with_notes(40))
    source = _soffice_save(tmp_path / "notes.fodt", "doc:MS Word 97", tmp_path)
    converted = convert.convert(office, source, "doc", tmp_path / "work", 60)
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert converted.fidelity["counts"]["characters"]["source"] > 40 * len("Paragraph 0 needs a source.") * 0.8
