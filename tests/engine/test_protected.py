"""Protected files converted with their password (``Document-Password``), through the API and the worker's
conversion path with a real LibreOffice: the result is protected by the same password (``protection=keep``) or
not (``remove``); a wrong password fails ``wrong_password``, none ``encrypted_document``, a key beyond the
derivation bound ``encryption_unsupported``, all unbilled; the password is sealed in the task row while it waits,
erased when it ends, and an Idempotency-Key replays only with the same one."""

import hashlib
import io
import itertools
import os
import random
import struct
import zipfile

import docx
import msoffcrypto
import olefile
import openpyxl
import pptx
import pytest
import requests
import xlrd
from compound import with_streams
from conftest import ROOT, encrypted_ooxml, post_file, register
from cryptography.hazmat.decrepit.ciphers.algorithms import ARC4
from cryptography.hazmat.primitives.ciphers import Cipher
from msoffcrypto.method.rc4_cryptoapi import _makekey
from msoffcrypto.method.xor_obfuscation import DocumentXOR

from docshift import passwords
from docshift.engine import Engine, cfb, decrypt, protection
from docshift.storage import tasks
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_settings, get_store

CORPUS = ROOT.parent / "shared" / "corpus"
PASSWORD = "secret"  # the variants' (tests/make_variants.py)
# a protected file of each type, its password, and a word its text holds: Word and Excel files LibreOffice saves
# with a password (RC4), a PowerPoint file and an Excel one encrypted here as PowerPoint does and as Excel does with
# its 128-bit "strong" provider (RC4 CryptoAPI, which LibreOffice neither writes nor, for these two, reads), a Word
# and an Excel file obfuscated here with XOR (which msoffcrypto-tool cannot decrypt for Word: LibreOffice alone
# opens it), and two real ones of POI's, the second with a picture (each field of a picture record encrypted on its
# own: a picture decrypted as one stream was lost)
PROTECTED = {
    "doc": ("encrypted.doc", PASSWORD, "docshift"),
    "doc-xor": ("xor.doc", PASSWORD, "docshift"),
    "doc-empty-data": ("empty_data.doc", PASSWORD, "docshift"),
    "xls": ("encrypted.xls", PASSWORD, "row"),
    "xls-strong": ("strong.xls", PASSWORD, "42"),
    "xls-xor": ("xor.xls", PASSWORD, "42"),
    "xls-tail": ("tail.xls", PASSWORD, "row"),
    "ppt": ("encrypted.ppt", PASSWORD, None),
    "ppt-real": ("ppt/Password_Protected-hello.ppt", "hello", None),
    "ppt-picture": ("ppt/ppt_with_png_encrypted.ppt", "password", None),
}
MADE_HERE = {"encrypted.ppt": "ppt", "strong.xls": "xls", "xor.xls": "xls-xor", "xor.doc": "doc-xor",
             "tail.xls": "xls-tail", "empty_data.doc": "doc-empty-data"}
# the workbook records that RC4 CryptoAPI leaves in clear ([MS-XLS] 2.2.10): BOF, FilePass, UsrExcl, FileLock,
# InterfaceHdr, RRDInfo, RRDHead; and BoundSheet8, whose first 4 bytes (lbPlyPos) stay clear
CLEAR_RECORDS = {0x0809, 0x002F, 0x0194, 0x0195, 0x00E1, 0x0196, 0x0138}
BOUND_SHEET = 0x0085
# [MS-DOC] 2.5.2 FibBase: its flags at 0x0A (fEncrypted, fWhichTblStm, fObfuscation) and lKey at 0x0E; the 0x44
# bytes of a Word 97 FIB that LibreOffice reads in clear before it undoes the obfuscation
FIB_ENCRYPTED, FIB_WHICH_TABLE, FIB_OBFUSCATED = 0x0100, 0x0200, 0x8000
FIB_CLEAR = 0x44
READERS = {"docx": docx.Document, "xlsx": openpyxl.load_workbook, "pptx": pptx.Presentation}


