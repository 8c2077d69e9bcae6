"""Conversion of one legacy file to OOXML on a warm LibreOffice, and the checks of its output.

LibreOffice decides (in ``uno/bridge.py``) what the file is, loads it and writes the
OOXML; here its report is sorted into the documented task error codes
(``ConversionFailed``), and what it loaded from the source is compared with what
the OOXML holds (``ooxml.py`` reads that from the package's XML). LibreOffice's
own messages go to the log, never to the client.
"""

from __future__ import annotations

import logging
import time
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docshift.contract import Macros, TaskErrorCode
from docshift.engine import (
    biff,
    inventory,
    mended,
    ooxml,
    ppt_links,
    precheck,
    putback,
    sandbox,
    stored,
    unexplained,
    vba,
    vbaproject,
)
from docshift.engine.later import Later
from docshift.errors import ConversionFailed, LoadFailed, OfficeCrashed, OfficeTimeout
from docshift.formats import FORMATS, detected_format

if TYPE_CHECKING:
    from docshift.engine.forkit import Forkit
    from docshift.engine.protection import Opened

log = logging.getLogger("docshift.engine")

# Excel keeps at most 31 characters of a sheet name; LibreOffice's export cuts longer ones
SHEET_NAME_LIMIT = 31
# Body text may lose a few characters on the way through OOXML without losing content: fields that
# LibreOffice computes at load (dates, page numbers) and markers of objects. Whitespace is not
# counted at all (the export turns some spaces, tabs and empty paragraphs into indents and spacing).
TEXT_TOLERANCE_CHARACTERS = 8
TEXT_TOLERANCE_RATIO = 0.001
# The result is a zip that clients unpack: its directory (read without inflating anything) must not
# promise more than this. Deflate cannot shrink data more than about 1032 times; beyond that the
# directory lies or its entries overlap, as in zip bombs.
MAX_RESULT_UNCOMPRESSED = 1 << 30
MAX_RESULT_RATIO = 1000
MAX_RESULT_ENTRIES = 10_000
INVALID = "The converted file failed validation"
# the legacy file's records take milliseconds to count (bounded by their budget): a reader still at it this long
# after it started never ends, and its counts are unknown rather than the task held for good
INVENTORY_SECONDS = 60
# a conversion's tries on a parent started again after the one it ran on died, none counted as the file's crash
PARENT_LOSSES = 2
OUT_OF_MEMORY = "LibreOffice ran out of memory converting this file (the service's memory limit), twice"
PARENT_GRACE = 1.0  # seconds a parent's bubblewrap is given to end, after its child died, to tell its death
# the parts the bridge counts in a loaded document of each kind, when asked (``bridge.facts``)
LOADED_PARTS = {"doc": ("embedded_objects",), "xls": ("charts", "embedded_objects"), "ppt": ("embedded_objects",)}


@dataclass(frozen=True)
class Converted:
    path: Path              # the checked OOXML file
    detected_format: str    # what LibreOffice recognised in the source (``formats.detected_format``)
    extension: str = ""     # the result's type: docx, docm, ...
    fidelity: dict[str, Any] | None = None  # ``inventory.report``: what the source holds against the result
    protected: bool = False  # encrypted with the source's password (``protection.protect``), after the checks


