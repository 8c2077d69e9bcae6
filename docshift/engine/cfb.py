"""Compound files (CFB, [MS-CFB]): read one storage of a legacy file with everything under it, and write a
storage tree as a compound file of its own.

olefile reads compound files but writes none, and no well-kept library writes them; this writes version 3 (512-byte
sectors, 64-byte mini sectors), the version Office writes for a vbaProject.bin. The directory's red-black trees are
balanced search trees whose deepest level is red, so every path holds as many black entries. What is written keeps
each entry's name, bytes, CLSID, state bits and times: a storage copied with it reads as it was.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import olefile

SECTOR = 512
MINI_SECTOR = 64
MINI_CUTOFF = 4096  # streams shorter than this live in the mini stream
HEADER_FAT_SLOTS = 109  # FAT sectors the header lists; DIFAT sectors list the rest
PER_SECTOR = SECTOR // 4  # sector numbers in a FAT or DIFAT sector
MAX_NAME = 31  # UTF-16 characters of an entry's name, its terminator aside
NOSTREAM = 0xFFFFFFFF
ENDOFCHAIN = 0xFFFFFFFE
FATSECT = 0xFFFFFFFD
DIFSECT = 0xFFFFFFFC
FREESECT = 0xFFFFFFFF
STORAGE, STREAM, ROOT = 1, 2, 5
RED, BLACK = 0, 1
_ENTRY = struct.Struct("<64sHBBIII16sIQQIQ")  # one 128-byte directory entry
_HEADER = struct.Struct("<8s16sHHHHH6sIIIIIIIII")  # the header before its 109 DIFAT slots
# a deck saved for PowerPoint 95 and 97: the storage that holds the 97 format's streams, and their names
DUAL_STORAGE, DUAL_STREAMS = "PP97_DUALSTORAGE", {"current user", "powerpoint document", "pictures"}
RT_CURRENT_USER = 0x0FF6  # the record a PowerPoint 97 Current User stream starts with


class CompoundFile(olefile.OleFileIO):
    """olefile's reader of the compound file at ``path``, over a file object of its own, closed with it.

    Given a name, olefile opens the file itself and records its caller's whole stack (``traceback.extract_stack``,
    to name it in a warning should the file never be closed). A legacy file is opened five or six times in a
    conversion (the pre-check, the VBA check, the inventory, the mends), and those stacks were 3.5% of a worker's
    CPU in a flood.

    A deck PowerPoint 97 saved for PowerPoint 95 too ("PowerPoint 95 & 97") holds the 95 format's streams at the
    root and its own in the storage PP97_DUALSTORAGE; LibreOffice reads the latter, and so does this: the root's
    "Current User", "PowerPoint Document" and "Pictures" are that storage's (``dual``)."""

    def __init__(self, path: str | Path) -> None:
        # olefile's __del__ reads this; a file that does not open leaves the object to it before olefile's __init__
        self._we_opened_fp = False
        self.dual = False
        self._own = open(path, "rb")  # noqa: SIM115  (closed by close)
        try:
            super().__init__(self._own)
            self.dual = self._dual_storage()
        except BaseException:
            self._own.close()
            raise

    def _dual_storage(self) -> bool:
        """Whether PP97_DUALSTORAGE holds the deck, the root a PowerPoint 95 one (its Current User no
        CurrentUserAtom)."""
        if not all(super(CompoundFile, self).exists([DUAL_STORAGE, name]) for name in ("PowerPoint Document",
                                                                                      "Current User")):
            return False
        head = super().openstream("Current User").read(4) if super().exists("Current User") else b""
        return len(head) < 4 or struct.unpack_from("<H", head, 2)[0] != RT_CURRENT_USER

    def _path(self, filename: str | list[str]) -> str | list[str]:
        parts = filename.split("/") if isinstance(filename, str) else list(filename)
        if self.dual and len(parts) == 1 and parts[0].lower() in DUAL_STREAMS:
            return [DUAL_STORAGE, parts[0]]
        return filename

    def openstream(self, filename: str | list[str]) -> olefile.olefile.OleStream:
        return super().openstream(self._path(filename))

    def exists(self, filename: str | list[str]) -> bool:
        return super().exists(self._path(filename))

    def get_type(self, filename: str | list[str]) -> int | bool:
        return super().get_type(self._path(filename))

    def get_size(self, filename: str | list[str]) -> int:
        return super().get_size(self._path(filename))

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._own.close()

    def __exit__(self, *exc: object) -> None:  # olefile's own skips close()
        self.close()