@pytest.fixture(scope="module")
def encrypted_ppt(legacy, variants, tmp_path_factory):
    """LibreOffice's .ppt of the legacy deck and .xls of its workbook, encrypted with ``PASSWORD`` as [MS-PPT]
    2.3.7 and [MS-XLS] 2.2.10 say, with RC4 CryptoAPI and a 128-bit key; and the workbook and its .doc of the letter
    obfuscated with XOR, as Excel and Word 95 and a "weak" password of their 97 versions did; and the variants'
    encrypted workbook with bytes after its last record, which LibreOffice reads past and msoffcrypto-tool cannot
    (Perl's Spreadsheet::ParseExcel has such a file); and the variants' encrypted .doc with an empty "Data" stream,
    as WPS Office writes one (officecrypto-tool's test file has it), which msoffcrypto-tool decrypted and then could
    not write back."""
    made = tmp_path_factory.mktemp("made")
    return {"ppt": encrypt_presentation(legacy["ppt"], PASSWORD, made / "encrypted.ppt"),
            "xls": encrypt_workbook(legacy["xls"], PASSWORD, made / "strong.xls"),
            "xls-xor": encrypt_workbook(legacy["xls"], PASSWORD, made / "xor.xls", xor=True),
            "doc-xor": obfuscate_document(legacy["doc"], PASSWORD, made / "xor.doc"),
            "xls-tail": with_a_tail(variants / "encrypted.xls", made / "tail.xls"),
            "doc-empty-data": with_streams(variants / "encrypted.doc", made / "empty_data.doc", Data=b"")}


def with_a_tail(source, target):
    """``source``'s compound file again, its Workbook stream two bytes longer."""
    with olefile.OleFileIO(str(source)) as ole:
        tail = ole.openstream("Workbook").read() + b"\0\0"
    return with_streams(source, target, Workbook=tail)


def protected_file(variants, encrypted_ppt, kind):
    name, password, _word = PROTECTED[kind]
    path = CORPUS / name if "/" in name else encrypted_ppt[MADE_HERE[name]] if name in MADE_HERE else variants / name
    return path, password


def _record(kind, body, version=0):
    return struct.pack("<HHI", version, kind, len(body)) + body


def encrypt_presentation(source, password, target):
    """``source`` (a .ppt) encrypted with RC4 CryptoAPI (128-bit): a CryptSession10Container with the key's salt and
    verifier, each persist object encrypted with the key of its persist id, and a new persist directory and user
    edit atom that name the container; the Current User stream says the file is encrypted."""
    with olefile.OleFileIO(str(source)) as ole:
        streams = {"/".join(name): ole.openstream(name).read() for name in ole.listdir()}
    current, document = bytearray(streams["Current User"]), bytearray(streams["PowerPoint Document"])
    edit_at = struct.unpack_from("<I", current, 16)[0]
    directory, _edits, _session = decrypt._persist_directory(document, edit_at)
    salt, verifier = os.urandom(16), os.urandom(16)

    def rc4(block):
        return Cipher(ARC4(_makekey(password, salt, 128, block)), mode=None).encryptor()

    for persist_id, offset in directory.items():
        length = 8 + struct.unpack_from("<I", document, offset + 4)[0]
        document[offset:offset + length] = rc4(persist_id).update(bytes(document[offset:offset + length]))
    pictures, at = bytearray(streams.get("Pictures", b"")), 0
    while at + 8 <= len(pictures):  # each field of each picture record on its own, with the key of block 0
        for start, end in picture_fields(pictures, at):
            pictures[start:end] = rc4(0).update(bytes(pictures[start:end]))
        at += 8 + struct.unpack_from("<I", pictures, at + 4)[0]
    session = crypto_api_header(password, salt, verifier)
    edit = document[edit_at + 8:edit_at + 8 + 0x1C]
    session_id = struct.unpack_from("<I", edit, 20)[0] + 1
    directory[session_id] = len(document)
    document += _record(0x2F14, session, version=0xF)
    entries = b"".join(struct.pack("<II", persist_id | 1 << 20, offset)
                       for persist_id, offset in sorted(directory.items()))
    directory_at = len(document)
    document += _record(0x1772, entries)
    struct.pack_into("<III", edit, 8, 0, directory_at, struct.unpack_from("<I", edit, 16)[0])
    struct.pack_into("<I", edit, 20, session_id)
    new_edit_at = len(document)
    document += _record(0x0FF5, bytes(edit) + struct.pack("<I", session_id))
    struct.pack_into("<II", current, 12, 0xF3D1C4DF, new_edit_at)
    streams.update({"Current User": bytes(current), "PowerPoint Document": bytes(document)})
    if pictures:
        streams["Pictures"] = bytes(pictures)
    children = [cfb.Entry(name, data) for name, data in streams.items() if "/" not in name]
    root = cfb.Entry("Root Entry", children=children)
    target.write_bytes(cfb.write(root))
    return target


