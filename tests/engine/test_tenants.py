"""SPEC, "Scheduling and isolation": each file is converted in a LibreOffice process that has converted no other
file, so a process never converts two accounts' files, nor two files of one account, and nothing an earlier file
did inside LibreOffice reaches a later one.

The engine knows no accounts: every file, whoever's, gets a child of the parent (``Forkit.export``, what
``Engine.convert`` calls for each file) that converts it and ends. Real LibreOffice in the real sandbox."""

import os
import shutil
import signal
import threading
import time
import uuid
import zipfile
from pathlib import Path

import pytest
from conftest import at_work, dies, office_pids, sandbox_pid, sound_deck

from docshift.engine import convert, sandbox
from docshift.errors import OfficeCrashed, OfficeTimeout
from docshift.formats import FORMATS

ACCOUNTS = ("acct_a", "acct_b")


def export(office, source, target, timeout=60):
    kind = Path(source).suffix.lstrip(".")
    return office.export(source, target, FORMATS[kind].export_filter, timeout)


def below(office):
    """The office's parent and its live children (host pids)."""
    return office_pids(office.process.pid)


def settled(office, parent, within=3.0):
    """True once ``parent`` is at the head of the office's processes and no child is at work: the last file's
    child has ended (those left wait for a file they have not had)."""
    deadline = time.monotonic() + within
    while below(office)[:1] != [parent] or at_work(below(office)[1:]):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def accounts_files(legacy, tmp_path):
    """Each account's copy of the three legacy files, named for it, in the order two accounts' tasks take turns."""
    files = []
    for kind in ("doc", "xls", "ppt"):
        for account in ACCOUNTS:
            path = tmp_path / "sources" / f"{account}-{kind}.{kind}"
            path.parent.mkdir(exist_ok=True)
            shutil.copyfile(legacy[kind], path)
            files.append(path)
    return files


def test_no_process_converts_two_files_of_one_account_or_of_two(fresh_office, legacy, tmp_path):
    parent = below(fresh_office)[0]
    converted = {}  # the child's pid in the sandbox -> the file it converted
    for source in accounts_files(legacy, tmp_path):
        facts = export(fresh_office, source, tmp_path / f"{source.stem}.{FORMATS[source.suffix[1:]].target}")
        assert facts["outcome"] == "converted", facts
        assert facts["pid"] not in converted, f"{source.name} went to the process of {converted.get(facts['pid'])}"
        converted[facts["pid"]] = source.name
        assert settled(fresh_office, parent), f"the child of {source.name} outlived its file: {below(fresh_office)}"
        assert facts["pid"] not in {sandbox_pid(pid) for pid in below(fresh_office)}, "its child lives on"
    assert len(converted) == 6 and fresh_office.restarts == 0


def sandbox_names(parent):
    """The names of every file and dir under the sandbox's ``/profile``, where each child's temp dir is."""
    names = set()
    for _, dirs, files in os.walk(f"/proc/{parent}/root{sandbox.PROFILE}"):
        names.update(dirs + files)
    return names


def test_the_next_file_finds_nothing_of_the_one_before_in_the_sandbox(fresh_office, legacy, slow_xls, tmp_path):
    """A child copies its source into a temp dir of its own, named as the customer named it. While the next
    account's file converts, as the same uid in the same sandbox, nothing of the file before is left there."""
    parent = below(fresh_office)[0]
    secret = tmp_path / "acct_a-secret-report.doc"
    shutil.copyfile(legacy["doc"], secret)
    assert export(fresh_office, secret, tmp_path / "a.docx")["outcome"] == "converted"
    seen, done = set(), threading.Event()

    def look():  # as the next file converts: what the sandbox holds
        while not done.is_set():
            try:
                seen.update(sandbox_names(parent))
            except OSError:
                pass
            time.sleep(0.005)

    watcher = threading.Thread(target=look, daemon=True)
    watcher.start()
    try:
        next_file = tmp_path / "acct_b-figures.xls"
        shutil.copyfile(slow_xls, next_file)
        assert export(fresh_office, next_file, tmp_path / "b.xlsx")["outcome"] == "converted"
    finally:
        done.set()
        watcher.join(10)
    assert next_file.name in seen, "the watcher did not see the next file's own copy: it looked in the wrong place"
    assert not [name for name in seen if "acct_a" in name], sorted(seen)