def convert(office: Forkit, source: Path, kind: str, workdir: str | Path, timeout: float, task_id: str | None = None,
            macros: Macros = Macros.KEEP, opened: Opened | None = None,
            ready: Callable[[Path, str], object] | None = None) -> Converted:
    """Convert ``source`` on ``office``; returns the checked result as :class:`Converted`.

    A source with a VBA project becomes the macro-enabled type with its modules, unless ``macros`` is
    ``Macros.REMOVE``. A crash of LibreOffice is retried once on a fresh process; a second one fails.
    A protected source comes ``opened`` with its password (``protection.open_source``): LibreOffice loads it with
    its Password load property, or its decrypted copy, and what is read of the legacy file here is read of that copy.
    ``ready(path, extension)`` hears when the result file is written whole, before it is checked and counted: its
    upload may start while they run. It hears again if the file is written again (a workbook's stored values go in
    after its checks); the file it heard of last is the result.
    """
    started = time.monotonic()
    loads = opened.loads(source) if opened is not None else [(source, None)]
    if kind == "ppt":  # a deck's hyperlinks past what LibreOffice's property reader cuts (``ppt_links``)
        loads = [(ppt_links.given_whole(path, Path(workdir)) or path if password is None else path, password)
                 for path, password in loads]
    if opened is not None and opened.plain is not None:
        source = opened.plain  # what the legacy file holds is read from here on; LibreOffice gets ``loads``
    carries_macros = vba.has_project(source, kind)
    project = None
    if carries_macros and macros == Macros.KEEP:
        # LibreOffice writes an empty project into a .pptm and rewrites a .doc's or .xls's from its Basic library:
        # the source's own goes in after the export (where it cannot be carried, the report names the rewrite)
        # (an OOXML package sent under a legacy name holds its project as Office wrote it: it goes in as it is)
        project = vbaproject.package_project(source, kind) or (
            vba.ppt_project(source) if kind == "ppt" else vbaproject.carry(source, kind))
    keep_macros = carries_macros and macros == Macros.KEEP and (kind != "ppt" or project is not None)
    target = FORMATS[kind].result(keep_macros)
    # What the legacy file itself holds, read on a thread of its own while LibreOffice loads the file: neither
    # waits for the other (it is a quarter of the worker's CPU beside LibreOffice: 0.85 of 3.3 s over the corpus).
    # It starts once the child has the file: started before, it held the GIL the hand-over waited for (4.8 ms).
    # A workbook's records, which the mends read after the export (each of the corpus's), are indexed next.
    reading = Later(inventory.of_source, source, kind, carries_macros,
                    after=(lambda: biff.index(source)) if kind == "xls" else None)

    def holdings() -> inventory.Inventory:
        """What the legacy file holds; unknown once its reading has run ``INVENTORY_SECONDS``."""
        try:
            return reading.result(max(0.0, INVENTORY_SECONDS - reading.elapsed()))
        except TimeoutError:
            if not reading.abandoned:
                reading.abandoned = True
                log.warning("the records of %s were still being read after %d s: its counts are unknown",
                            source.name, INVENTORY_SECONDS)
            return inventory.unknown(kind)

    def parts() -> bool:
        """What LibreOffice loaded shows a part its export dropped where the legacy file's records cannot be
        counted. The bridge counts those parts only then: a presentation's shapes walked for them took 12% of the
        corpus's time, a workbook's sheets walked for theirs 1.6%, and where the records could be counted the two
        counts agreed on every corpus file."""
        return any(holdings().counts.get(what) is None for what in LOADED_PARTS[kind])

    def shadows() -> bool:
        """A deck's text may be shadowed: LibreOffice's export drops the shadow, which ``text_shadows`` puts back
        from the runs the bridge reads as shadowed (6% of a deck's time where it read them all)."""
        return holdings().shadows is not False

    walks: dict[str, bool | Callable[[], bool]] = {"parts": parts, "shadows": kind == "ppt" and shadows}

    for tried, (loaded_file, password) in enumerate(loads, 1):
        result, report = _export(office, loaded_file, Path(workdir) / f"load-{tried}", target.extension,
                                 target.export_filter, timeout, task_id, walks, password, opened, reading.start)
        if report["outcome"] != "not_loaded":
            break
        if tried < len(loads):  # Excel's 128-bit "strong" provider: LibreOffice's import returns nothing
            log.info("LibreOffice did not open the protected %s with its password: its decrypted copy goes in",
                     loaded_file.name)
    # a mended or salvaged copy gets what is left of twice the timeout (the longest a crash and its retry take: what
    # ``max_run_seconds`` allows), half of it to each of its tries; where it fails, the first outcome stands
    left = (2 * timeout - (time.monotonic() - started)) / 2
    again = mended.copy(kind, loaded_file, report["outcome"], holdings, Path(workdir), result) \
        if password is None and left >= 1 else None
    salvaged = None
    if again is not None:
        log.info("LibreOffice cannot convert all of %s as it is: it converts a %s copy", loaded_file.name,
                 "mended" if again.left_out is None else "salvaged")
        try:
            second = _export(office, again.path, Path(workdir) / "load-mended", target.extension,
                             target.export_filter, left, task_id, walks, None, opened, reading.start)
            if again.kept(second[1], second[0], kind):
                (result, report), salvaged = second, again.left_out
        except ConversionFailed as error:
            log.warning("the copy of %s did not convert (%s): LibreOffice's first outcome stands",
                        loaded_file.name, error.code)
    found = detected_format(report.get("type"), report.get("media_type", ""))
    # a copy of a file LibreOffice did not convert is made only of a damaged file: that file is not read again to
    # say so
    damaged = report["outcome"] != "converted" and (again is not None or mended.damaged(source))
    if report["outcome"] == "refused":
        raise ConversionFailed(TaskErrorCode.UNSUPPORTED_CONTENT, refused(found, report.get("family"), kind)
                               + (f" {mended.DAMAGED}" if damaged else ""), detected_format=found)
    if report["outcome"] != "converted":
        raise not_loaded(source, opened, damaged)
    if not result.exists() or result.stat().st_size == 0:
        raise ConversionFailed(TaskErrorCode.CONVERSION_FAILED, "LibreOffice produced no output.")
    holds = holdings()
    if found == "wordperfect":  # WordPerfect 4.2 has no header: LibreOffice may take DOS text for one
        holds = inventory.of_guessed_wordperfect(source, holds)
    if "archive" in report:  # a web archive (MHT): what its pages show, as the child that unpacked it read them
        holds = inventory.of_web_archive(kind, report["archive"])
    check_export(result, kind, project)
    mends = putback.mend(result, source, kind, holds, keep_macros, macros == Macros.REMOVE, report["loaded"])
    if ready is not None:
        ready(result, target.extension)  # a check that fails below discards what went up
    if mends:
        check_package(result, kind)
    check_explained(result, source, kind)
    loaded = report["loaded"]
    held = inventory.of_result(result, kind)
    # the parts that the inventory read are not read again; where it could not tell, the check reads them itself
    check_content(loaded, held.facts() or ooxml.facts(result, kind), source)
    # what the legacy file itself holds, not what LibreOffice loaded: a part dropped on load shows too
    if kind == "xls":
        holds, differ = stored.settled(source, holds, held)  # less what Excel calculates again as it opens the file
        if stored.restore(result, holds, held, differ):
            if ready is not None:
                ready(result, target.extension)  # written again: it goes up again
            held = inventory.of_result(result, kind)
    fidelity = inventory.report(holds, held, macros_removed=macros == Macros.REMOVE,
                                loaded=loaded.get("parts"))
    if salvaged is not None:
        fidelity = mended.report(fidelity, salvaged)
    return Converted(result, found, target.extension, fidelity)