def picture_fields(pictures, at):
    """The fields of the picture record (an OfficeArtBlip, [MS-ODRAW] 2.2.23) at ``at`` of a Pictures stream in clear,
    as (start, end): its header, its UID (two for the instances that have a second), its metafile header or tag
    byte, its data."""
    instance, kind, length = struct.unpack_from("<HHI", pictures, at)
    uids = 2 if instance >> 4 in {0x3D5, 0x217, 0x543, 0x46B, 0x6E3, 0x6E1, 0x7A9, 0x6E5} else 1
    sizes = [8, *[16] * uids, 34 if kind in (0xF01A, 0xF01B, 0xF01C) else 1]
    bounds = [at + sum(sizes[:index]) for index in range(len(sizes) + 1)]
    return [*itertools.pairwise(bounds), (bounds[-1], at + 8 + length)]


def crypto_api_header(password, salt, verifier):
    """RC4 CryptoAPI's EncryptionInfo ([MS-OFFCRYPTO] 2.3.5.1): version 2.2, a 128-bit key from the enhanced
    provider, and the verifier and its hash encrypted with the key of block 0."""
    cipher = Cipher(ARC4(_makekey(password, salt, 128, 0)), mode=None).encryptor()
    sealed = cipher.update(verifier) + cipher.update(hashlib.sha1(verifier).digest())
    provider = "Microsoft Enhanced Cryptographic Provider v1.0\0".encode("utf-16-le")
    header = struct.pack("<8I", 0x04, 0, 0x6801, 0x8004, 128, 1, 0, 0) + provider
    return struct.pack("<HHII", 2, 2, 0x04, len(header)) + header + struct.pack("<I", 16) + salt + sealed[:16] \
        + struct.pack("<I", 20) + sealed[16:]


