"""docshift.engine.vba on real files: the corpus's macro-bearing .doc/.xls/.ppt, LibreOffice's .docm/.xlsm/.pptm of
them, and a .pptm with the .ppt's project put back in (LibreOffice writes none)."""

import logging
import shutil
import subprocess
import tracemalloc
import zipfile
from pathlib import Path

import olefile
import pptx
import pytest
from conftest import ROOT, SOFFICE_PROFILE

from docshift.engine import vba, vbaproject
from docshift.formats import FORMATS

CORPUS = ROOT.parent / "shared" / "corpus"
# every corpus file olevba finds VBA in; 60279.doc's one module has its source zeroed, so olevba reads no code from it
MACRO_FILES = {
    "doc": ["SimpleMacro.doc", "60279.doc"],
    "xls": ["SimpleMacro.xls", "27852.xls", "30070.xls", "44891.xls", "56450.xls", "WithCheckBoxes.xls"],
    "ppt": ["SimpleMacro.ppt", "WithMacros.ppt", "59302.ppt"],
}
MACRO_FREE = {
    "doc": ["47304.doc", "Word95.doc", "password_password_cryptoapi.doc", "picture.doc"],
    "xls": ["12561-1.xls", "SimpleWithComments.xls", "WithTwoCharts.xls"],
    # 23884 and bug55030 have a VBAInfoAtom whose fHasMacros is 0; 57272's UserEditAtom chain loops on itself
    "ppt": ["empty.ppt", "customGeo.ppt", "23884_defense_FINAL_OOimport_edit.ppt", "bug55030.ppt",
            "57272_corrupted_usereditatom.ppt"],
}
FILTERS = {"doc": "docm:MS Word 2007 XML VBA", "xls": "xlsm:Calc MS Excel 2007 VBA XML",
           "ppt": "pptm:Impress MS PowerPoint 2007 XML VBA"}
MACRO_ENABLED = {"doc": ".docm", "xls": ".xlsm", "ppt": ".pptm"}


def corpus(kind, name):
    """A corpus file's path; the test fails (never skips) when the corpus lacks it."""
    path = CORPUS / kind / name
    assert path.is_file(), f"corpus file missing: {path}"
    return path


def soffice(fmt, outdir, *sources):
    """LibreOffice converts ``sources`` to ``fmt`` in one run, with the profile the suite's soffice runs share."""
    subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={SOFFICE_PROFILE}",
                    "--convert-to", fmt, "--outdir", str(outdir), *map(str, sources)],
                   check=True, capture_output=True, timeout=300)


def code(source):
    """Module source as compared: without the ``Attribute`` lines, whitespace runs made one space, no blank lines."""
    lines = source.splitlines()
    return [" ".join(line.split()) for line in lines if line.strip() and not line.startswith("Attribute ")]


def same_modules(a, b):
    return {name: code(text) for name, text in a.items()} == {name: code(text) for name, text in b.items()}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """{(kind, name): LibreOffice's macro-enabled OOXML of the corpus file}, one soffice run per kind."""
    out = tmp_path_factory.mktemp("vba-lo")
    for kind, names in MACRO_FILES.items():
        soffice(FILTERS[kind], out, *(corpus(kind, name) for name in names))
    result = {}
    for kind, names in MACRO_FILES.items():
        for name in names:
            path = out / (Path(name).stem + MACRO_ENABLED[kind])
            assert path.is_file(), f"LibreOffice wrote no {path.name}"
            result[kind, name] = path
    return result


@pytest.fixture(scope="module")
def pptm(converted, tmp_path_factory):
    """{name: (LibreOffice's .pptm, that .pptm with ppt_project(.ppt) inserted, its PDF by LibreOffice)}."""
    out = tmp_path_factory.mktemp("vba-pptm")
    result = {}
    for name in MACRO_FILES["ppt"]:
        fixed = out / (Path(name).stem + ".pptm")
        shutil.copyfile(converted["ppt", name], fixed)
        vba.insert_project(fixed, vba.ppt_project(corpus("ppt", name)))
        result[name] = (converted["ppt", name], fixed, out / "pdf" / (Path(name).stem + ".pdf"))
    soffice("pdf", out / "pdf", *(fixed for _, fixed, _ in result.values()))
    return result


