"""What ``docshift convert`` works on: the legacy files of the folders and files it is given, each with its
path relative to where it was found (the layout kept under --out), and the state file in --out that lets a
killed run resume without sending a finished file again."""

import errno
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from docshift.formats import by_filename, target_name

STATE_FILE = ".docshift-state.jsonl"


@dataclass(frozen=True)
class Source:
    """One legacy file to convert."""

    path: Path                # where it is read from
    shown: str                # the path as the user gave it (the report's ``source``)
    rel: PurePosixPath        # its path under the folder it was found in; its result goes to the same under --out
    kind: str                 # doc, xls or ppt


@dataclass
class Found:
    sources: list[Source] = field(default_factory=list)
    skipped: int = 0          # files that are not .doc/.xls/.ppt: counted, never sent
    missing: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # folders that could not be listed: "path: why"


def walk(arguments: Iterable[str], out_dir: Path) -> Found:
    """The legacy files of ``arguments`` (files, or folders walked in name order), each path once (a link to a
    file of the tree is a file of its own, its result beside it); --out itself is never walked, so converting a
    tree into a folder inside it does not read back its own results. A broken link with a legacy name is a
    source that cannot be read (its row says so); a folder that cannot be listed is in ``unreadable``."""
    found = Found()
    seen: set[tuple[Path, PurePosixPath]] = set()
    try:
        out_real = out_dir.resolve()
    except OSError:
        out_real = out_dir

    def add(path: Path, shown: str, rel: PurePosixPath) -> None:
        try:
            real = (path.resolve(), rel)
        except (OSError, RuntimeError):  # a link that loops: its row says it cannot be read
            real = (path.absolute(), rel)
        if real in seen:
            return
        seen.add(real)
        fmt = by_filename(path.name)
        if fmt is None:
            found.skipped += 1
        else:
            found.sources.append(Source(path, shown, rel, fmt.kind))

    for argument in arguments:
        root = Path(argument)
        if root.is_file():
            add(root, argument, PurePosixPath(root.name))
        elif root.is_dir():
            def unlisted(error: OSError) -> None:
                found.unreadable.append(f"{error.filename}: {error.strerror or error}")

            # symbolic links to folders are not followed: no loops
            for folder, dirs, files in os.walk(root, onerror=unlisted):
                here = Path(folder)
                dirs[:] = sorted(d for d in dirs if (here / d).resolve() != out_real)
                for name in sorted(files):
                    path = here / name
                    # not a socket or a fifo; a broken link, whose row says it cannot be read
                    if path.is_file() or (path.is_symlink() and not path.exists()):
                        rel = PurePosixPath(*path.relative_to(root).parts)
                        add(path, str(path), rel)
        else:
            found.missing.append(argument)
    return found


def collisions(sources: list[Source]) -> list[tuple[Source, Source]]:
    """Pairs of sources whose results would land on the same path under --out (the same relative path from
    two folders, or names differing only in case)."""
    first: dict[str, Source] = {}
    pairs = []
    for source in sources:
        target = str(source.rel.parent / (target_name(source.rel.name) or source.rel.name)).lower()
        if target in first:
            pairs.append((first[target], source))
        else:
            first[target] = source
    return pairs


class State:
    """``--out/.docshift-state.jsonl``: one JSON line per event of a source, the last one of a source wins.

    A line is written by one ``write`` of an append-only file, so a run killed at any moment leaves whole
    lines (and at worst a torn last one, which is ignored, and which the next run ends before its first line).
    It holds hashes, task ids and outcomes, never the API key.
    """

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / STATE_FILE
        self.lock = threading.Lock()
        self.records: dict[str, dict[str, Any]] = {}
        try:
            # a name's bytes that are no UTF-8 are kept as they are, as the name's own (``put``)
            with open(self.path, encoding="utf-8", errors="surrogateescape") as f:
                for line in f:
                    try:
                        record = json.loads(line)
                        self.records[record["rel"]] = record
                    except (ValueError, KeyError, TypeError):
                        continue  # the torn last line of a killed run
        except FileNotFoundError:
            pass
        self.fd: int | None = None

    def get(self, rel: PurePosixPath, sha256: str) -> dict[str, Any] | None:
        """The last record of ``rel`` if it is about this content (an edited file starts afresh)."""
        record = self.records.get(str(rel))
        return record if record is not None and record.get("sha256") == sha256 else None

    def put(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode(errors="surrogateescape")
        with self.lock:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
                size = os.fstat(self.fd).st_size
                if size and os.pread(self.fd, 1, size - 1) != b"\n":  # a torn line (a full disk, a kill): ended,
                    os.write(self.fd, b"\n")  # so that this run's first line is not glued to it and lost
            # no fsync: a killed process loses nothing written; after a power loss a lost line only
            # means a replay, which the Idempotency-Key makes free
            if os.write(self.fd, line) != len(line):  # the disk filled in the line: the next one starts afresh
                os.write(self.fd, b"\n")
                raise OSError(errno.ENOSPC, "the state file's line was cut short", str(self.path))
            self.records[record["rel"]] = record

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