def encrypt_workbook(source, password, target, xor=False):
    """``source`` (an .xls) encrypted as Excel does with its 128-bit "strong" provider: a FilePass record after the
    first BOF, every sheet's offset moved by it, and each record's data encrypted with the RC4 stream of its
    place in the Workbook stream, keyed anew every 1,024 bytes (the records' headers take their share of it).
    With ``xor``, obfuscated instead ([MS-OFFCRYPTO] 2.3.7.2-4, method 1): each byte rotated left by 5 bits and
    XORed with the password's 16-byte array, from the index that the record's end in the stream gives."""
    with olefile.OleFileIO(str(source)) as ole:
        streams = {"/".join(name): ole.openstream(name).read() for name in ole.listdir()}
    workbook, records, at = streams["Workbook"], [], 0
    while at + 4 <= len(workbook):
        kind, size = struct.unpack_from("<HH", workbook, at)
        records.append((kind, bytearray(workbook[at + 4:at + 4 + size])))
        at += 4 + size
    salt = os.urandom(16)
    if xor:
        file_pass = struct.pack("<HHH", 0, DocumentXOR.create_xor_key_method1(password), _xor_verifier(password))
    else:
        file_pass = struct.pack("<H", 1) + crypto_api_header(password, salt, os.urandom(16))
    records.insert(1, (0x002F, bytearray(file_pass)))
    for kind, data in records:
        if kind == BOUND_SHEET:  # the sheet's BOF moved by the FilePass record
            struct.pack_into("<I", data, 0, struct.unpack_from("<I", data, 0)[0] + 4 + len(file_pass))
    plain = b"".join(struct.pack("<HH", kind, len(data)) + bytes(data) for kind, data in records)
    stream = bytearray(plain)
    if xor:
        array = DocumentXOR.create_xor_array_method1(password)
        at = 0
        for kind, data in records:
            first = at + 4 + (4 if kind == BOUND_SHEET else 0)
            for offset in range(first, at + 4 + len(data)):
                stream[offset] = DocumentXOR.rol(plain[offset], 5, 8) ^ array[(offset + len(data)) % 16]
            at += 4 + len(data)
    else:
        for block in range(0, len(plain), 1024):
            key = Cipher(ARC4(_makekey(password, salt, 128, block // 1024)), mode=None).encryptor()
            stream[block:block + 1024] = key.update(plain[block:block + 1024])
    out, at = bytearray(), 0
    for kind, data in records:
        clear = len(data) if kind in CLEAR_RECORDS else 4 if kind == BOUND_SHEET else 0
        out += plain[at:at + 4 + clear] + stream[at + 4 + clear:at + 4 + len(data)]
        at += 4 + len(data)
    streams["Workbook"] = bytes(out)
    children = [cfb.Entry(name, data) for name, data in streams.items() if "/" not in name]
    target.write_bytes(cfb.write(cfb.Entry("Root Entry", children=children)))
    return target


def obfuscate_document(source, password, target):
    """``source`` (a Word 97 .doc) obfuscated with XOR ([MS-OFFCRYPTO] 2.3.7), as LibreOffice's import undoes it:
    the FibBase says so and keeps the key (high word of lKey) and the verifier (low word); the WordDocument stream
    after the FIB's first 0x44 bytes, the table stream and the Data stream are XORed with the password's 16-byte
    array from the index of each byte's place in its stream, a zero byte or one equal to its key byte left as it is
    (the reader leaves those alone: XORed, they would read back as something else)."""
    with olefile.OleFileIO(str(source)) as ole:
        root = cfb.read_storage(ole, "", 1 << 24)
    streams = {entry.name: entry for entry in root.children if entry.data is not None}
    word = bytearray(streams["WordDocument"].data)
    flags = struct.unpack_from("<H", word, 0x0A)[0] | FIB_ENCRYPTED | FIB_OBFUSCATED
    struct.pack_into("<H", word, 0x0A, flags)
    struct.pack_into("<HH", word, 0x0E, _xor_verifier(password), DocumentXOR.create_xor_key_method1(password))
    array = DocumentXOR.create_xor_array_method1(password)

    def obfuscated(data, first):
        out = bytearray(data)
        for at in range(first, len(out)):
            if out[at] not in (0, array[at % 16]):
                out[at] ^= array[at % 16]
        return bytes(out)

    streams["WordDocument"].data = obfuscated(word, FIB_CLEAR)
    for name in ("1Table" if flags & FIB_WHICH_TABLE else "0Table", "Data"):
        if name in streams:
            streams[name].data = obfuscated(streams[name].data, 0)
    target.write_bytes(cfb.write(root))
    return target


def _xor_verifier(password):
    """[MS-OFFCRYPTO] 2.3.7.1: the 16-bit verifier of a password, as FilePass and a Word FIB's lKey keep it."""
    verifier = 0
    for byte in reversed([len(password), *password.encode("latin-1")]):
        verifier = (((verifier >> 14) & 1) | ((verifier << 1) & 0x7FFF)) ^ byte
    return verifier ^ 0xCE4B


@pytest.mark.parametrize("kind,scheme", [("ppt", "ppt97"), ("xls", "xls97"), ("xls-xor", "xls97")])
def test_the_files_made_here_are_encrypted_as_office_does(encrypted_ppt, kind, scheme):
    with open(encrypted_ppt[kind], "rb") as f:
        office = msoffcrypto.OfficeFile(f)
        assert office.format == scheme and office.is_encrypted()
        with pytest.raises(msoffcrypto.exceptions.InvalidKeyError):
            office.load_key(password="not the password")
        office.load_key(password=PASSWORD)
        if kind.startswith("xls"):
            assert (office.type, getattr(office, "keySize", None)) == (
                ("rc4_cryptoapi", 128) if kind == "xls" else ("xor", None))
            plain = io.BytesIO()
            office.decrypt(plain)
            book = xlrd.open_workbook(file_contents=plain.getvalue())  # every sheet where its BoundSheet8 says
            assert book.sheet_names() == ["Alpha", "Beta"] and book.sheet_by_name("Alpha").cell_value(0, 0) == 42


def test_a_real_presentations_pictures_are_decrypted_field_by_field(tmp_path):
    """POI's deck with a PNG, encrypted by PowerPoint: each picture record of the decrypted Pictures stream is a
    PNG picture again, header, UID, tag and data."""
    path = CORPUS / "ppt" / "ppt_with_png_encrypted.ppt"
    opened = protection.open_source(path, "ppt", "password", tmp_path, 1 << 30)
    assert opened is not None and opened.plain is not None
    with olefile.OleFileIO(str(opened.plain)) as ole:
        pictures = ole.openstream("Pictures").read()
    found, at = [], 0
    while at + 8 <= len(pictures):
        (start, _), _uid, (tag, data), (data, end) = picture_fields(pictures, at)
        found.append((struct.unpack_from("<H", pictures, start + 2)[0], pictures[tag], pictures[data:data + 8]))
        at = end
    # PNG blips (the deck holds two), each with its tag and the PNG's signature
    assert len(found) == 2 and set(found) == {(0xF01E, 0xFF, b"\x89PNG\r\n\x1a\n")}


# PowerPoint encrypts a deck's summary properties in a stream of their own, EncryptedSummary: title and author;
# unless told not to ("np": the same deck with its properties in clear, which the decrypted file keeps as they are)
REAL_DECKS = {"ppt/Password_Protected-hello.ppt": ("hello", "This is a protected document", "Hogwarts"),
              "ppt/Password_Protected-np-hello.ppt": ("hello", "This is a protected document", "Hogwarts"),
              "ppt/cryptoapi-proc2356.ppt": ("crypto", "RC4 CryptoAPI Encryption", "Dominic Salemno")}


@pytest.mark.parametrize("name", sorted(REAL_DECKS))
def test_a_real_presentations_encrypted_summary_is_decrypted_into_its_property_sets(tmp_path, name):
    """The decrypted deck holds the summary's two property sets, as a deck saved without a password holds them,
    and no EncryptedSummary stream (LibreOffice refuses a deck that has one)."""
    password, title, author = REAL_DECKS[name]
    opened = protection.open_source(CORPUS / name, "ppt", password, tmp_path, 1 << 30)
    assert opened is not None and opened.plain is not None
    with olefile.OleFileIO(str(opened.plain), raise_defects=olefile.DEFECT_INCORRECT) as ole:
        streams = {"/".join(path) for path in ole.listdir()}
        properties = ole.get_metadata()
    assert {"\x05SummaryInformation", "\x05DocumentSummaryInformation"} <= streams
    assert decrypt.ENCRYPTED_SUMMARY not in streams
    assert (properties.title.decode(), properties.author.decode()) == (title, author)


@pytest.mark.parametrize("name", sorted(REAL_DECKS))
def test_a_real_presentations_title_and_author_are_in_its_result(app, client, account, office, name):
    password, title, author = REAL_DECKS[name]
    view, _waiting, _row = convert(app, client, account, office, CORPUS / name, password=password,
                                   query="?protection=remove")
    assert view["status"] == "SUCCEEDED", view
    properties = pptx.Presentation(io.BytesIO(download(view))).core_properties
    assert (properties.title, properties.author) == (title, author)


def test_a_summary_that_does_not_read_as_one_gives_no_stream():
    """Offsets past the stream, a table cut short, names that are no property set: nothing is made of them."""
    def clear(_block):
        return Cipher(ARC4(bytes(16)), mode=None).decryptor()

    def sealed(data):
        return Cipher(ARC4(bytes(16)), mode=None).encryptor().update(data)

    def entry(name, start, length):
        return struct.pack("<IIHBBI", start, length, 0, len(name), 1, 0) + name.encode("utf-16-le") + bytes(2)

    body = b"property set"
    for table in (struct.pack("<I", 2) + entry("Other", 8, 4) + entry("\x05Summary", 8, 400),  # no set; too long
                  struct.pack("<I", 1_000_000) + entry("\x05Summary", 8, 4)[:10]):  # a count the table lacks
        data = sealed(struct.pack("<II", 8 + len(body), len(table))) + body + sealed(table)
        assert decrypt.summary_streams(data, clear) == {}
    assert decrypt.summary_streams(sealed(struct.pack("<II", 1 << 30, 0)), clear) == {}
    table = struct.pack("<I", 1) + entry("\x05Summary", 8, len(body))
    data = sealed(struct.pack("<II", 8 + len(body), len(table))) + sealed(body) + sealed(table)
    assert decrypt.summary_streams(data, clear) == {"\x05Summary": body}


def test_a_decryptor_that_breaks_after_the_password_is_taken_answers_verified(variants, tmp_path, monkeypatch):
    """msoffcrypto-tool (or olefile under it) raising something unforeseen once the verifier took the password is
    not a file nothing opens: the answer is ``verified``, so that LibreOffice's own import still gets the file, and
    what was written of the copy is gone."""
    from msoffcrypto.format.doc97 import Doc97File

    def broken(self, out):
        out.write(b"half a file")
        raise TypeError("object of type 'NoneType' has no len()")
    monkeypatch.setattr(Doc97File, "decrypt", broken)
    target = tmp_path / "plain.doc"
    request = {"source": str(variants / "encrypted.doc"), "target": str(target), "password": PASSWORD}
    outcome, scheme, detail = decrypt.open_file(request)
    assert (outcome, scheme) == ("verified", "doc97 rc4") and detail.startswith("TypeError")
    assert not target.exists()
    request["password"] = "not the password"
    assert decrypt.open_file(request)[0] == "wrong"


def submit(client, key, path, name=None, password=None, query="", headers=None):
    sent = dict(headers or {})
    if password is not None:
        # a header's bytes, as WSGI hands them over: latin-1 of the UTF-8
        sent[passwords.HEADER] = password.encode().decode("latin-1")
    return post_file(client, key, path.read_bytes(), name or path.name, headers=sent, query=query)


def convert(app, client, key, office, path, **options):
    response = submit(client, key, path, **options)
    assert response.status_code == 202, response.get_data(as_text=True)
    task_id = response.get_json()["task_id"]
    with app.app_context():
        waiting = tasks.get_task(get_db(), task_id)
        conversion.run_next(get_db(), get_store(), get_settings(), Engine(office), maintenance.worker_name())
        row = tasks.get_task(get_db(), task_id)
    view = client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {key}"}).get_json()
    return view, waiting, row


def download(view):
    return requests.get(view["download_url"], timeout=30).content


def decrypted(data, password):
    office = msoffcrypto.OfficeFile(io.BytesIO(data))
    assert office.is_encrypted()
    office.load_key(password=password, verify_password=True)
    out = io.BytesIO()
    office.decrypt(out)
    return out.getvalue()


def usage(client, key):
    return client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_a_protected_file_converts_with_its_password_and_its_result_opens_only_with_it(
        app, client, account, office, variants, encrypted_ppt, kind):
    path, password = protected_file(variants, encrypted_ppt, kind)
    view, waiting, row = convert(app, client, account, office, path, password=password)
    assert view["status"] == "SUCCEEDED", view
    assert view["billing_class"] == "INCLUDED"
    # the report is counted on the decrypted source and result, before protection
    assert view["fidelity"]["complete"], view["fidelity"]
    data = download(view)
    assert len(data) == view["result_size"]
    extension = view["result_filename"].rsplit(".", 1)[1]
    with pytest.raises(Exception):  # noqa: B017 - each reader raises its own kind for an OLE file
        READERS[extension](io.BytesIO(data))
    with pytest.raises(msoffcrypto.exceptions.InvalidKeyError):
        decrypted(data, "not the password")
    plain = READERS[extension](io.BytesIO(decrypted(data, password)))
    word = PROTECTED[kind][2]
    if word and extension == "docx":
        assert word in "\n".join(paragraph.text for paragraph in plain.paragraphs)
    if word and extension == "xlsx":
        assert word in str(plain.worksheets[0]["A1"].value)
    if extension == "pptx":
        assert len(plain.slides) == view["fidelity"]["counts"]["slides"]["source"] > 0
        pictures = [shape.image.blob for slide in plain.slides for shape in slide.shapes if hasattr(shape, "image")]
        assert len(pictures) == view["fidelity"]["counts"]["images"]["source"]
        assert all(blob.startswith((b"\x89PNG", b"\xff\xd8")) for blob in pictures)
    # sealed while it waited, never in clear; forgotten once it ended
    assert waiting.sealed_password and password not in waiting.sealed_password
    assert row.sealed_password is None


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_protection_remove_gives_an_unprotected_result(app, client, account, office, variants, encrypted_ppt, kind):
    path, password = protected_file(variants, encrypted_ppt, kind)
    view, _waiting, _row = convert(app, client, account, office, path, password=password, query="?protection=remove")
    assert view["status"] == "SUCCEEDED", view
    extension = view["result_filename"].rsplit(".", 1)[1]
    READERS[extension](io.BytesIO(download(view)))
    assert zipfile.is_zipfile(io.BytesIO(download(view)))


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_a_wrong_password_fails_unbilled(app, client, office, variants, encrypted_ppt, kind):
    key = register(client, app, f"wrong-{random.randrange(10**9)}")
    path, _password = protected_file(variants, encrypted_ppt, kind)
    view, _waiting, row = convert(app, client, key, office, path, password="not the password")
    assert (view["status"], view["error"]["code"]) == ("FAILED", "wrong_password")
    assert "billing_class" not in view and usage(client, key)["included_used"] == 0
    assert row.sealed_password is None


@pytest.fixture
def decryptor_runs(monkeypatch):
    """[each request the worker sends the decryptor], recorded on its way to the real one."""
    runs = []
    real = protection._decrypt

    def recorded(request, file_limit):
        runs.append(request)
        return real(request, file_limit)
    monkeypatch.setattr(protection, "_decrypt", recorded)
    return runs


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_no_password_is_encrypted_document(app, client, account, office, variants, encrypted_ppt, kind,
                                           decryptor_runs):
    """Without a password no decryptor starts: a workbook is tried with Excel's default password in the worker
    itself (its verifier is a hash or two), and its own password is not that one."""
    path, _password = protected_file(variants, encrypted_ppt, kind)
    view, _waiting, _row = convert(app, client, account, office, path)
    assert (view["status"], view["error"]["code"]) == ("FAILED", "encrypted_document")
    assert decryptor_runs == []


def test_a_password_for_a_file_that_is_not_protected_is_ignored(app, client, account, office, legacy):
    view, _waiting, _row = convert(app, client, account, office, legacy["doc"], password=PASSWORD)
    assert view["status"] == "SUCCEEDED", view
    docx.Document(io.BytesIO(download(view)))  # unprotected: there was nothing to keep


@pytest.mark.parametrize("password", [None, "x"])
def test_the_default_password_stays_a_file_that_is_not_protected(app, client, account, office, variants, password,
                                                                  decryptor_runs):
    """Excel opens a "VelvetSweatshop" workbook without asking: a password sent with it is not its own, and the
    result is not protected. Its report counts what the workbook holds, read decrypted (read as it is, every
    count of the source was unknown, and nothing could be found missing)."""
    view, _waiting, _row = convert(app, client, account, office, variants / "velvet_sweatshop.xls", password=password)
    assert view["status"] == "SUCCEEDED", view
    assert len(decryptor_runs) == 1  # the decrypted copy the checks read
    result = openpyxl.load_workbook(io.BytesIO(download(view)))
    counts = view["fidelity"]["counts"]
    assert counts["sheets"] == {"source": len(result.sheetnames), "result": len(result.sheetnames)}
    filled = sum(cell.value is not None for sheet in result.worksheets for row in sheet.iter_rows() for cell in row)
    assert counts["cells"]["source"] == counts["cells"]["result"] >= filled > 0
    assert view["fidelity"]["complete"], view["fidelity"]


def test_an_encrypted_package_under_a_legacy_name_opens_with_its_password(app, client, account, office, tmp_path):
    path = encrypted_ooxml(tmp_path / "package.xls", password="pässwörd")
    view, _waiting, _row = convert(app, client, account, office, path, password="pässwörd")
    assert view["status"] == "SUCCEEDED", view
    openpyxl.load_workbook(io.BytesIO(decrypted(download(view), "pässwörd")))


def test_a_key_beyond_the_derivation_bound_is_never_derived(app, client, account, office, tmp_path, monkeypatch):
    """A package whose key takes more rounds than Office's 100,000: encryption_unsupported, whatever the password."""
    path = encrypted_ooxml(tmp_path / "slow.xls", password=PASSWORD, spin_count=1_000_000)
    view, _waiting, _row = convert(app, client, account, office, path, password=PASSWORD)
    assert (view["status"], view["error"]["code"]) == ("FAILED", "encryption_unsupported")
    assert "billing_class" not in view


# the API: the header, the parameter, replays ----------------------------------------------------------

@pytest.mark.parametrize("query,header", [("?protection=maybe", None), ("?protection=", None),
                                          ("", ""), ("", "x" * 256)])
def test_a_malformed_protection_or_password_is_refused(client, account, legacy, query, header):
    response = submit(client, account, legacy["doc"], query=query, password=header)
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["code"] == "invalid_request"
    assert ("protection" in body["detail"]) == ("protection" in query)
    if header:
        assert header not in response.get_data(as_text=True)


def test_a_password_of_255_characters_of_utf8_is_taken(client, account, legacy):
    assert submit(client, account, legacy["doc"], password="ü" * 255).status_code == 202


def test_an_idempotency_key_replays_only_with_the_same_password(app, client, account, legacy):
    key = {"Idempotency-Key": f"protected-{random.randrange(10**9)}"}
    # a space and "!" are in no base64 or hex text, so no sealed password or digest can hold it by chance
    secret = "one secret!"
    first = submit(client, account, legacy["doc"], password=secret, headers=key)
    assert first.status_code == 202
    again = submit(client, account, legacy["doc"], password=secret, headers=key)
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json()["task_id"] == first.get_json()["task_id"]
    for other in ({"password": "two secret!"}, {}, {"password": secret, "query": "?protection=remove"}):
        conflict = submit(client, account, legacy["doc"], headers=key, **other)
        assert conflict.status_code == 422 and conflict.get_json()["code"] == "idempotency_conflict"
        assert secret not in conflict.get_json()["detail"]
    with app.app_context():
        row = tasks.get_task(get_db(), first.get_json()["task_id"])
    # a keyed hash, never the password; the sealed password opens only with the secret key
    assert row.password_digest and row.password_digest != secret
    assert secret not in row.sealed_password
    with app.app_context():
        assert passwords.unseal(get_settings(), row.sealed_password) == secret
        assert row.password_digest == passwords.digest(get_settings(), secret)


def test_without_an_idempotency_key_no_hash_of_the_password_is_kept(app, client, account, legacy):
    response = submit(client, account, legacy["doc"], password="one")
    with app.app_context():
        row = tasks.get_task(get_db(), response.get_json()["task_id"])
    assert row.password_digest is None and row.sealed_password


def test_the_openapi_document_names_the_header_and_the_parameter(client):
    document = client.get("/v1/openapi.json").get_json()
    parameters = {(p["in"], p["name"]) for p in document["paths"]["/v1/conversions"]["post"]["parameters"]}
    assert {("header", "Document-Password"), ("query", "protection")} <= parameters
