"""Hand-made seed inputs for tests/service/test_hostile_input.py, written by this code.

Nothing here comes from a real Office file: every seed is built byte by byte
below, so what it contains is exactly what the code says. Run

    .venv/bin/python tests/seeds/generate.py

to (re)write the ``*.hex`` files next to this script; the tests read the
committed files and check they are still what this script makes.

OLE seeds are minimal Compound File Binary (MS-CFB) version 3 files: a
512-byte header, one FAT sector, one directory sector, one MiniFAT sector and
the mini stream (every stream is under the 4096-byte cutoff), 2,560 bytes in all.
"""

import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SECTOR = 512
MINI = 64
FREESECT, ENDOFCHAIN, FATSECT, NOSTREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")


def _entry(name, kind, child=NOSTREAM, right=NOSTREAM, start=0, size=0):
    """One 128-byte directory entry (kind 5 root, 2 stream; color black)."""
    if not name:
        return b"\0" * 64 + struct.pack("<HBBIII", 0, 0, 0, NOSTREAM, NOSTREAM, NOSTREAM) + b"\0" * 48
    encoded = name.encode("utf-16-le") + b"\0\0"
    return (encoded.ljust(64, b"\0") + struct.pack("<HBBIII", len(encoded), kind, 1, NOSTREAM, right, child)
            + b"\0" * 16 + b"\0" * 4 + b"\0" * 16 + struct.pack("<IQ", start, size))