def sandbox_files(parent):
    """{path: bytes} of every file under the sandbox's ``/profile``."""
    found = {}
    for directory, _, files in os.walk(f"/proc/{parent}/root{sandbox.PROFILE}"):
        for name in files:
            try:
                found[os.path.join(directory, name)] = Path(directory, name).read_bytes()
            except OSError:  # a child's temp file, gone meanwhile
                pass
    return found


def test_an_accounts_sound_never_plays_in_another_accounts_result(fresh_office, tmp_path):
    """LibreOffice's import writes a presentation's sounds into its user gallery, and takes a later file's sound of
    the same name from there instead of that file's own. In the profile every child shares, account A's sound was
    in account B's result. The gallery now lies where nothing can be written: nothing of A's sound stays in the
    sandbox, and each result plays its own file's sound (put back from the legacy file, ``slide_sounds.py``)."""
    (a, a_sound), (b, b_sound) = (sound_deck(tmp_path / account, "chime.wav", frequency)
                                  for account, frequency in (("acct_a", 440), ("acct_b", 880)))
    parent = below(fresh_office)[0]
    first = convert.convert(fresh_office, a, "ppt", tmp_path / "a", 60)
    assert [path for path, data in sandbox_files(parent).items() if a_sound[44:] in data] == []
    second = convert.convert(fresh_office, b, "ppt", tmp_path / "b", 60)
    for converted, own in ((first, a_sound), (second, b_sound)):
        with zipfile.ZipFile(converted.path) as package:
            assert [package.read(name) for name in package.namelist() if name.endswith(".wav")] == [own]