# has_project ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,name", [(kind, name) for kind, names in MACRO_FILES.items() for name in names])
def test_has_project_on_macro_files(kind, name):
    assert vba.has_project(corpus(kind, name), kind)


@pytest.mark.parametrize("kind,name", [(kind, name) for kind, names in MACRO_FREE.items() for name in names])
def test_has_project_false_on_macro_free_files(kind, name):
    assert not vba.has_project(corpus(kind, name), kind)


def test_has_project_false_for_the_wrong_kind():
    assert not vba.has_project(corpus("doc", "SimpleMacro.doc"), "xls")
    assert not vba.has_project(corpus("xls", "SimpleMacro.xls"), "ppt")
    assert not vba.has_project(corpus("ppt", "SimpleMacro.ppt"), "doc")


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_has_project_false_on_non_ole_input(kind, tmp_path, converted):
    inputs = {
        "rtf": b"{\\rtf1\\ansi Macros VBA _VBA_PROJECT_CUR}",
        "html": b"<html><body>Macros/VBA</body></html>",
        "empty": b"",
        "ole-header-only": olefile.MAGIC + b"\0" * 504,
    }
    for label, data in inputs.items():
        path = tmp_path / f"{label}.{kind}"
        path.write_bytes(data)
        assert not vba.has_project(path, kind), label
    assert not vba.has_project(tmp_path / "missing.doc", kind)


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
def test_has_project_on_a_macro_enabled_package_named_like_a_legacy_file(kind, tmp_path, converted):
    """SPEC accepts OOXML under a legacy name: a .docm so named carries its project as a vbaProject.bin part."""
    ooxml = tmp_path / f"ooxml.{kind}"
    shutil.copyfile(converted[kind, MACRO_FILES[kind][0]], ooxml)
    assert vba.has_project(ooxml, kind) == (kind != "ppt")  # LibreOffice's .pptm holds an empty project
    plain = tmp_path / f"plain.{kind}"
    with zipfile.ZipFile(ooxml) as source, zipfile.ZipFile(plain, "w") as copy:
        for info in source.infolist():
            if not info.filename.lower().endswith("vbaproject.bin"):
                copy.writestr(info, source.read(info))
    assert not vba.has_project(plain, kind)
    elsewhere = tmp_path / f"elsewhere.{kind}"  # a project that is not the main part's: not this document's
    with zipfile.ZipFile(ooxml) as source, zipfile.ZipFile(elsewhere, "w") as copy:
        for info in source.infolist():
            name = info.filename
            copy.writestr("other/vbaProject.bin" if name.lower().endswith("/vbaproject.bin") else name,
                          source.read(info))
    assert not vba.has_project(elsewhere, kind) and vbaproject.package_project(elsewhere, kind) is None
    if kind != "ppt":  # a signature is a part of its own: left behind, and named
        assert not vbaproject.of_source(ooxml, kind).signed
        signed = tmp_path / f"signed.{kind}"
        shutil.copyfile(ooxml, signed)
        with zipfile.ZipFile(signed, "a") as package:
            package.writestr(f"{FORMATS[kind].main_part.split('/')[0]}/vbaProjectSignature.bin", b"signature")
        assert vbaproject.of_source(signed, kind).signed and vbaproject.package_project(signed, kind)


# modules --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,name", [(kind, name) for kind in ("doc", "xls") for name in MACRO_FILES[kind]])
def test_libreoffice_keeps_doc_and_xls_modules(kind, name, converted):
    source = vba.modules(corpus(kind, name))
    saved = vba.modules(converted[kind, name])
    assert sorted(saved) == sorted(source)
    assert same_modules(saved, source)
    if name != "60279.doc":
        assert source, "olevba read no module"


def test_modules_reads_the_code():
    found = vba.modules(corpus("doc", "SimpleMacro.doc"))
    assert sorted(found) == ["Module1", "ThisDocument"]
    assert any(line.startswith("Sub ") for line in code(found["Module1"]))
    assert "Módulo1" in vba.modules(corpus("xls", "44891.xls"))  # names decoded with the project's code page


