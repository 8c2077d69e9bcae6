"""A deck's hyperlinks, handed whole to LibreOffice.

PowerPoint keeps the address of each hyperlink of a deck in the ``_PID_HLINKS`` property of the user-defined
property set of its ``DocumentSummaryInformation`` stream ([MS-OSHARED] 2.3.3.1.18): one entry per ExHyperlink of
the document's ExObjList, in their order, which is how LibreOffice's import pairs them. Its reader of property sets
(``Section::Read`` in sd's ``propread.cxx``) cuts each property to the section's declared size less the section's
offset in the stream: a length less a position. A set that starts n bytes into the stream so loses the last n bytes
of any property as long as the set itself; the hyperlink list stops at the last entry that is whole, and every
hyperlink after it is no link on its slide, a shape's or a text's (the corpus's 42520.ppt: 9 of its 19 links kept,
by a plain ``soffice`` too). The cut also bounds the size to what the stream holds, so declaring a larger size alone
does not do.

LibreOffice gets a copy whose ``DocumentSummaryInformation`` has each set that would be cut followed by as many
bytes of padding as its offset, and declared that much longer: what it cuts is then the padding. The properties are
unchanged, and so is every other stream; the copy keeps the file's name (LibreOffice shows it in fields). The
customer's file is left as it is, and what the inventory counts is read of it.
"""

import itertools
import struct
from pathlib import Path

from docshift.engine import cfb

STREAM = "\x05DocumentSummaryInformation"
HEADER = 28  # byte order, version, system identifier, CLSID, number of sets
SET_ENTRY = 20  # FMTID and offset of each set
MOST_SETS = 2  # LibreOffice reads none of a stream that says it holds more
MOST_STREAM = 1 << 20  # larger is no property stream PowerPoint writes: left as it is


def padded(data: bytes) -> bytes | None:
    """The ``DocumentSummaryInformation`` stream ``data`` laid out again with each property set that LibreOffice
    would cut padded as far as its offset; None where it cuts none (or the stream is not one it reads)."""
    if len(data) < HEADER or len(data) > MOST_STREAM or data[:2] != b"\xfe\xff":
        return None
    count = struct.unpack_from("<I", data, HEADER - 4)[0]
    if not 0 < count <= MOST_SETS or HEADER + SET_ENTRY * count > len(data):
        return None
    sets = []
    for index in range(count):
        offset = struct.unpack_from("<I", data, HEADER + SET_ENTRY * index + 16)[0]
        if offset + 8 > len(data):
            return None
        size = min(struct.unpack_from("<I", data, offset)[0], len(data) - offset)
        sets.append((offset, data[offset:offset + size]))
    if not any(_cut(body, offset) for offset, body in sets):
        return None
    out = bytearray(data[:HEADER + SET_ENTRY * count])
    for index, (_, body) in enumerate(sets):
        out += bytes(-len(out) % 4)
        at = len(out)
        padding = _cut(body, at)
        struct.pack_into("<I", out, HEADER + SET_ENTRY * index + 16, at)
        out += body
        if padding:  # as long as its new offset, which is what LibreOffice takes off
            struct.pack_into("<I", out, at, len(body) + at)
            out += bytes(at)
    return bytes(out)


def _cut(body: bytes, offset: int) -> bool:
    """Whether LibreOffice cuts a property of the set ``body``, found ``offset`` bytes into its stream: one of its
    properties (told apart by their offsets) is longer than the set's size less that offset."""
    if len(body) < 8 or offset >= len(body):  # a size below the offset: LibreOffice's subtraction wraps, cutting none
        return False
    count = struct.unpack_from("<I", body, 4)[0]
    starts = sorted({struct.unpack_from("<I", body, 12 + 8 * index)[0]
                     for index in range(min(count, (len(body) - 8) // 8))} | {len(body)})
    return any(end - start > len(body) - offset for start, end in itertools.pairwise(starts))


def given_whole(source: Path, workdir: Path) -> Path | None:
    """A copy of the .ppt ``source`` in ``workdir`` whose hyperlinks LibreOffice reads whole, or None where it
    reads them whole as it is (or the file cannot be read and written again: LibreOffice gets it as it is)."""
    try:
        with cfb.CompoundFile(source) as ole:
            if not ole.exists(STREAM) or ole.get_size(STREAM) > MOST_STREAM:
                return None
            stream = padded(ole.openstream(STREAM).read())
            if stream is None:
                return None
            root = cfb.read_storage(ole, "", 2 * source.stat().st_size)
        for child in root.children:
            if child.name == STREAM and child.data is not None:
                child.data = stream
        data = cfb.write(root)
    except Exception:  # olefile raises many kinds on a damaged file, cfb ValueError on one it cannot write
        return None
    target = workdir / "links" / source.name
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.write_bytes(data)
    return target