@dataclass
class Entry:
    """A storage (``data`` None, ``children``) or a stream (``data``) of a compound file."""
    name: str
    data: bytes | None = None
    children: list[Entry] = field(default_factory=list)
    clsid: bytes = bytes(16)
    state: int = 0  # the entry's user-defined state bits
    created: int = 0  # FILETIMEs; a stream's are 0
    modified: int = 0

    def streams(self, prefix: str = "") -> dict[str, bytes]:
        """{path below this storage ("VBA/dir"): bytes} of every stream under it."""
        found: dict[str, bytes] = {}
        for child in self.children:
            path = prefix + child.name
            if child.data is not None:
                found[path] = child.data
            else:
                found.update(child.streams(path + "/"))
        return found

    def storages(self, prefix: str = "") -> dict[str, bytes]:
        """{path: CLSID} of every storage under it."""
        found: dict[str, bytes] = {}
        for child in self.children:
            if child.data is None:
                found[prefix + child.name] = child.clsid
                found.update(child.storages(prefix + child.name + "/"))
        return found


def read_storage(ole: olefile.OleFileIO, name: str, max_size: int, skip: frozenset[str] = frozenset(),
                 left_out: list[str] | None = None) -> Entry:
    """The storage ``name`` (at the root, found whatever its case; "" for the root itself) of ``ole`` with every
    storage and stream under it, read whole; streams whose lower-case name is in ``skip`` are left out. Raises
    ValueError when there is no such storage or its streams add up to more than ``max_size`` bytes, and olefile's
    errors for a damaged file. Given ``left_out``, a stream that does not read whole, or would pass ``max_size``, is
    left out instead, its path put there (a damaged file's: its chain is not followed past what is left)."""
    top = ole.root if not name else next((kid for kid in ole.root.kids if kid.name.lower() == name.lower()), None)
    if top is None or top.entry_type not in (olefile.STGTY_STORAGE, olefile.STGTY_ROOT):
        raise ValueError(f"no storage {name!r}")
    budget = [max_size]

    def read(path: list[str], size: int) -> bytes | None:
        if left_out is None:
            budget[0] -= size
            if budget[0] < 0:
                raise ValueError(f"storage {name!r} holds more than {max_size} bytes")
            data = ole.openstream(path).read()
            if len(data) != size:
                raise ValueError(f"stream {path[-1]!r} is shorter than its entry says")
            return data
        try:
            data = ole.openstream(path).read() if size <= budget[0] else None
        except Exception:  # olefile raises many kinds on a damaged file
            data = None
        if data is None or len(data) != size:
            left_out.append("/".join(path))
            return None
        budget[0] -= size
        return data

    def walk(entry: olefile.olefile.OleDirectoryEntry, path: list[str]) -> Entry:
        node = _meta(entry)
        for kid in entry.kids:
            if kid.entry_type == olefile.STGTY_STORAGE:
                node.children.append(walk(kid, path + [kid.name]))
            elif kid.entry_type == olefile.STGTY_STREAM and kid.name.lower() not in skip:
                data = read(path + [kid.name], kid.size)
                if data is not None:
                    stream = _meta(kid)
                    stream.data = data
                    node.children.append(stream)
        return node

    return walk(top, [top.name] if name else [])