def ole(streams):
    """A valid CFB v3 file holding ``streams`` ({name: bytes}, at most 3, each under 4096 bytes)."""
    assert len(streams) <= 3
    mini_fat, mini_data, entries = [], b"", []
    names = list(streams)
    for index, name in enumerate(names):
        data = streams[name]
        first = len(mini_fat)
        count = max(1, -(-len(data) // MINI))
        mini_fat += [first + n + 1 for n in range(count - 1)] + [ENDOFCHAIN]
        mini_data += data.ljust(count * MINI, b"\0")
        right = index + 2 if index + 1 < len(names) else NOSTREAM  # siblings as a right-leaning chain
        entries.append(_entry(name, 2, right=right, start=first, size=len(data)))
    mini_sectors = max(1, -(-len(mini_data) // SECTOR))
    mini_data = mini_data.ljust(mini_sectors * SECTOR, b"\0")
    # sectors: 0 FAT, 1 directory, 2 MiniFAT, 3.. the mini stream (the root entry's data)
    fat = [FATSECT, ENDOFCHAIN, ENDOFCHAIN] + [3 + n + 1 for n in range(mini_sectors - 1)] + [ENDOFCHAIN]
    root = _entry("Root Entry", 5, child=1 if names else NOSTREAM, start=3 if names else ENDOFCHAIN,
                  size=len(mini_fat) * MINI)
    directory = root + b"".join(entries)
    directory += b"".join(_entry("", 0) for _ in range(4 - len(names) - 1))
    header = (MAGIC + b"\0" * 16 + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6) + b"\0" * 6
              + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, 2, 1, ENDOFCHAIN, 0)
              + struct.pack("<I", 0) + struct.pack("<I", FREESECT) * 108)
    assert len(header) == SECTOR
    return (header + _words(fat) + directory + _words(mini_fat) + mini_data)


def _words(values):
    return struct.pack(f"<{len(values)}I", *values).ljust(SECTOR, b"\xff")


def fib_base(encrypted=False):
    """A 32-byte Word FibBase: wIdent 0xA5EC, nFib 0xC1, fEncrypted (bit 8 of the flags) as asked."""
    flags = 0x0100 if encrypted else 0
    return struct.pack("<HHHHHH", 0xA5EC, 0xC1, 0, 0x0409, 0, flags).ljust(32, b"\0")


BIFF8_BOF = bytes.fromhex("0908100000060500") + b"\0" * 12  # BOF record, BIFF8 workbook globals
PPT_RECORD = bytes.fromhex("0f00e8030000000000000000")  # a DocumentContainer record header


def _seeds():
    doc = ole({"WordDocument": fib_base()})
    # a FAT whose directory chain points at itself: olefile must notice the loop
    loop = bytearray(doc)
    struct.pack_into("<I", loop, SECTOR + 4, 1)
    # a header that claims 2**31 FAT sectors and a DIFAT chain: absurd counts must not allocate or spin
    absurd = bytearray(doc)
    struct.pack_into("<I", absurd, 44, 0x7FFFFFFF)
    struct.pack_into("<II", absurd, 68, 0, 0x7FFFFFFF)
    # a directory whose root's child points past the end of the directory
    dangling = bytearray(doc)
    struct.pack_into("<I", dangling, 2 * SECTOR + 76, 0x00FFFFFF)
    # a 4 KiB sector shift with a file too short for it
    shift = bytearray(doc)
    struct.pack_into("<HH", shift, 26, 4, 12)
    return {
        "ole_doc": doc,
        "ole_doc_fencrypted": ole({"WordDocument": fib_base(encrypted=True)}),
        "ole_xls_workbook": ole({"Workbook": BIFF8_BOF}),
        "ole_xls_book": ole({"Book": BIFF8_BOF}),
        "ole_ppt": ole({"PowerPoint Document": PPT_RECORD, "Current User": b"\0" * 20}),
        "ole_ppt40": ole({"PP40": PPT_RECORD}),
        "ole_encrypted_package": ole({"EncryptionInfo": b"\x04\x00\x04\x00" + b"\0" * 60,
                                      "EncryptedPackage": b"\x10" + b"\0" * 23}),
        "ole_no_streams": ole({}),
        "ole_truncated": doc[:1600],  # header, FAT and directory whole: olefile lists it, LibreOffice gets it
        "ole_short": doc[:1200],  # under olefile's 1,536-byte minimum
        "ole_header_only": doc[:SECTOR],
        "ole_fat_loop": bytes(loop),
        "ole_absurd_counts": bytes(absurd),
        "ole_dangling_child": bytes(dangling),
        "ole_bad_sector_shift": bytes(shift),
        "rtf_named_doc": b"{\\rtf1\\ansi\\deff0 {\\fonttbl {\\f0 Times;}}\\f0 Not a Word 97 file.\\par}",
        "zip_named_xls": b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + b"\0" * 20,
        "html_named_ppt": b"<html><body><p>slides</p></body></html>",
        # multipart bodies (boundary "b"): what a broken client or a hostile one sends
        "multipart_traversal": (b"--b\r\nContent-Disposition: form-data; name=\"file\"; "
                                b"filename=\"../../etc/passwd.doc\"\r\n\r\nx\r\n--b--\r\n"),
        "multipart_rfc2231": (b"--b\r\nContent-Disposition: form-data; name=\"file\"; "
                              b"filename*=UTF-8''..%2F..%2F%E2%80%AEcod.exe%00.doc\r\n\r\nx\r\n--b--\r\n"),
        "multipart_no_close": b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.doc\"\r\n\r\nx",
        "multipart_latin1_name": (b"--b\r\nContent-Disposition: form-data; name=\"file\"; "
                                  b"filename=\"r\xe9sum\xe9.doc\"\r\n\r\nx\r\n--b--\r\n"),
        "multipart_two_files": (b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.doc\"\r\n\r\n"
                                b"x\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.doc\""
                                b"\r\n\r\ny\r\n--b--\r\n"),
        "multipart_no_headers": b"--b\r\n\r\nx\r\n--b--\r\n",
        "multipart_control_name": (b"--b\r\nContent-Disposition: form-data; name=\"file\"; "
                                   b"filename=\"a\x01\x1b[2J\x7f\tb.doc\"\r\n\r\nx\r\n--b--\r\n"),
    }


SEEDS = _seeds()


def to_hex(data, width=32):
    return "".join(data[i:i + width].hex() + "\n" for i in range(0, len(data), width))


def load(name):
    """The committed seed ``name`` (from ``<name>.hex``)."""
    return bytes.fromhex((HERE / f"{name}.hex").read_text())


def write():
    for name, data in SEEDS.items():
        (HERE / f"{name}.hex").write_text(to_hex(data))


if __name__ == "__main__":
    write()
    print(f"wrote {len(SEEDS)} seeds to {HERE}", file=sys.stderr)
