"""A DOS text file named .doc that LibreOffice takes for a WordPerfect 4.2 document (which has no header): its import
drops the letters beyond ASCII as formatting codes ("für" becomes "fr"), and the fidelity report says so, counted
from the file's bytes. The files are made here."""

import pytest

from docshift.engine import convert
from docshift.engine.inventory import of_guessed_wordperfect, unknown
from docshift.engine.inventory.common import FOLDED

LINES = ["Dieses Programm für den Rechner packt Dateien in eine und kann sie wieder auspacken.",
         "Die Länge der Folgen wird geprüft, schöne Grüsse an alle Benutzer.",
         "Das Archiv beginnt mit der Versionsnummer; danach folgen die Einträge.",
         "Über die Menge entscheidet der Zähler."]
# German in code page 850 without an "ß" (0xE1): every letter beyond ASCII is a byte of 0x80-0xBF
GERMAN = ("\r\n".join(LINES * 6) + "\r\n").encode("cp850")
INNER = sum(word.count(letter) for word in " ".join(LINES * 6).split() for letter in "üäöÜÄÖ"
            if letter in word[1:-1])
# WordPerfect 4.2's own codes: bold on (0x9D) and off (0x9C), underline on (0x94) and off (0x95) between words, and a
# soft hyphen (0xAC) inside one
CODED = b"This report is \x9dimportant\x9c and \x94underlined\x95 text, hyphen\xacated.\r\n" * 20


def guessed(tmp_path, data):
    path = tmp_path / "file.doc"
    path.write_bytes(data)
    return of_guessed_wordperfect(path, unknown("doc"))


def test_dos_letters_inside_words_are_counted_beyond_ascii(tmp_path):
    found = guessed(tmp_path, GERMAN)
    assert found.text[FOLDED] == INNER > 20
    assert found.counts["characters"] == found.text.total()
    assert found.text["D"] == GERMAN.count(b"D")
    assert "'für'" in found.where["characters"][0] and "WordPerfect 4.2" in found.where["characters"][0]


@pytest.mark.parametrize("data", [b"\xffWPC" + bytes(12) + b"text", GERMAN + "Größe".encode("cp850"),
                                  b"a\x00b", b"text \x05 with a control byte"])
def test_what_is_not_text_only_the_guess_took_for_a_document_stays_unknown(tmp_path, data):
    found = guessed(tmp_path, data)
    assert found.text is None and found.counts["characters"] is None


def test_codes_between_words_are_no_letters(tmp_path):
    found = guessed(tmp_path, CODED)
    assert FOLDED not in found.text and "characters" not in found.where


def test_a_dos_text_read_as_wordperfect_reports_its_letters_lost(office, tmp_path):
    source = tmp_path / "readme.doc"
    source.write_bytes(GERMAN)
    converted = convert.convert(office, source, "doc", tmp_path / "work", 60)
    assert converted.detected_format == "wordperfect"
    assert converted.fidelity["complete"] is False
    (lost,) = [entry for entry in converted.fidelity["lost"] if entry["what"] == "characters"]
    assert lost["count"] == INNER and f"{INNER} of them beyond ASCII" in lost["detail"]
    assert "'für'" in lost["detail"] and "WordPerfect 4.2" in lost["detail"]


def test_wordperfect_codes_between_words_are_no_loss(office, tmp_path):
    source = tmp_path / "report.doc"
    source.write_bytes(CODED)
    converted = convert.convert(office, source, "doc", tmp_path / "work", 60)
    assert converted.detected_format == "wordperfect"
    assert converted.fidelity["complete"] is True, converted.fidelity["lost"]
    assert converted.fidelity["counts"]["characters"]["source"] == converted.fidelity["counts"]["characters"]["result"]