def _export(office: Forkit, source: Path, workdir: Path, extension: str, export_filter: str, timeout: float,
            task_id: str | None, walks: dict[str, bool | Callable[[], bool]], password: str | None,
            opened: Opened | None, sent: Callable[[], object]) -> tuple[Path, dict[str, Any]]:
    """LibreOffice's export of ``source`` (with the ``password`` load property, if any) into a file under
    ``workdir``: (that file, LibreOffice's report). A crash is retried once on a fresh LibreOffice, beside the
    others: a crash alone would hold up every other file of the worker for as long as its file takes to crash. A
    store that failed, or a file that found the sandbox's scratch space full (its neighbours' too, each with a
    share), is tried again alone (``sandbox.Room``). A child killed for the service's memory limit (by the kernel's
    OOM killer, or by the engine's watch just before it: ``memory.py``) did not crash on the file: it is tried again
    alone, and only if it runs out of memory alone does the file fail. A child that ended because its parent died
    (killed) did not crash on the file either: it is tried again on a parent started again, ``PARENT_LOSSES`` times
    at most, and only past that does a loss count as a crash."""
    crashes = losses = 0
    alone = by_itself = False
    while crashes < 2:
        # a killed LibreOffice leaves a partial file and its lock behind: start clean
        result = workdir / f"attempt-{crashes + losses + int(alone) + 1}" / f"result.{extension}"
        result.parent.mkdir(parents=True, exist_ok=True)
        killed_before = office.oom_kills()
        try:
            waits = office.room.alone(timeout) if alone else office.room.shared(timeout * sandbox.LONG_RUN_SHARE)
            with waits as by_itself:
                return result, office.export(source, result, export_filter, timeout, task_id, **walks,
                                             password=password, sent=sent, crashed=crashes > 0)
        except OfficeTimeout as error:
            raise ConversionFailed(TaskErrorCode.CONVERSION_TIMEOUT,
                                   f"The conversion took longer than {timeout:g} s.") from error
        except LoadFailed as error:
            log.warning("LibreOffice could not convert %s: %s", source, error)
            if (error.full or error.stored) and not alone:  # the sandbox's scratch space is its neighbours' too
                log.warning("Tried %s again with no other file converting", source)
                alone = True
                continue
            if error.full:  # alone, it had the whole space
                room = office.limits.space_mb if by_itself else office.limits.scratch_mb
                raise ConversionFailed(TaskErrorCode.CONVERSION_FAILED, "This file needs more room to convert than "
                                       f"the service gives one conversion ({room} MB).") from error
            if error.stored:
                raise ConversionFailed(TaskErrorCode.CONVERSION_FAILED,
                                       "LibreOffice read this file but could not write its result.") from error
            raise not_loaded(source, opened) from error
        except OfficeCrashed as error:
            if killed_before is not None and (office.oom_kills() or 0) > killed_before:
                if not alone:
                    log.warning("LibreOffice was killed for lack of memory (the service's limit) converting %s: tried "
                                "again with no other file converting", source)
                    alone = True
                    continue
                log.warning("LibreOffice was killed for lack of memory (the service's limit) converting %s%s", source,
                            " alone" if by_itself else "")
                raise ConversionFailed(TaskErrorCode.CONVERSION_FAILED, OUT_OF_MEMORY + (
                    ", the second time with no other file converting." if by_itself else ".")) from error
            if losses < PARENT_LOSSES and office.ended(PARENT_GRACE):
                losses += 1
                log.warning("LibreOffice's parent ended while a child converted %s (%s): tried again on a parent "
                            "started again, not counted as a crash of the file", source, error)
                continue
            crashes += 1
            log.warning("LibreOffice crashed on %s (attempt %d): %s", source, crashes, error)
    raise ConversionFailed(TaskErrorCode.CONVERSION_FAILED, "LibreOffice crashed on this file twice.")