def test_modules_leaves_oletools_logging_off(caplog):
    with caplog.at_level(logging.DEBUG):
        assert vba.modules(corpus("xls", "WithCheckBoxes.xls"))
        assert vba.modules(vba.ppt_project(corpus("ppt", "59302.ppt")))  # olevba warns about files in memory
    assert not [record for record in caplog.records if not record.name.startswith("docshift")]


def test_modules_empty_without_a_project(tmp_path):
    assert vba.modules(corpus("doc", "47304.doc")) == {}
    assert vba.modules(corpus("ppt", "empty.ppt")) == {}
    bas = tmp_path / "Module1.bas"
    bas.write_text('Attribute VB_Name = "Module1"\nSub A()\nMsgBox "x"\nEnd Sub\n')
    assert vba.modules(bas) == {}  # VBA-looking text is no project
    garbage = tmp_path / "garbage.doc"
    garbage.write_bytes(olefile.MAGIC + b"\xff" * 4000)
    assert vba.modules(garbage) == {}
    assert vba.modules(tmp_path / "missing.xls") == {}
    assert vba.modules(b"not a file") == {}


# .ppt -> .pptm --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MACRO_FILES["ppt"])
def test_libreoffice_writes_no_ppt_modules(name, converted):
    assert vba.modules(corpus("ppt", name)), "olevba reads the .ppt's modules"
    assert vba.modules(converted["ppt", name]) == {}


@pytest.mark.parametrize("name", MACRO_FILES["ppt"])
def test_ppt_project_is_a_vba_project_bin(name):
    project = vba.ppt_project(corpus("ppt", name))
    assert project is not None
    with olefile.OleFileIO(project) as ole:
        assert ole.get_type("PROJECT") == olefile.STGTY_STREAM
        assert ole.get_type("PROJECTwm") == olefile.STGTY_STREAM
        assert ole.get_type("VBA/dir") == olefile.STGTY_STREAM
        assert ole.get_type("VBA/_VBA_PROJECT") == olefile.STGTY_STREAM
    assert vba.modules(project) == vba.modules(corpus("ppt", name))


def test_ppt_project_none_without_one(tmp_path):
    for name in MACRO_FREE["ppt"]:
        assert vba.ppt_project(corpus("ppt", name)) is None, name
    assert vba.ppt_project(corpus("doc", "SimpleMacro.doc")) is None
    path = tmp_path / "deck.ppt"
    path.write_bytes(b"<html>not a presentation</html>")
    assert vba.ppt_project(path) is None


@pytest.mark.parametrize("name", MACRO_FILES["ppt"])
def test_pptm_gets_the_ppt_modules(name, pptm):
    original, fixed, pdf = pptm[name]
    source = vba.modules(corpus("ppt", name))
    found = vba.modules(fixed)
    assert sorted(found) == sorted(source)
    assert same_modules(found, source)
    with zipfile.ZipFile(original) as before, zipfile.ZipFile(fixed) as after:
        assert before.namelist() == after.namelist()
        for part in before.namelist():
            if part != "ppt/vbaProject.bin":
                assert after.read(part) == before.read(part), f"{part} changed"
        assert after.read("ppt/vbaProject.bin") == vba.ppt_project(corpus("ppt", name))
    presentation = pptx.Presentation(str(fixed))
    assert len(presentation.slides) >= 1
    assert pdf.is_file() and pdf.read_bytes().startswith(b"%PDF"), "LibreOffice did not load the .pptm again"


