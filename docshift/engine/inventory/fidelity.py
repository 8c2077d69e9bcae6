"""The fidelity report: what the result's :class:`Inventory` holds against its source's, kind by kind, and what
is lost and where."""

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from docshift.engine.inventory.common import FOLDED, KINDS, LABELS, SHEET_NAME_LIMIT, Inventory, StoredDate, fold

# one loss of the report: {"what", "count", "detail"}
Lost = dict[str, Any]

TEXT_TOLERANCE_CHARACTERS = 8  # the allowance of convert.py's text check: fields computed at load
TEXT_TOLERANCE_RATIO = 0.001
RELATIVE_TOLERANCE = 1e-9  # numbers in cells; LibreOffice writes 15 significant digits


def same_value(source: Any, result: Any) -> bool:
    """Is the result cell's value the source's: numbers within RELATIVE_TOLERANCE, the rest exactly and of the same
    type (text, boolean, error), a CR LF of the text being the one line break of a cell."""
    if isinstance(source, float):
        return isinstance(result, float) and (source == result or math.isclose(source, result,
                                                                                 rel_tol=RELATIVE_TOLERANCE))
    if isinstance(source, bool):
        return isinstance(result, bool) and source == result
    if type(source) is str and type(result) is str and "\r\n" in source:
        # a line break of Windows text (CR LF) is one line break in a cell, as OOXML writes it (LF): Excel shows the
        # same; a lone CR is no line break in Excel, and stays a difference
        return source.replace("\r\n", "\n") == result.replace("\r\n", "\n")
    return type(source) is type(result) and source == result


def _compare_cells(source: Inventory, result: Inventory) -> tuple[int, dict[str, list[Any]]]:
    """(equal cells, {category: [count, first place]}) over the source's cells."""
    shift = 0.0
    if source.date1904 != result.date1904:
        shift = 1462.0 if source.date1904 else -1462.0  # the same day counted from 1904 / from 1900
    equal = 0
    problems: dict[str, list[Any]] = {}

    def note(category: str, sheet: str, ref: bytes) -> None:
        entry = problems.setdefault(category, [0, f"sheet '{sheet}' {ref.decode()}"])
        entry[0] += 1

    # both sides' cells were read (``_cells_report``)
    for sheet, cells in source.cells.items():  # type: ignore[union-attr]
        target = _in_result(source, result, sheet)
        named = target if sheet == source.unnamed_sheet else sheet  # where a difference is said to be
        found = result.cells.get(target, {})  # type: ignore[union-attr]
        formulas = result.formulas.get(target, set())
        for ref, value in cells.items():
            other = found.get(ref)
            if other == value and other.__class__ is value.__class__:  # most cells: no need to look closer
                equal += 1
                continue
            if shift and isinstance(value, StoredDate):
                value = value + shift
            if other is not None and same_value(value, other):
                equal += 1
            elif other is None:
                note("missing", named, ref)
            elif ref in formulas:
                note("formula", named, ref)
            else:
                note("value", named, ref)
    return equal, problems


CELL_DETAILS = {"formula": ("{n} formula result differs from the source; first: {first}",
                            "{n} formula results differ from the source; first: {first}"),
                "value": ("{n} cell value differs from the source; first: {first}",
                          "{n} cell values differ from the source; first: {first}"),
                "missing": ("{n} cell of the source is missing; first: {first}",
                            "{n} cells of the source are missing; first: {first}")}