def chains_cross(ole: olefile.OleFileIO) -> bool:
    """Whether a FAT chain of ``ole`` (the directory's, the mini FAT's, the mini stream's, or a stream's outside it)
    runs into itself or into another's sectors: damage olefile reads past (it follows a chain only as far as the
    entry's size, or the file's, asks), while LibreOffice's reader gives up on the whole file."""
    fat, seen = ole.fat, set()
    starts = [ole.first_dir_sector, ole.first_mini_fat_sector]
    starts += [entry.isectStart for entry in ole.direntries if entry is not None and entry.size and
               (entry.entry_type == olefile.STGTY_ROOT or entry.size >= ole.minisectorcutoff)]
    for sector in starts:
        while sector < len(fat):  # ENDOFCHAIN and the other markers are past any FAT's end
            if sector in seen:
                return True
            seen.add(sector)
            sector = fat[sector]
    return False


def _meta(entry: olefile.olefile.OleDirectoryEntry) -> Entry:
    """An Entry with the name, CLSID, state bits and times of olefile's ``entry`` (olefile keeps the CLSID as text)."""
    clsid = uuid.UUID(entry.clsid).bytes_le if entry.clsid else bytes(16)
    return Entry(entry.name, clsid=clsid, state=entry.dwUserFlags, created=entry.createTime,
                 modified=entry.modifyTime)


def _order(entry: Entry) -> tuple[int, str]:
    """[MS-CFB] 2.6.4: siblings compare by name length first, then by the upper-cased names."""
    return len(entry.name), entry.name.upper()


