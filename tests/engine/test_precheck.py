"""The pre-check: before LibreOffice, only what is certainly password-protected is refused; after
LibreOffice loaded nothing, it tells password-protected files from damaged ones."""

import olefile
import pytest
from conftest import encrypted_ooxml
from msoffcrypto import OfficeFile
from msoffcrypto.method.ecma376_agile import ECMA376Agile

from docshift.engine import precheck
from docshift.errors import ConversionFailed


def outcome(path):
    try:
        precheck.check(path)
    except ConversionFailed as failure:
        return failure.code
    return "accepted"


@pytest.mark.parametrize("real", ["doc", "xls", "ppt"])
@pytest.mark.parametrize("claimed", ["doc", "xls", "ppt"])
def test_documents_go_on_to_libreoffice_whatever_their_name(legacy, tmp_path, real, claimed):
    path = tmp_path / f"file.{claimed}"
    path.write_bytes(legacy[real].read_bytes())
    assert outcome(path) == "accepted"
    assert not precheck.encrypted(path)


@pytest.mark.parametrize("name", ["rtf.doc", "word_html.doc", "biff5.xls", "biff4.xls", "spreadsheetml.xls",
                                  "docx_named.doc", "upper_case.ppt", "text.doc", "png.ppt", "zip.xls",
                                  "random.doc"])
def test_anything_in_doubt_goes_on_to_libreoffice(variants, name):
    assert outcome(variants / name) == "accepted"
    assert not precheck.encrypted(variants / name)


@pytest.mark.parametrize("content", [b"", b"\xd0\xcf\x11\xe0", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\xff" * 600,
                                     b"PK\x03\x04 a zip", b"%PDF-1.7"])
def test_damaged_or_foreign_bytes_go_on_to_libreoffice(tmp_path, content):
    path = tmp_path / "x.doc"
    path.write_bytes(content)
    assert outcome(path) == "accepted"
    assert not precheck.encrypted(path)


def test_an_encrypted_ooxml_package_is_refused_before_libreoffice(tmp_path):
    assert outcome(encrypted_ooxml(tmp_path / "locked.xls")) == "encrypted_document"


def test_an_ooxml_package_with_the_default_password_goes_on(tmp_path):
    """Excel opens a package encrypted with "VelvetSweatshop" without asking; so may LibreOffice."""
    assert outcome(encrypted_ooxml(tmp_path / "velvet.xls", password="VelvetSweatshop")) == "accepted"


def test_an_encrypted_word_file_is_refused_before_libreoffice(variants):
    assert outcome(variants / "encrypted.doc") == "encrypted_document"


def test_an_encrypted_workbook_is_left_to_libreoffice_then_recognised(variants):
    """A FILEPASS record may hold the default password: only LibreOffice's failure to load decides."""
    assert outcome(variants / "encrypted.xls") == "accepted"
    assert precheck.encrypted(variants / "encrypted.xls")
    assert outcome(variants / "velvet_sweatshop.xls") == "accepted"


def test_a_package_that_asks_for_more_key_rounds_than_office_is_refused(tmp_path):
    """Even with the default password: deriving its key would cost the worker seconds of CPU."""
    velvet = encrypted_ooxml(tmp_path / "slow.xls", password="VelvetSweatshop", spin_count=1_000_000)
    assert outcome(velvet) == "encrypted_document"


def test_the_largest_spin_count_is_refused_without_deriving_a_key(tmp_path, monkeypatch):
    """10,000,000 rounds (the format's ceiling) would take seconds: the refusal reads the count only."""
    path = encrypted_ooxml(tmp_path / "ceiling.xls", password="VelvetSweatshop", spin_count=1_000_000)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        info = ole.openstream("EncryptionInfo").read()
        assert info.count(b'spinCount="1000000"') == 1
        ole.write_stream("EncryptionInfo", info.replace(b'spinCount="1000000"', b'spinCount="9999999"'))
    with open(path, "rb") as f:
        assert OfficeFile(f).info["spinValue"] == 9_999_999
    derived = []
    monkeypatch.setattr(ECMA376Agile, "_derive_iterated_hash_from_password",
                        staticmethod(lambda *args: derived.append(args) or pytest.fail("derived a key")))
    assert outcome(path) == "encrypted_document"
    assert derived == []