def report(source: Inventory, result: Inventory, macros_removed: bool = False,
           loaded: Mapping[str, int | None] | None = None) -> dict[str, Any]:
    """The fidelity report of ``result`` (an :class:`Inventory` from ``of_result``) against ``source`` (from
    ``of_source``): ``{"complete": bool, "counts": {what: {"source": n, "result": n}}, "lost": [{"what", "count",
    "detail"}]}``.

    ``counts`` has every kind of ``KINDS`` for the file type, 0 included; ``null`` is a count that could not be
    read. For ``cells``, ``characters``, ``macros`` and ``hyperlinks`` the result figure is how many of the source's
    are in the result (equal cells, characters found, modules with the same code, links on the same slide as the
    source's); for the others it is the result's own count,
    and a loss is a result count below the source's. An unknown source count is not compared (it never makes a
    loss); an unknown result count is a loss when the source holds something.

    Characters may miss up to ``TEXT_TOLERANCE_CHARACTERS`` + ``TEXT_TOLERANCE_RATIO`` of the source's without a
    loss (fields LibreOffice computes at load: dates, page and slide numbers).

    ``macros_removed``: the VBA project was removed on request. That is what was asked for, not a loss of the
    conversion: the modules are listed in ``lost`` with the detail "removed on request", and ``complete`` stays
    true when nothing else is missing.

    ``loaded``: counts of parts LibreOffice loaded (the bridge's ``parts``: embedded objects, charts). A result
    holding fewer is a loss too, where the comparison with the source did not already name one.
    """
    counts: dict[str, dict[str, int | None]] = {}
    lost: list[Lost] = []
    blocking = False
    for what in KINDS[source.kind]:
        have, got = source.counts.get(what), result.counts.get(what)
        asked = 0  # of ``have``, those removed on request
        if what == "images" and source.placed_pictures is not None and got is not None:
            got = result.placed_pictures  # an RTF source's pictures are counted where they show
        if what in ("hyperlinks", "actions", "controls", "shapes") and have is not None and got is not None:
            expected = Counter(source.where.get(what, []))
            if what == "actions" and macros_removed and source.macro_actions:
                # the macros they run were removed on request: so are they, as the modules are
                expected -= Counter(source.macro_actions)
                asked = have - expected.total()
                lost.append({"what": what, "count": asked,
                             "detail": f"{asked} macro action{'s' if asked != 1 else ''} removed on request"})
            # slide by slide (sheet by sheet): more on one make up for none missing on another
            got = expected.total() - (expected - Counter(result.where.get(what, []))).total()
        entries: list[Lost] = []
        if what == "cells":
            got, entries = _cells_report(source, result, have, got)
        elif what == "characters":
            got, entries = _text_report(source, result, have, got)
        elif what == "macros":
            got, entries, removed = _macros_report(source, result, have, got, macros_removed)
            if removed:
                lost.append(removed)
        elif what == "sheets":
            entries = _sheets_report(source, result, have, got)
        elif what == "macro_sheets" and have and got is not None and got < have:
            which = _places(source.where.get(what), result.where.get(what)).removeprefix("; missing: ")
            entries = [_macro_sheets_lost(have, got, which, macros_removed)]
            if macros_removed:  # asked for: named, not a loss
                lost, entries = lost + entries, []
        elif have and got is None:
            entries = [{"what": what, "count": have, "detail": f"the {LABELS[what]} could not be read in the result"}]
        elif have is not None and got is not None and got < have - asked:
            missing = have - asked - got
            verb = "is" if missing == 1 else "are"
            entries = [{"what": what, "count": missing,
                        "detail": f"{missing} of {have} {LABELS[what]} {verb} missing"
                                  f"{_places(source.where.get(what), result.where.get(what))}"}]
        if not entries and what in (loaded or {}):
            entries = _loaded_report(what, loaded[what], got)  # type: ignore[index]  # in it: not None
        counts[what] = {"source": have, "result": got}
        lost += entries
        blocking = blocking or bool(entries)
    return {"complete": not blocking, "counts": counts, "lost": lost}


def _loaded_report(what: str, loaded: int | None, got: int | None) -> list[Lost]:
    """A part LibreOffice loaded and its export dropped, where the source's own count did not show it (unreadable,
    or LibreOffice found more than the legacy file's records name)."""
    if loaded is None or got is None or got >= loaded:
        return []
    missing = loaded - got
    return [{"what": what, "count": missing,
             "detail": f"LibreOffice loaded {loaded} {LABELS[what]}; the result holds {got}"}]


def _places(source: list[str] | None, result: list[str] | None) -> str:
    """Where the missing ones were ("; missing: sheet 'a' B1, slide 3 (2)": a place missing more than one names how
    many) when both sides say where theirs are."""
    if not source or result is None:
        return ""
    missing = [place if count == 1 else f"{place} ({count})"
               for place, count in (Counter(source) - Counter(result)).items()]
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    return f"; missing: {', '.join(missing[:3])}{more}" if missing else ""