def refused(found: str, family: str | None, kind: str) -> str:
    """Why a file of another family than ``kind``'s is refused, and, where it is a document of another of the legacy
    types (an OOXML or OpenDocument one says which only so), the name that converts it."""
    other = next((each for each in FORMATS.values() if each.family == family and each.kind != kind), None)
    named = f", {'an' if other.name[0] in 'AEIOU' else 'a'} {other.name} document" \
        if other is not None and found != "text" else ""
    return (f"LibreOffice recognises this file as {found}{named}: no {FORMATS[kind].name} document to convert."
            + (f" Send it named .{other.kind} to convert it as one." if named and other is not None else ""))


def not_loaded(source: Path, opened: Opened | None = None, damaged: bool = False) -> ConversionFailed:
    """LibreOffice loaded nothing: password-protected, or damaged beyond its import filters (a ``damaged``
    compound file: the message says so). A protected file ``opened`` with its password: the password was not the
    one (where only LibreOffice could check it), or the file does not open even decrypted."""
    if opened is not None and opened.plain is None and not opened.verified:
        return ConversionFailed(TaskErrorCode.WRONG_PASSWORD, "The Document-Password does not open this file.")
    if opened is not None:
        return ConversionFailed(TaskErrorCode.ENCRYPTION_UNSUPPORTED,
                                "The file is protected in a way that cannot be opened here, even with its password.")
    if precheck.encrypted(source):
        return ConversionFailed(TaskErrorCode.ENCRYPTED_DOCUMENT, precheck.ENCRYPTED)
    return ConversionFailed(TaskErrorCode.CONVERSION_FAILED,
                            "LibreOffice could not read this file." + (f" {mended.DAMAGED}" if damaged else ""))