def write(root: Entry) -> bytes:
    """The compound file whose root storage is ``root`` (its name is written as "Root Entry", its CLSID, state and
    times kept). Raises ValueError for a name the format cannot hold, or siblings with the same name. Past about 6.8 MB
    the FAT needs more sectors than the header lists: DIFAT sectors list the rest."""
    nodes, kinds = [root], [ROOT]
    left, right, child, color = [NOSTREAM], [NOSTREAM], [NOSTREAM], [BLACK]

    def tree(ids: list[int], depth: int, depths: dict[int, int]) -> int:
        """Build a balanced search tree over ``ids`` (sorted), record each one's depth, return its root."""
        if not ids:
            return NOSTREAM
        middle = len(ids) // 2
        node = ids[middle]
        depths[node] = depth
        left[node] = tree(ids[:middle], depth + 1, depths)
        right[node] = tree(ids[middle + 1:], depth + 1, depths)
        return node

    def add(index: int) -> None:
        kids = sorted(nodes[index].children, key=_order)
        keys = [_order(kid) for kid in kids]
        if len(set(keys)) != len(keys):
            raise ValueError(f"two entries of the same name in {nodes[index].name!r}")
        ids = []
        for kid in kids:
            if not 0 < len(kid.name) <= MAX_NAME or any(char in kid.name for char in "/\\:!"):
                raise ValueError(f"no compound file entry can be named {kid.name!r}")
            ids.append(len(nodes))
            nodes.append(kid)
            kinds.append(STREAM if kid.data is not None else STORAGE)
            for column, value in ((left, NOSTREAM), (right, NOSTREAM), (child, NOSTREAM), (color, BLACK)):
                column.append(value)
        depths: dict[int, int] = {}
        child[index] = tree(ids, 0, depths)
        deepest = max(depths.values(), default=0)
        for node, depth in depths.items():
            color[node] = RED if depth == deepest > 0 else BLACK  # red leaves at the bottom: equal black heights
        for node in ids:
            if kinds[node] == STORAGE:
                add(node)

    add(0)
    fat: list[int] = []
    sectors = bytearray()

    def allocate(data: bytes | bytearray) -> int:
        """Put ``data`` in consecutive sectors chained in the FAT; the first sector's number."""
        count = -(-len(data) // SECTOR)
        first = len(fat)
        fat.extend(range(first + 1, first + count))
        fat.append(ENDOFCHAIN)
        sectors.extend(data)
        sectors.extend(bytes(-len(data) % SECTOR))
        return first

    starts, sizes = [0] * len(nodes), [0] * len(nodes)
    minifat: list[int] = []
    mini = bytearray()
    for index, node in enumerate(nodes):
        if node.data is None:
            continue
        sizes[index] = len(node.data)
        if not node.data:
            starts[index] = ENDOFCHAIN
        elif len(node.data) >= MINI_CUTOFF:
            starts[index] = allocate(node.data)
        else:
            first, count = len(minifat), -(-len(node.data) // MINI_SECTOR)
            minifat.extend(range(first + 1, first + count))
            minifat.append(ENDOFCHAIN)
            mini.extend(node.data)
            mini.extend(bytes(-len(node.data) % MINI_SECTOR))
            starts[index] = first
    starts[0], sizes[0] = (allocate(mini), len(mini)) if mini else (ENDOFCHAIN, 0)
    minifat_start, minifat_sectors = ENDOFCHAIN, 0
    if minifat:
        minifat_sectors = -(-len(minifat) * 4 // SECTOR)
        table = minifat + [FREESECT] * (minifat_sectors * SECTOR // 4 - len(minifat))
        minifat_start = allocate(struct.pack(f"<{len(table)}I", *table))
    directory = bytearray()
    for index, node in enumerate(nodes):
        name = ("Root Entry" if index == 0 else node.name).encode("utf-16-le") + b"\0\0"
        stream = node.data is not None
        directory += _ENTRY.pack(name, len(name), kinds[index], color[index], left[index], right[index], child[index],
                                 node.clsid, node.state, 0 if stream else node.created,
                                 0 if stream else node.modified, starts[index], sizes[index])
    while len(directory) % SECTOR:
        directory += _ENTRY.pack(b"", 0, 0, 0, NOSTREAM, NOSTREAM, NOSTREAM, bytes(16), 0, 0, 0, 0, 0)
    directory_start = allocate(directory)
    # the FAT's own sectors, and past the header's 109 slots the DIFAT sectors that list the rest, are in the FAT too
    fat_sectors, difat_sectors = 1, 0
    while fat_sectors * PER_SECTOR < len(fat) + fat_sectors + difat_sectors:
        fat_sectors += 1
        difat_sectors = -(-max(0, fat_sectors - HEADER_FAT_SLOTS) // (PER_SECTOR - 1))
    fat_start = len(fat)
    difat_start = fat_start + fat_sectors
    fat.extend([FATSECT] * fat_sectors + [DIFSECT] * difat_sectors)
    fat.extend([FREESECT] * (fat_sectors * PER_SECTOR - len(fat)))
    listed = list(range(fat_start, difat_start))
    difat = bytearray()
    for number, at in enumerate(range(HEADER_FAT_SLOTS, len(listed), PER_SECTOR - 1)):  # each ends with the next one
        slots = listed[at:at + PER_SECTOR - 1]
        slots += [FREESECT] * (PER_SECTOR - 1 - len(slots))
        slots.append(difat_start + number + 1 if number + 1 < difat_sectors else ENDOFCHAIN)
        difat += struct.pack(f"<{PER_SECTOR}I", *slots)
    in_header = listed[:HEADER_FAT_SLOTS] + [FREESECT] * (HEADER_FAT_SLOTS - min(fat_sectors, HEADER_FAT_SLOTS))
    header = _HEADER.pack(olefile.MAGIC, bytes(16), 0x3E, 3, 0xFFFE, 9, 6, bytes(6), 0, fat_sectors, directory_start,
                          0, MINI_CUTOFF, minifat_start, minifat_sectors,
                          difat_start if difat_sectors else ENDOFCHAIN, difat_sectors)
    header += struct.pack(f"<{HEADER_FAT_SLOTS}I", *in_header)
    return bytes(header + sectors + struct.pack(f"<{len(fat)}I", *fat) + difat)