def _in_result(source: Inventory, result: Inventory, sheet: str) -> str:
    """The name the result gives the source's sheet ``sheet``: its own, cut to Excel's 31 characters; an Excel 2.x-4.0
    worksheet's one sheet, which has none, the result's one sheet's."""
    if sheet == source.unnamed_sheet and result.sheets is not None and len(result.sheets) == 1:
        return result.sheets[0]
    return sheet[:SHEET_NAME_LIMIT]


def _sheets_report(source: Inventory, result: Inventory, have: int | None, got: int | None) -> list[Lost]:
    """The lost entries of the sheets: names of the source missing in the result."""
    if have is None:
        return []
    if got is None or result.sheets is None:
        return [{"what": "sheets", "count": have, "detail": "the sheets could not be read in the result"}] \
            if have else []
    missing = Counter(_in_result(source, result, name) for name in source.sheets or []) - Counter(result.sheets)
    if not missing:
        return []
    names = ", ".join(f"'{name}'" for name in list(missing.elements())[:5])
    count = missing.total()
    return [{"what": "sheets", "count": count,
             "detail": f"{count} of {have} sheets {'is' if count == 1 else 'are'} missing: {names}"}]


def _cells_report(source: Inventory, result: Inventory, have: int | None,
                  got: int | None) -> tuple[int | None, list[Lost]]:
    """(equal cells, lost entries) of the cells."""
    if have is None or source.cells is None:
        return None, []
    if result.cells is None:
        return None, ([{"what": "cells", "count": have, "detail": "the cells could not be read in the result"}]
                      if have else [])
    equal, problems = _compare_cells(source, result)
    entries = [{"what": "cells", "count": problems[category][0],
                "detail": CELL_DETAILS[category][problems[category][0] != 1].format(
                    n=problems[category][0], first=problems[category][1])}
               for category in ("formula", "value", "missing") if category in problems]
    return equal, entries


def _text_report(source: Inventory, result: Inventory, have: int | None,
                 got: int | None) -> tuple[int | None, list[Lost]]:
    """(characters found, lost entries) of the text."""
    if have is None or source.text is None:
        return None, []
    if result.text is None:
        return None, ([{"what": "characters", "count": have,
                        "detail": "the text could not be read in the result"}] if have else [])
    theirs = unsymbol(result.text)
    if FOLDED in source.text:
        theirs = fold(theirs)
    missing = unsymbol(source.text) - theirs
    count = missing.total()
    found = have - count
    allowed = TEXT_TOLERANCE_CHARACTERS + int(TEXT_TOLERANCE_RATIO * have)
    if count <= allowed:
        return found, []
    sample = "".join(char for char, _ in missing.most_common(10) if char != FOLDED)
    detail = (f"{count} of {have} characters of the text are missing (more than the {allowed} allowed for fields "
              "computed at load)") + (f"; most missing: {sample!r}" if sample else "")
    if missing[FOLDED]:  # characters beyond ASCII of a source whose code page is not known
        detail += f"; {missing[FOLDED]} of them beyond ASCII"
    detail += "".join(f": {place}" for place in source.where.get("characters", []))
    return found, [{"what": "characters", "count": count, "detail": detail}]


def unsymbol(counted: Counter[str]) -> Counter[str]:
    """``counted`` with a symbol font's characters counted as the bytes they stand for. LibreOffice writes text in
    a symbol font (Symbol, Wingdings, a font of musical notes) at U+F020-U+F0FF, as Office does, where a legacy file
    may hold the byte itself (a .ppt's text in such a font: "a" is U+F061 in the result); the glyphs are the same."""
    if not any("\uf020" <= char <= "\uf0ff" for char in counted):
        return counted
    mapped: Counter[str] = Counter()
    for char, n in counted.items():
        mapped[chr(ord(char) - 0xF000) if "\uf020" <= char <= "\uf0ff" else char] += n
    return mapped


def normal_code(code: str) -> list[str]:
    """VBA code as compared: its lines without line-end and trailing-space differences, and without ``Attribute``
    lines (module and procedure metadata: LibreOffice's project drops procedure descriptions, shortcut keys and
    control declarations, the code stays the same)."""
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [line.rstrip() for line in lines if line.strip() and not line.startswith("Attribute ")]


