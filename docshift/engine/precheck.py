"""Is this upload password-protected?

LibreOffice decides what a file is (``uno/bridge.py``). Before it runs, ``check``
refuses only what is certainly encrypted, so such files never reach it; after
it loaded nothing, ``encrypted`` tells a password-protected file from a damaged
one. Files that Office opens without asking, because their password is the
well-known default "VelvetSweatshop", are not encrypted in this sense: they
convert.
"""

import struct
from pathlib import Path

import olefile
from msoffcrypto import OfficeFile

from docshift.contract import TaskErrorCode
from docshift.engine.cfb import CompoundFile
from docshift.errors import ConversionFailed

DEFAULT_PASSWORD = "VelvetSweatshop"
ENCRYPTED = "The file is password-protected: send its password in the Document-Password header."
WORD_FENCRYPTED = 0x0100  # FIB base, flags at offset 0x0A
BIFF_FILEPASS, BIFF_EOF = 0x002F, 0x000A
BIFF_SCAN_LIMIT = 1 << 20  # FILEPASS sits right after the workbook's BOF; never read a whole stream
# Office derives an agile key in 100,000 rounds; the format allows 10,000,000, seconds of the worker's CPU
MAX_SPIN_COUNT = 100_000


def check(path: str | Path) -> None:
    """Raise ``encrypted_document`` if ``path`` is certainly password-protected: an encrypted OOXML
    package (unless its password is the default one and its key costs no more rounds than Office's)
    or a Word file whose header says so.
    Anything else, damaged or foreign files included, goes on to LibreOffice."""
    streams = _streams(path)
    if streams is None:
        return
    if _encrypted_package(streams) and not _opens_with_default_password(path):
        raise ConversionFailed(TaskErrorCode.ENCRYPTED_DOCUMENT, ENCRYPTED)
    if _word_encrypted(path, streams):
        raise ConversionFailed(TaskErrorCode.ENCRYPTED_DOCUMENT, ENCRYPTED)


def encrypted(path: str | Path) -> bool:
    """After LibreOffice loaded nothing: does the file say it is password-protected (in any variant:
    RC4, CryptoAPI, XOR obfuscation, encrypted OOXML packages)?"""
    streams = _streams(path)
    if streams is None:
        return False
    if _encrypted_package(streams) or "encryptedsummary" in streams or _word_encrypted(path, streams) \
            or _workbook_filepass(path, streams):
        return True
    try:
        with open(path, "rb") as f:
            return OfficeFile(f).is_encrypted()
    except Exception:  # msoffcrypto does not know every variant, nor damaged files
        return False


def workbook_default_password(path: str | Path) -> bool:
    """An .xls whose workbook globals hold a FILEPASS record that Excel's default password opens (msoffcrypto-tool
    checks it against the record's verifier: a hash or two for RC4 and CryptoAPI, none for XOR)."""
    streams = _streams(path)
    if streams is None or not _workbook_filepass(path, streams):
        return False
    try:
        with open(path, "rb") as f:
            workbook = OfficeFile(f)
            if workbook.format != "xls97":
                return False
            workbook.load_key(password=DEFAULT_PASSWORD)
        return True
    except Exception:  # another password, or an encryption msoffcrypto-tool does not read
        return False


def _streams(path: str | Path) -> dict[str, list[str]] | None:
    """{lower-case stream path: its real path} of an OLE2 file, or None when it is none (or unreadable).
    Office and LibreOffice compare stream names case-insensitively; so does this."""
    try:
        if not olefile.isOleFile(str(path)):
            return None
        with CompoundFile(path) as ole:
            return {"/".join(entry).lower(): entry for entry in ole.listdir()}
    except Exception:  # olefile raises many kinds on damaged files
        return None


def _read(path: str | Path, entry: list[str], size: int) -> bytes:
    try:
        with CompoundFile(path) as ole, ole.openstream(entry) as stream:
            return stream.read(size)
    except Exception:
        return b""


def _encrypted_package(streams: dict[str, list[str]]) -> bool:
    return "encryptioninfo" in streams and "encryptedpackage" in streams


def _opens_with_default_password(path: str | Path) -> bool:
    try:
        with open(path, "rb") as f:
            package = OfficeFile(f)
            if package.type == "agile" and package.info["spinValue"] > MAX_SPIN_COUNT:
                return False  # never derive what the upload says costs more than Office spends
            package.load_key(password=DEFAULT_PASSWORD, verify_password=True)
        return True
    except Exception:
        return False


def _word_encrypted(path: str | Path, streams: dict[str, list[str]]) -> bool:
    if "worddocument" not in streams:
        return False
    fib = _read(path, streams["worddocument"], 12)
    return len(fib) == 12 and bool(struct.unpack_from("<H", fib, 10)[0] & WORD_FENCRYPTED)


def _workbook_filepass(path: str | Path, streams: dict[str, list[str]]) -> bool:
    """A FILEPASS record among the workbook globals (BIFF5 and BIFF8), whatever the password."""
    for name in ("workbook", "book"):
        if name in streams:
            data = _read(path, streams[name], BIFF_SCAN_LIMIT)
            at = 0
            while at + 4 <= len(data):
                record, length = struct.unpack_from("<HH", data, at)
                if record == BIFF_FILEPASS:
                    return True
                if record == BIFF_EOF:
                    break
                at += 4 + length
    return False
