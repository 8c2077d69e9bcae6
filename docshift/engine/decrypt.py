"""Open a password-protected legacy file with its password: run by ``protection.py`` as a subprocess of the
worker, under the worker's own Python, with limits on its CPU, memory and file size and nothing of the
worker's environment. Never imported by docshift itself: every byte of the upload that is parsed here is
parsed in that subprocess.

It reads one JSON line on stdin, ``{"source": path, "target": path, "kind": "doc" | "xls" | "ppt", "password":
..., "max_spin_count": n}``, and answers one JSON line on stdout, ``{"outcome": ..., "scheme": ...}``:

- ``plain``: not protected, or only by Excel's default password (Excel and LibreOffice open it without asking),
  unless that default password is the one asked for: the workbook is then decrypted with it, as with any other;
- ``wrong``: msoffcrypto-tool checked the password against the file's verifier, and it is not the one;
- ``unsupported``: protected in a way nothing here opens (a package whose key would take more rounds than
  ``max_spin_count`` to derive, extensible encryption, an unknown version);
- ``unverified``: protected in a way msoffcrypto-tool does not know (Word's XOR obfuscation, a BIFF5
  workbook): LibreOffice alone may open it with the password;
- ``decrypted``: the password is right, and ``target`` holds the file decrypted (msoffcrypto-tool; a
  PowerPoint file by the code below, which decrypts every persist object and picture). Its ``detail`` says
  "first 15 characters" when those opened it: Office 97-2003 and LibreOffice keep no more of a password;
- ``verified``: the password is right, but msoffcrypto-tool broke decrypting the file (a workbook whose records
  it does not walk): LibreOffice, whose import decrypts as it reads, may open it with the password.

The password comes on stdin, never in the arguments or the environment (other processes read those in
``/proc``), and is never written anywhere.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import struct
import sys
from pathlib import Path
from typing import IO, Any

import msoffcrypto
import olefile
from cryptography.hazmat.primitives.ciphers import Cipher
from msoffcrypto import exceptions
from msoffcrypto.format import ppt97
from msoffcrypto.method.rc4_cryptoapi import _makekey

try:  # moved there in cryptography 43
    from cryptography.hazmat.decrepit.ciphers.algorithms import ARC4
except ImportError:  # pragma: no cover
    from cryptography.hazmat.primitives.ciphers.algorithms import ARC4


def _beside(name: str) -> Any:
    """The module ``name`` of this folder, loaded from its file: run with ``-I``, this process has neither this folder
    on its path (whose ``profile.py`` would hide the standard library's) nor reason to import the engine's package."""
    spec = importlib.util.spec_from_file_location(f"_decrypt_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # where its dataclasses look it up
    spec.loader.exec_module(module)
    return module


cfb = _beside("cfb")  # compound files written whole: the decrypted presentation with its summary's streams

DEFAULT_PASSWORD = "VelvetSweatshop"  # Excel's: a workbook or package with it opens without asking
ENCRYPTED_SUMMARY = "EncryptedSummary"
SUMMARY_ENTRY = struct.Struct("<IIHBBI")  # an EncryptedStreamDescriptor's fields before its name
MAX_SUMMARY_STREAMS = 16
PROPERTY_SET = "\x05"  # the first character of a property set stream's name ([MS-OLEPS] 2.24)
CRYPT_SESSION = 0x2F14  # CryptSession10Container: the presentation's encryption header, never encrypted itself
USER_EDIT = 0x0FF5
USER_EDIT_PLAIN_LENGTH = 0x1C  # a UserEditAtom without encryptSessionPersistIdRef
HEADER_TOKEN_PLAIN = 0xE391C05F  # CurrentUserAtom.headerToken of a presentation that is not encrypted
MAX_EDITS = 4096  # UserEditAtoms followed back through a presentation's incremental saves
LEGACY_PASSWORD_LIMIT = 15  # characters of a password that Word's, Excel's and PowerPoint's 97-2003 encryption keep
# the Pictures stream's records ([MS-ODRAW] 2.2.22): a BLIP store entry, whose fields come first (btWin32, btMacOS,
# rgbUid, tag, size, cRef, foDelay, unused1, cbName, unused2, unused3; cbName is its 33rd byte), and the pictures
BLIP_STORE_ENTRY, BLIP_STORE_FIELDS, BLIP_NAME_LENGTH_AT = 0xF007, (1, 1, 16, 2, 4, 4, 4, 1, 1, 1, 1), 33
METAFILE_BLIPS = {0xF01A, 0xF01B, 0xF01C}  # EMF, WMF, PICT: a 34-byte metafile header where a bitmap has a tag byte
METAFILE_HEADER = 34
# the instances whose picture carries a second UID ([MS-ODRAW] 2.2.24-2.2.31)
TWO_UIDS = {0x3D5, 0x217, 0x543, 0x46B, 0x6E3, 0x6E1, 0x7A9, 0x6E5}


def answer(outcome: str, scheme: str = "", detail: str = "") -> None:
    sys.stdout.write(json.dumps({"outcome": outcome, "scheme": scheme, "detail": detail}) + "\n")
    sys.stdout.flush()


def open_file(request: dict[str, Any]) -> tuple[str, str, str]:
    """The answer for ``request`` as (outcome, scheme, detail); writes ``target`` when decrypted."""
    source, password = request["source"], request["password"]
    with open(source, "rb") as f:
        try:
            office = msoffcrypto.OfficeFile(f)
        except Exception as error:  # not a format msoffcrypto-tool knows: LibreOffice may
            return ("unverified", "", repr(error)[:200]) if _looks_encrypted(source) else ("plain", "", "")
        try:
            encrypted = office.is_encrypted()
        except Exception as error:
            return ("unverified", office.format, repr(error)[:200]) if _looks_encrypted(source) else ("plain", "", "")
        if not encrypted:
            return ("unverified", office.format, "") if _looks_encrypted(source) else ("plain", office.format, "")
        if office.format == "ooxml":
            return _package(office, request)
        if office.format == "doc97":
            fib = office.info.fib.base
            if fib.fObfuscation:
                return "unverified", "doc97 xor", ""
        if office.format == "xls97" and password != DEFAULT_PASSWORD and _verifies(office, DEFAULT_PASSWORD):
            return "plain", "xls97 default password", ""
        truncated = ""
        try:
            try:
                office.load_key(password=password)
            except exceptions.InvalidKeyError:
                # Word and Excel 97-2003 keep 15 characters of a password (LibreOffice too): the rest never counted
                if len(password) <= LEGACY_PASSWORD_LIMIT:
                    raise
                office.load_key(password=password[:LEGACY_PASSWORD_LIMIT])
                truncated = f"first {LEGACY_PASSWORD_LIMIT} characters"
        except exceptions.InvalidKeyError:
            return "wrong", office.format, ""
        except (exceptions.DecryptionError, AssertionError, KeyError) as error:
            return "unsupported", office.format, repr(error)[:200]
        scheme = f"{office.format} {getattr(office, 'type', '')}".strip()
        try:
            with open(request["target"], "wb") as out:
                if office.format == "ppt97":
                    decrypt_presentation(office, f, out)
                else:
                    if office.format == "doc97":
                        _no_empty_data(office.ole)
                    office.decrypt(out)
        except Exception as error:  # the password is right; msoffcrypto-tool (or olefile, writing) broke on the rest
            os.unlink(request["target"])  # what was written of it is no file
            return "verified", scheme, f"{type(error).__name__}: {error}"[:200]
        return "decrypted", scheme, truncated


def _no_empty_data(ole: Any) -> None:
    """Hide an empty "Data" stream from msoffcrypto-tool's Word decryption: it writes each stream it decrypted back
    with olefile, which cannot write an empty one (a TypeError, on a file whose password it had just verified).
    An empty stream holds nothing to decrypt, and the copy keeps it as it was."""
    exists = ole.exists
    ole.exists = lambda name: exists(name) and not (name.lower() == "data" and ole.get_size(name) == 0)


def _verifies(office: Any, password: str) -> bool:
    try:
        office.load_key(password=password)
        return True
    except Exception:
        return False


def _package(office: Any, request: dict[str, Any]) -> tuple[str, str, str]:
    """An encrypted OOXML package (named .doc, .xls or .ppt: Office opens it by its content)."""
    if office.type == "agile" and office.info["spinValue"] > request["max_spin_count"]:
        return "unsupported", "ooxml agile", f"spin count {office.info['spinValue']}"
    if office.type not in ("agile", "standard"):
        return "unsupported", f"ooxml {office.type}", ""
    for password, outcome in ((DEFAULT_PASSWORD, "plain"), (request["password"], "decrypted")):
        try:
            office.load_key(password=password, verify_password=True)
        except exceptions.InvalidKeyError:
            continue
        except Exception as error:
            return "unsupported", f"ooxml {office.type}", repr(error)[:200]
        if outcome == "decrypted":
            with open(request["target"], "wb") as out:
                office.decrypt(out)
        return outcome, f"ooxml {office.type}", ""
    return "wrong", f"ooxml {office.type}", ""


def _looks_encrypted(source: str) -> bool:
    """Protected by what msoffcrypto-tool does not read: a Word header's fEncrypted bit, a BIFF FILEPASS record."""
    try:
        with olefile.OleFileIO(source) as ole:
            for name in ole.listdir():
                stream = "/".join(name).lower()
                if stream == "worddocument":
                    fib = ole.openstream(name).read(12)
                    if len(fib) == 12 and struct.unpack_from("<H", fib, 10)[0] & 0x0100:
                        return True
                if stream in ("workbook", "book"):
                    data = ole.openstream(name).read(1 << 20)
                    at = 0
                    while at + 4 <= len(data):
                        record, length = struct.unpack_from("<HH", data, at)
                        if record == 0x002F:
                            return True
                        if record == 0x000A:
                            break
                        at += 4 + length
    except Exception:
        return False
    return False


def _rc4(key: bytes) -> Any:
    return Cipher(ARC4(key), mode=None).decryptor()


def decrypt_presentation(office: Any, source: IO[bytes], out: IO[bytes]) -> None:
    """A PowerPoint file encrypted with RC4 CryptoAPI, decrypted as [MS-PPT] 2.3.7 says: each persist object with
    the key of its persist id (its record header first, which gives its length), each field of each picture of the
    Pictures stream with the key of block 0 (``_decrypt_picture``); the current user and user edit atoms then say it
    is not encrypted, and the summary's property sets (``summary_streams``) take the place of those in clear.
    (msoffcrypto-tool's own ``decrypt`` takes each object's length from the next object's offset, which holds
    only when the objects lie in the order of their ids, and leaves the pictures encrypted.)"""
    key, salt, size = office.key, office.salt, office.keySize
    office.data.currentuser.seek(0)
    current = bytearray(office.data.currentuser.read())
    office.data.currentuser.seek(0)
    user = ppt97._parseCurrentUser(office.data.currentuser).currentuseratom
    office.data.powerpointdocument.seek(0)
    document = bytearray(office.data.powerpointdocument.read())
    directory, edits, crypt_session = _persist_directory(document, user.offsetToCurrentEdit)
    for persist_id, offset in directory.items():
        if persist_id == crypt_session or not 0 <= offset <= len(document) - 8:
            continue
        cipher = _rc4(_makekey(key, salt, size, persist_id))
        header = cipher.update(bytes(document[offset:offset + 8]))
        if struct.unpack_from("<H", header, 2)[0] == CRYPT_SESSION:
            continue
        length = min(struct.unpack_from("<I", header, 4)[0], len(document) - offset - 8)
        document[offset:offset + 8 + length] = header + cipher.update(bytes(document[offset + 8:offset + 8 + length]))
    for offset in edits:  # no encryptSessionPersistIdRef any more
        if struct.unpack_from("<I", document, offset + 4)[0] > USER_EDIT_PLAIN_LENGTH:
            struct.pack_into("<I", document, offset + 4, USER_EDIT_PLAIN_LENGTH)
    struct.pack_into("<I", current, 12, HEADER_TOKEN_PLAIN)
    pictures = None
    if office.ole.exists("Pictures"):
        with office.ole.openstream("Pictures") as stream:
            pictures = bytearray(stream.read())
        at, block_0 = 0, _makekey(key, salt, size, 0)
        while at + 8 <= len(pictures):
            at = _decrypt_picture(pictures, at, len(pictures), lambda: _rc4(block_0))
    # the file again, its streams decrypted: the summary's property sets in place of what PowerPoint left in clear
    replaced = {"Current User": bytes(current), "PowerPoint Document": bytes(document)}
    if pictures is not None:
        replaced["Pictures"] = bytes(pictures)
    if office.ole.exists(ENCRYPTED_SUMMARY):
        with office.ole.openstream(ENCRYPTED_SUMMARY) as stream:
            summary = stream.read()
        replaced.update(summary_streams(summary, lambda block: _rc4(_makekey(key, salt, size, block))))
    source.seek(0, os.SEEK_END)
    # a damaged file's other streams that do not read whole are left out, as LibreOffice reads past them
    root = cfb.read_storage(office.ole, "", source.tell(), left_out=[])
    dropped = {name.lower() for name in (*replaced, ENCRYPTED_SUMMARY)}  # LibreOffice refuses a file that holds it
    root.children = [kid for kid in root.children if kid.name.lower() not in dropped]
    root.children += [cfb.Entry(name, data) for name, data in replaced.items()]
    out.write(cfb.write(root))


def summary_streams(data: bytes, cipher: Any) -> dict[str, bytes]:
    """The property sets (``\\x05SummaryInformation``, ``\\x05DocumentSummaryInformation``: title, author, dates,
    company) of a presentation's EncryptedSummary stream, decrypted ([MS-OFFCRYPTO] 2.3.5.4), as {stream name: bytes};
    ``cipher(block)`` gives the RC4 of a block's key. The stream starts with where its table of streams lies, and
    how long it is, encrypted with block 0; the table is a count and an entry per stream (its offset, size, block,
    name's length and flags, then its UTF-16 name and a terminator), encrypted with block 0 anew; each stream with
    its entry's block. Whatever does not read as that, or is no property set, is left out."""
    found: dict[str, bytes] = {}
    if len(data) < 8:
        return found
    offset, _size = struct.unpack("<II", cipher(0).update(data[:8]))
    if not 8 <= offset <= len(data) - 4:
        return found
    table = cipher(0).update(data[offset:])
    count, at = struct.unpack_from("<I", table)[0], 4
    for _ in range(min(count, MAX_SUMMARY_STREAMS)):
        if at + SUMMARY_ENTRY.size > len(table):
            break
        start, length, block, name_length, _flags, _reserved = SUMMARY_ENTRY.unpack_from(table, at)
        at += SUMMARY_ENTRY.size
        name = table[at:at + 2 * name_length].decode("utf-16-le", "replace")
        at += 2 * name_length + 2
        if name.startswith(PROPERTY_SET) and 1 < len(name) <= 31 and start + length <= len(data):
            found[name] = cipher(block).update(data[start:start + length])
    return found


def _decrypt_picture(data: bytearray, at: int, limit: int, fresh: Any) -> int:
    """Decrypt the record of the Pictures stream at ``at`` (within ``limit``) in place; returns where it ends. Each
    field is encrypted on its own with the key of block 0 ([MS-PPT] 4: "block number 0 is reused for every field of
    an OfficeArtBStoreContainerFileBlock record"), ``fresh()`` giving that key's cipher anew: the record header, a
    store entry's fields and name, a picture's UIDs, its tag or metafile header, and its data."""

    def field(start: int, length: int, bound: int) -> int:
        stop = min(start + max(length, 0), bound)
        data[start:stop] = fresh().update(bytes(data[start:stop]))
        return stop

    body = field(at, 8, limit)
    if body - at < 8:
        return body
    flags, record, length = struct.unpack_from("<HHI", data, at)
    end, at = min(body + length, limit), body
    if record == BLIP_STORE_ENTRY:
        for size in BLIP_STORE_FIELDS:
            at = field(at, size, end)
        if at - body < sum(BLIP_STORE_FIELDS):
            return end
        at = field(at, data[body + BLIP_NAME_LENGTH_AT], end)
        return _decrypt_picture(data, at, end, fresh) if at + 8 <= end else end
    if 0xF018 <= record <= 0xF117:
        for _ in range(2 if flags >> 4 in TWO_UIDS else 1):
            at = field(at, 16, end)
        at = field(at, METAFILE_HEADER if record in METAFILE_BLIPS else 1, end)
    field(at, end - at, end)
    return end


def _persist_directory(document: bytearray, offset: int) -> tuple[dict[int, int], list[int], int | None]:
    """{persist id: offset} of the presentation's current persist objects (every edit, the latest last), the
    offsets of its UserEditAtoms, and the persist id of its CryptSession10Container."""
    stack: list[Any] = []
    edits: list[int] = []
    crypt_session: int | None = None
    seen: set[int] = set()
    while offset and offset not in seen and len(seen) < MAX_EDITS:
        seen.add(offset)
        edit = ppt97._parseUserEditAtom(io.BytesIO(bytes(document[offset:offset + 8 + 0x20])))
        if edit.rh.recType != USER_EDIT:
            break
        edits.append(offset)
        if crypt_session is None:
            crypt_session = edit.encryptSessionPersistIdRef
        at = edit.offsetPersistDirectory
        length = struct.unpack_from("<I", document, at + 4)[0] if 0 <= at <= len(document) - 8 else 0
        stack.append(ppt97._parsePersistDirectoryAtom(io.BytesIO(bytes(document[at:at + 8 + length]))))
        offset = edit.offsetLastEdit
    directory: dict[int, int] = {}
    while stack:
        for entry in stack.pop().rgPersistDirEntry:
            for index, at in enumerate(entry.rgPersistOffset):
                directory[entry.persistId + index] = at
    return directory, edits, crypt_session


def main() -> int:
    request = json.loads(sys.stdin.readline())
    try:
        outcome, scheme, detail = open_file(request)
    except Exception as error:  # a damaged file: what was read does not decrypt
        outcome, scheme, detail = "unsupported", "", f"{type(error).__name__}: {error}"[:200]
    answer(outcome, scheme, detail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