def _macros_report(source: Inventory, result: Inventory, have: int | None, got: int | None,
                   removed_on_request: bool) -> tuple[int | None, list[Lost], Lost | None]:
    """(modules kept, blocking losses, the "removed on request" entry or None)."""
    if have is None or source.macros is None:
        return got, [], None
    if removed_on_request:
        entry = {"what": "macros", "count": have,
                 "detail": f"{have} VBA module{'s' if have != 1 else ''} removed on request"} if have else None
        return got, [], entry
    if result.macros is None:
        return None, ([{"what": "macros", "count": have, "detail": "the VBA modules could not be read in the result"}]
                      if have else []), None
    missing = [name for name in source.macros if name not in result.macros]
    changed = [name for name in source.macros if name in result.macros
               and normal_code(source.macros[name]) != normal_code(result.macros[name])]
    entries: list[Lost] = []
    if missing:
        entries.append({"what": "macros", "count": len(missing),
                        "detail": f"{len(missing)} of {have} VBA modules are missing: {', '.join(missing[:10])}"})
    if changed:
        names = ", ".join(changed[:10])
        entries.append({"what": "macros", "count": len(changed),
                        "detail": f"the code of {len(changed)} of {have} VBA modules differs: {names}"})
    return have - len(missing) - len(changed), entries + _project_report(source.project, result.project), None


def _macro_sheets_lost(have: int, got: int, places: str, removed_on_request: bool) -> Lost:
    """The entry of Excel 4.0 macro sheets that the result holds as worksheets (``places``: which): LibreOffice's
    export writes each as one, its macro functions as errors (``#NAME?``)."""
    missing = have - got
    if removed_on_request:
        return {"what": "macro_sheets", "count": missing, "detail": f"{missing} Excel 4.0 macro sheet"
                f"{'s' if missing != 1 else ''} removed on request, each now a worksheet without macros: {places}"}
    return {"what": "macro_sheets", "count": missing,
            "detail": f"{missing} of {have} Excel 4.0 macro sheets {'is' if missing == 1 else 'are'} a worksheet "
                      f"in the result, the macros not kept (LibreOffice writes no macro sheet): {places}"}


UNPRINTABLE = dict.fromkeys(range(32))


def _project_report(source: Any, result: Any) -> list[Lost]:
    """The lost entries of a .doc's or .xls's VBA project storage (``vbaproject.Storage`` on both sides): carried
    whole when every stream and storage of the source's is in the result's vbaProject.bin byte for byte; else the
    result holds LibreOffice's rewrite, and what that lost is named. A signature that was left out is named too."""
    if source is None:
        return []
    entries: list[Lost] = []
    if source.signed:
        entries.append({"what": "macros", "count": 1, "detail": "the digital signature of the VBA project was "
                                                                 "removed: a signature cannot survive a new container"})
    if source.error is not None:
        return entries + [{"what": "macros", "count": 1,
                           "detail": f"the VBA project storage of the source could not be read ({source.error}): the "
                                     "result holds LibreOffice's rewrite of its modules, whose class modules, "
                                     "UserForms, references and properties may differ"}]
    if result is None:  # no project in the result at all: the modules' own entry says what is missing
        return entries
    theirs = result.streams if result.error is None else {}
    differ = sorted(path for path, data in source.streams.items() if theirs.get(path) != data)
    storages = result.storages if result.error is None else {}
    # the VBA storage's streams are compared above; the others are designer storages: a UserForm's controls
    forms = sorted(path for path, clsid in source.storages.items() if path != "VBA" and storages.get(path) != clsid)
    if not differ and not forms:
        return entries
    differ = [path.translate(UNPRINTABLE) for path in differ]  # "\x01CompObj" and the like, named as Office does
    lost = f"; UserForm and designer storages lost: {', '.join(forms[:10])}" if forms else ""
    return entries + [{"what": "macros", "count": len(differ) + len(forms),
                       "detail": f"the VBA project is LibreOffice's rewrite, not the source's own: {len(differ)} of "
                                 f"{len(source.streams)} streams of its storage are missing or differ "
                                 f"({', '.join(differ[:10])}){lost}"}]