def test_insert_project_adds_what_the_package_lacks(converted, tmp_path):
    """A package without the vbaProject content type, relationship and part gets them; its main part becomes
    macro-enabled."""
    source = converted["ppt", "SimpleMacro.ppt"]
    stripped = tmp_path / "stripped.pptm"
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(stripped, "w", zipfile.ZIP_DEFLATED) as out:
        for part in src.namelist():
            data = src.read(part)
            if part == "ppt/vbaProject.bin":
                continue
            if part == "[Content_Types].xml":
                data = data.replace(b'<Override PartName="/ppt/vbaProject.bin" '
                                    b'ContentType="application/vnd.ms-office.vbaProject"/>', b"")
                data = data.replace(b"application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",
                                    b"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml")
            if part == "ppt/_rels/presentation.xml.rels":
                data = data.replace(b'<Relationship Id="rId5" Type="http://schemas.microsoft.com/office/2006/'
                                    b'relationships/vbaProject" Target="vbaProject.bin"/>', b"")
            out.writestr(part, data)
    with zipfile.ZipFile(stripped) as check:
        assert b"vbaProject" not in check.read("[Content_Types].xml")
        assert b"vbaProject" not in check.read("ppt/_rels/presentation.xml.rels")
    vba.insert_project(stripped, vba.ppt_project(corpus("ppt", "SimpleMacro.ppt")))
    with zipfile.ZipFile(stripped) as package:
        types = package.read("[Content_Types].xml")
        rels = package.read("ppt/_rels/presentation.xml.rels")
    assert b'PartName="/ppt/vbaProject.bin" ContentType="application/vnd.ms-office.vbaProject"' in types
    assert b'PartName="/ppt/presentation.xml" ContentType="application/vnd.ms-powerpoint.presentation.macroEnabled' \
           b'.main+xml"' in types
    assert b'Type="http://schemas.microsoft.com/office/2006/relationships/vbaProject" Target="vbaProject.bin"' in rels
    assert b"ns0:" not in types + rels
    assert sorted(vba.modules(stripped)) == ["Module1"]
    assert len(pptx.Presentation(str(stripped)).slides) >= 1


def test_insert_project_refuses_what_is_no_project(converted, tmp_path):
    package = tmp_path / "deck.pptm"
    shutil.copyfile(converted["ppt", "SimpleMacro.ppt"], package)
    before = package.read_bytes()
    with zipfile.ZipFile(package) as lo:
        empty = lo.read("ppt/vbaProject.bin")  # LibreOffice's: a compound file with no VBA storage
    for bad in (b"", b"junk" * 1000, empty):
        with pytest.raises(ValueError):
            vba.insert_project(package, bad)
    assert package.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["deck.pptm"], "no temporary file left behind"


def test_insert_project_copies_the_parts_a_chunk_at_a_time(tmp_path):
    """Every part of LibreOffice's .pptm goes into the new package streamed: a 256 MiB part (which the package's
    directory declares, and ``convert.check_package`` bounds) is never held whole."""
    deck = tmp_path / "deck.pptm"
    size = 256 << 20
    with zipfile.ZipFile(deck, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("[Content_Types].xml", f'<Types xmlns="{vba.CT_NS}"/>')
        out.writestr("ppt/presentation.xml", "<p/>")
        out.writestr("ppt/_rels/presentation.xml.rels", f'<Relationships xmlns="{vba.REL_NS}"/>')
        with out.open("ppt/media/large.bin", "w", force_zip64=True) as large:
            for _ in range(size >> 20):
                large.write(bytes(1 << 20))
    with zipfile.ZipFile(deck) as before:
        crc = before.getinfo("ppt/media/large.bin").CRC
    tracemalloc.start()
    try:
        vba.insert_project(deck, vba.ppt_project(corpus("ppt", "SimpleMacro.ppt")))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak >> 20} MiB held"
    with zipfile.ZipFile(deck) as after:
        large = after.getinfo("ppt/media/large.bin")
        assert (large.file_size, large.CRC) == (size, crc)
        assert after.read("ppt/vbaProject.bin") == vba.ppt_project(corpus("ppt", "SimpleMacro.ppt"))
    assert sorted(vba.modules(deck)) == ["Module1"]


def test_a_compound_file_whose_end_looks_like_a_zip_s_is_read_as_a_compound_file():
    """Word 2007 and later write a theme package into a .doc: its end then looks like a zip's to zipfile. Taken for an
    OOXML package, such a .doc's own project went unread (its signature unreported)."""
    source = corpus("doc", "SimpleMacro.doc")
    assert zipfile.is_zipfile(source)
    found = vbaproject.of_source(source, "doc")
    assert found is not None and found.error is None and "PROJECT" in found.streams
    assert vbaproject.package_project(source, "doc") is None