W = ('xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
     'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
RELS = '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{}</Relationships>'
REL = ('<Relationship Id="{}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/{}" '
       'Target="{}"/>')


def font_document(path, font, text, font_file=None):
    """A Word document (OOXML, named ``.doc``: LibreOffice reads what it finds) in ``font``, asking that the fonts it
    uses be embedded; with ``font_file``, that font embedded in it (obfuscated as ECMA-376 says)."""
    embedded = ""
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("[Content_Types].xml", (
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Default Extension="odttf" ContentType="application/vnd.openxmlformats-officedocument.obfuscatedFont"/>'
            '<Override PartName="/word/document.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            '<Override PartName="/word/settings.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.settings+xml"/>'
            '<Override PartName="/word/fontTable.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.fontTable+xml"/></Types>'))
        package.writestr("_rels/.rels", RELS.format(REL.format("rId1", "officeDocument", "word/document.xml")))
        package.writestr("word/_rels/document.xml.rels", RELS.format(
            REL.format("rId1", "settings", "settings.xml") + REL.format("rId2", "fontTable", "fontTable.xml")))
        package.writestr("word/settings.xml", f"<w:settings {W}><w:embedTrueTypeFonts/></w:settings>")
        package.writestr("word/document.xml", (
            f'<w:document {W}><w:body><w:p><w:r><w:rPr><w:rFonts w:ascii="{font}" w:hAnsi="{font}" w:cs="{font}"/>'
            f"</w:rPr><w:t>{text}</w:t></w:r></w:p></w:body></w:document>"))
        if font_file is not None:
            key = uuid.uuid4()
            data = bytearray(font_file)
            for n in range(32):
                data[n] ^= key.bytes[::-1][n % 16]
            package.writestr("word/fonts/font1.odttf", bytes(data))
            package.writestr("word/_rels/fontTable.xml.rels",
                             RELS.format(REL.format("rIdF1", "font", "fonts/font1.odttf")))
            embedded = f'<w:embedRegular r:id="rIdF1" w:fontKey="{{{str(key).upper()}}}"/>'
        package.writestr("word/fontTable.xml", f'<w:fonts {W}><w:font w:name="{font}">{embedded}</w:font></w:fonts>')


def test_an_accounts_embedded_font_never_reaches_another_accounts_result(fresh_office, tmp_path):
    """LibreOffice keeps the fonts a document embeds, and copies of those a result embeds, under the profile's
    ``user/temp/embeddedfonts``. In the profile every child shares, account A's font went into the result of account
    B's document that named it, and a font B planted there went into A's. Each child now keeps them in its own
    scratch dir, which goes with it."""
    marker = b"ACCT_A_OWN_FONT_" + uuid.uuid4().hex.encode()
    own_font = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").read_bytes() + marker
    a, b = tmp_path / "acct_a-letter.doc", tmp_path / "acct_b-memo.doc"
    font_document(a, "AcctAFont", "Dear customer", own_font)
    font_document(b, "AcctAFont", "A memo")
    first = convert.convert(fresh_office, a, "doc", tmp_path / "a", 60)
    second = convert.convert(fresh_office, b, "doc", tmp_path / "b", 60)
    with zipfile.ZipFile(first.path) as package:  # A's own result embeds A's font: the path that leaked works
        assert any(marker in package.read(name) for name in package.namelist() if name.startswith("word/fonts/"))
    with zipfile.ZipFile(second.path) as package:
        assert [name for name in package.namelist() if marker in package.read(name)] == []
    assert [path for path, data in sandbox_files(below(fresh_office)[0]).items() if marker in data] == []


def parts(path):
    """The result's parts, but for the dates of its making (docProps/core.xml)."""
    with zipfile.ZipFile(path) as package:
        return {name: package.read(name) for name in package.namelist() if name != "docProps/core.xml"}


def test_a_file_after_a_killed_and_a_timed_out_one_converts_as_on_a_fresh_parent(fresh_office, legacy, slow_xls,
                                                                                   tmp_path):
    """What a file did to LibreOffice, here down to its process being killed mid-load or at its deadline, is not
    in the next file's conversion: the same file converts to the same parts, with the same facts, as it did first
    thing on the fresh parent."""
    first = export(fresh_office, legacy["xls"], tmp_path / "first.xlsx")
    parent = below(fresh_office)[0]
    assert settled(fresh_office, parent)  # the first file's child has ended: the one at work next is the slow file's
    crashed = {}

    def convert_slow():
        try:
            export(fresh_office, slow_xls, tmp_path / "killed.xlsx")
        except OfficeCrashed as error:
            crashed["error"] = error

    killed = threading.Thread(target=convert_slow, daemon=True)
    killed.start()
    deadline = time.monotonic() + 30
    while not at_work(below(fresh_office)[1:]):
        assert time.monotonic() < deadline and killed.is_alive(), "no child was seen converting"
        time.sleep(0.005)
    (child,) = at_work(below(fresh_office)[1:])
    time.sleep(0.3)
    os.kill(child, signal.SIGKILL)
    killed.join(60)
    assert "error" in crashed and dies(child)
    with pytest.raises(OfficeTimeout):
        export(fresh_office, slow_xls, tmp_path / "late.xlsx", timeout=0.5)
    again = export(fresh_office, legacy["xls"], tmp_path / "again.xlsx")
    assert below(fresh_office)[0] == parent and fresh_office.restarts == 0
    assert again["pid"] != first["pid"]
    drop = ("pid", "seconds")
    assert {k: v for k, v in again.items() if k not in drop} == {k: v for k, v in first.items() if k not in drop}
    assert parts(tmp_path / "again.xlsx") == parts(tmp_path / "first.xlsx")
