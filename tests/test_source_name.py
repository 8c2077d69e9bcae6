"""LibreOffice gets the file under the customer's own name, made safe: what it derives from the
name (a Word FILENAME field) shows theirs, as a plain ``soffice`` of the same file does."""

import io
import re
import shutil
import unicodedata
import zipfile

import pytest
import requests
from conftest import _soffice_save, post_file

from docshift.engine import Engine, convert
from docshift.formats import by_filename, source_name, target_name
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store


@pytest.mark.parametrize("filename,kind,expected", [
    ("Budget 2024.xls", "xls", "Budget 2024.xls"),
    ("report.DOC", "doc", "report.doc"),
    ("Überweisung März (final).doc", "doc", "Überweisung März (final).doc"),
    ("ÜBERSICHT.ppt".replace("Ü", "U\u0308"), "ppt", "ÜBERSICHT.ppt"),  # NFD, as macOS sends it
    ("..hidden.xls", "xls", "hidden.xls"),
    ("a/b\\c.doc", "doc", "a_b_c.doc"),
    ("what? *really*: <yes>|.doc", "doc", "what_ _really_ _yes_.doc"),
    ("tab\there\x00.doc", "doc", "tab_here_.doc"),
    ("%#$;`.ppt", "ppt", "document.ppt"),
    ("...", "doc", "document.doc"),
    ("", "xls", "document.xls"),
    (None, "xls", "document.xls"),
    ("bericht.xls", "doc", "bericht.doc"),  # the extension is always the task's type
])
def test_source_name(filename, kind, expected):
    assert source_name(filename, kind) == expected


def test_a_long_name_is_cut_on_a_character_boundary():
    name = source_name("ß" * 300 + ".doc", "doc")
    stem = name.removesuffix(".doc")
    assert name.endswith(".doc") and set(stem) == {"ß"}
    assert 0 < len(name.encode()) <= 255 and len(stem.encode()) <= 120


def test_every_safe_name_keeps_only_safe_characters():
    for code in range(0x20, 0x3000):
        name = source_name(f"x{chr(code)}y.doc", "doc")
        assert "/" not in name and "\\" not in name and not name.startswith(".")
        assert all(unicodedata.category(c)[0] in "LNM" or c in " -_.,()[]+&'!@~" for c in name), name


def filename_field_text(docx):
    """The text Word shows for the FILENAME field of ``docx``."""
    with zipfile.ZipFile(docx) as package:
        body = package.read("word/document.xml").decode()
    field = re.search(r"FILENAME.*?</w:fldSimple>|FILENAME.*?w:fldCharType=\"end\"", body, re.S).group(0)
    return "".join(re.findall(r"<w:t(?: [^>]*)?>([^<]*)</w:t>", field))


@pytest.fixture(scope="session")
def filename_field_doc(tmp_path_factory):
    """A .doc with a Word FILENAME field (LibreOffice computes its text from the file's name)."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    out = tmp_path_factory.mktemp("filename-field")
    document = docx.Document()
    paragraph = document.add_paragraph("This file is called ")
    paragraph._p.append(parse_xml(f'<w:fldSimple {nsdecls("w")} w:instr=" FILENAME ">'
                                  '<w:r><w:t>placeholder</w:t></w:r></w:fldSimple>'))
    document.save(out / "fields.docx")
    return _soffice_save(out / "fields.docx", "doc:MS Word 97", out)


def test_a_filename_field_shows_the_customers_name(office, app, client, account, filename_field_doc, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(filename_field_doc, plain / "Budget 2024.doc")
    expected = filename_field_text(_soffice_save(plain / "Budget 2024.doc", "docx", plain))
    assert expected == "Budget 2024.doc"

    response = post_file(client, account, filename_field_doc.read_bytes(), "Budget 2024.doc")
    task_id = response.get_json()["task_id"]
    with app.app_context():
        config = app.config["DOCSHIFT"]
        assert conversion.run_next(get_db(), get_store(), config, Engine(office), maintenance.worker_name()) \
            == "SUCCEEDED"
    task = client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {account}"}).get_json()
    download = requests.get(task["download_url"], timeout=30)
    assert download.status_code == 200
    assert filename_field_text(io.BytesIO(download.content)) == expected


def external_targets(xlsx):
    """The targets of the package's relationships to outside it."""
    with zipfile.ZipFile(xlsx) as package:
        return [target for name in package.namelist() if name.endswith(".rels")
                for target in re.findall(r'Target="([^"]*)" TargetMode="External"', package.read(name).decode())]


def test_a_link_to_a_file_beside_the_source_names_the_file_beside_the_result(office, relative_link_xls, tmp_path):
    # a plain soffice converting in place writes the link relative to the result: the file beside it
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(relative_link_xls, plain / "Budget 2024.xls")
    expected = external_targets(_soffice_save(plain / "Budget 2024.xls", "xlsx", plain))
    assert expected == ["figures.xls"]

    ours = tmp_path / "Budget 2024.xls"
    shutil.copy(relative_link_xls, ours)
    converted = convert.convert(office, ours, "xls", tmp_path / "work", 60)
    # not the worker's staging dir in the sandbox ("../../../job/staged-.../figures.xls")
    assert external_targets(converted.path) == expected
    assert converted.fidelity["complete"]


@pytest.mark.parametrize("name,extension,expected", [
    ("report.DOC", None, "report.docx"), ("a.b.xls", "xlsm", "a.b.xlsm"), (".doc", None, "converted.docx"),
    ("deck.ppt", None, "deck.pptx"), ("a.doc.exe", None, None), ("doc", None, None), ("a.", None, None),
])
def test_the_result_is_named_after_what_precedes_the_last_dot(name, extension, expected):
    """A name asks for a conversion by what follows its last dot; ``.doc`` alone ends in .doc too."""
    assert target_name(name, extension) == expected
    assert (by_filename(name) is not None) == (expected is not None)


@pytest.mark.parametrize("stem", ["a" * 251, "ü" * 150, "a" + "ü" * 126 + "b"])
def test_a_result_name_is_one_a_disk_can_hold(stem, tmp_path):
    """A 255-byte ``.doc`` name became a 256-byte ``.docx`` one: the client could not save the result, and stopped
    its whole run. The stem is cut to fit 255 bytes, at a character's end."""
    for extension in ("docx", "docm"):
        name = target_name(f"{stem}.doc", extension)
        assert name.endswith(f".{extension}") and stem.startswith(name[:-len(extension) - 1])
        assert 250 <= len(name.encode()) <= 255, name
        (tmp_path / name).write_bytes(b"")  # a name the disk takes
    assert target_name("short.doc") == "short.docx"


def test_a_name_of_bytes_that_are_no_utf_8_keeps_them():
    """A file name on Linux may hold bytes that are no UTF-8 (Python holds them as surrogates): the result's name
    keeps them; encoding it strictly raised, and the client stopped before converting anything."""
    name = b"caf\xe9.doc".decode(errors="surrogateescape")
    assert target_name(name) == b"caf\xe9.docx".decode(errors="surrogateescape")
    long_name = b"\xe9" * 300 + b".doc"
    cut = target_name(long_name.decode(errors="surrogateescape")).encode(errors="surrogateescape")
    assert len(cut) == 255 and cut.endswith(b".docx")
