"""What a result may hold only if its source explains it: the output check against a LibreOffice that a
document got code running in (it could add a remote template, a linked picture that reports the reader, or a
VBA project, and every other check would pass).

- A relationship to something outside the package (``TargetMode="External"``) is a hyperlink (it opens only
  when a reader clicks it), or its target is written in the legacy file itself: a linked picture or
  object, an attached template the source names; or it names no place at all (no letter or digit).
- A VBA project is in the result only when the source carries one.

Relationship parts are read as a stream (``ooxml.stream``), never inflated past their declared size.
"""

import re
import zipfile
from pathlib import Path
from urllib.parse import unquote

from docshift.engine import ooxml, vba

VBA_PART = re.compile(r"(?:word|xl|ppt)/vbaProject\.bin")
# a target shorter than this can be found in any file by chance: it explains nothing
SHORTEST_TARGET = 6


def unexplained(result: str | Path, source: str | Path, kind: str) -> str | None:
    """Why ``result`` holds something its legacy ``source`` of ``kind`` does not explain, in words, or None."""
    with zipfile.ZipFile(result) as package:
        names = package.namelist()
        if any(VBA_PART.fullmatch(name) for name in names) and not vba.has_project(source, kind):
            return "it holds a VBA project the source does not carry"
        external = [target for name in names if name.endswith(".rels")
                    for target in _external_targets(package, name)]
    if not external:
        return None
    written = _SourceText(source)
    for target in dict.fromkeys(external):
        if _names_a_place(target) and not _written_in(target, written):
            return "it refers to an external location the source does not name"
    return None


def _external_targets(package: zipfile.ZipFile, name: str) -> list[str]:
    """Targets of the part's relationships to outside the package, hyperlinks left out."""
    targets = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == f"{ooxml.PACKAGE_RELATIONSHIPS}{ooxml.SEPARATOR}Relationship" \
                and attributes.get("TargetMode") == "External" and attributes.get("Type") != ooxml.HYPERLINK:
            targets.append(attributes.get("Target", ""))

    with package.open(name) as part:
        ooxml.stream(iter(lambda: part.read(ooxml.CHUNK), b""), name, start=start)
    return targets


class _SourceText:
    """The legacy file's bytes as text both ways a legacy Office file writes strings, 8-bit and UTF-16LE, and
    whether a string is written in it. A workbook may link hundreds of others, whose paths share folders and hosts,
    and a search that finds nothing reads the whole text: each string is searched once, and the encoding that held
    the last one found is searched first (a file writes its paths in one encoding)."""

    def __init__(self, source: str | Path) -> None:
        data = Path(source).read_bytes()
        self._texts = [data.decode("latin-1").lower(), data.decode("utf-16-le", "replace").lower() +
                       data[1:].decode("utf-16-le", "replace").lower()]
        self._seen: dict[str, bool] = {}

    def holds(self, string: str) -> bool:
        if string not in self._seen:
            self._seen[string] = False
            for index, text in enumerate(self._texts):
                if string in text:
                    self._texts.insert(0, self._texts.pop(index))
                    self._seen[string] = True
                    break
        return self._seen[string]


def _names_a_place(target: str) -> bool:
    """Whether ``target`` could name any place at all. One with no letter or digit reaches nothing: LibreOffice
    writes "?" for an external workbook whose path in the .xls is empty (a SUPBOOK whose path is one nul)."""
    return any(character.isalnum() for character in unquote(unquote(unquote(target))))


def _written_in(target: str, written: _SourceText) -> bool:
    """Whether the legacy file writes ``target``, or a distinctive part of it (a host, folder or file name:
    legacy files write paths in their own encodings, and LibreOffice rewrites them), in either encoding.
    LibreOffice escapes a '%' of the source again ("%2525" is a '%'), and a source that LibreOffice wrote holds a
    path's '%' and '#' escaped once already ("%25", "%23"): each decoding of the target is looked for."""
    decodings = [target]
    for _ in range(3):
        decodings.append(unquote(decodings[-1]))
    targets = [decoded.lower().replace("\\", "/") for decoded in reversed(decodings)]
    parts = [part for target in targets for part in re.split(r"[/:]+", target)
             if part not in ("file", "http", "https", "..", ".")]
    # the whole targets come last: where one is written, so is each of its parts, and a part is found sooner (a
    # search that finds nothing reads the whole file, and a workbook may link hundreds of others)
    forms = dict.fromkeys([*parts, *(part.rsplit(".", 1)[0] for part in parts), *targets])
    return any(len(form) >= SHORTEST_TARGET and written.holds(form) for form in forms)