def check_package(path: Path, kind: str) -> None:
    """Raise ``output_invalid`` unless ``path`` is a zip holding the format's main part whose directory
    promises a sane size. Only the directory is read: nothing is inflated here."""
    try:
        with zipfile.ZipFile(path) as package:
            entries = package.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        log.warning("output of %s is no zip: %r", kind, error)
        raise ConversionFailed(TaskErrorCode.OUTPUT_INVALID, f"{INVALID}: it is no OOXML package.") from error
    names = {entry.filename for entry in entries}
    unpacked = sum(entry.file_size for entry in entries)
    problem = None
    if not {"[Content_Types].xml", FORMATS[kind].main_part} <= names:
        problem = "its main part is missing"
    elif len(entries) > MAX_RESULT_ENTRIES or unpacked > MAX_RESULT_UNCOMPRESSED \
            or unpacked > MAX_RESULT_RATIO * max(1, path.stat().st_size):
        problem = "it would unpack to too much"
    if problem:
        log.warning("output of %s refused: %s (%d entries, %d bytes unpacked)", kind, problem, len(entries),
                    unpacked)
        raise ConversionFailed(TaskErrorCode.OUTPUT_INVALID, f"{INVALID}: {problem}.")


def check_export(result: Path, kind: str, project: bytes | None = None) -> None:
    """The first look at LibreOffice's export, before anything of it is inflated: its zip directory
    (``check_package``), then the source's own VBA ``project`` put in (``vba.insert_project``,
    which copies the parts a chunk at a time within what the directory declared), and the package the client
    gets checked again. Raises ``output_invalid``."""
    check_package(result, kind)
    if project is None:
        return
    try:
        vba.insert_project(result, project, kind)
    except (ooxml.Unreadable, zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as error:
        log.warning("output of %s refused: the VBA project does not go in: %r", kind, error)
        raise ConversionFailed(TaskErrorCode.OUTPUT_INVALID, f"{INVALID}: its parts do not read.") from error
    check_package(result, kind)


def check_explained(result: Path, source: Path, kind: str) -> None:
    """Raise ``output_invalid`` when the result holds what its source does not explain (``unexplained``): an
    external reference other than a hyperlink, a VBA project."""
    try:
        why = unexplained.unexplained(result, source, kind)
    except (ooxml.Unreadable, zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as error:
        why = f"its relationships do not read: {error}"
    if why:
        log.warning("output of %s refused: %s", source, why)
        raise ConversionFailed(TaskErrorCode.OUTPUT_INVALID, f"{INVALID}: {why}.")


def check_content(loaded: Mapping[str, Any], written: Mapping[str, Any] | None, source: Path) -> None:
    """Raise ``output_invalid`` unless the OOXML (``written``: its facts, None if it would not open) holds
    what LibreOffice loaded from the source: every sheet (names cut to Excel's 31 characters), every
    slide, the text."""
    loss = content_lost(loaded, written)
    if loss:
        log.warning("output of %s lost content: %s", source, loss)
        raise ConversionFailed(TaskErrorCode.OUTPUT_INVALID, f"{INVALID}: {loss}.")


def content_lost(loaded: Mapping[str, Any], written: Mapping[str, Any] | None) -> str | None:
    """What the result lacks of the source, in words, or None."""
    if written is None:
        return "it does not open"
    if "sheets" in loaded:
        expected = [name[:SHEET_NAME_LIMIT] for name in loaded["sheets"]]
        if written.get("sheets") != expected:
            return f"sheets {written.get('sheets')} instead of {expected}"
    if "slides" in loaded and written.get("slides") != loaded["slides"]:
        return f"{written.get('slides')} slides instead of {loaded['slides']}"
    if "text" in loaded:
        source, result = Counter(loaded["text"]), Counter(written.get("text", {}))
        lost = sum((source - result).values())
        allowed = TEXT_TOLERANCE_CHARACTERS + int(TEXT_TOLERANCE_RATIO * source.total())
        if lost > allowed and "computed" in loaded and "computed" in written:
            # fields that LibreOffice computes again as it exports (a date, a count of characters, a reference's
            # error text, a table of contents): their results set aside on both sides, the rest must all be there
            lost = sum(((source - Counter(loaded["computed"])) - (result - Counter(written["computed"]))).values())
        if lost > allowed:
            return f"{lost} of {source.total()} characters of text are missing"
    return None
