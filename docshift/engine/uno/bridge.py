"""One file through LibreOffice, driven over UNO in the process that converts it; run by ``forkit.py``.

Not imported by docshift itself: it needs the ``uno`` module of Debian's python3-uno. The forkit's parent imports
it once LibreOfficeKit runs there, where pyuno reaches that process's own office, and each child forked from it
answers its one request with JSON lines on stdout (the job's socket):

    {"name": the source's file name, "filter": export filter name, "parts": true | false | "ask",
     "shadows": true | false | "ask" (a presentation's shadowed text, ``shadows.py``; false when not given),
     "password": the Password load property of a protected source (optional), "crashed": true on the retry of a
     file whose child crashed (a text is loaded with no view, a presentation's masters get themes: ``masters.py``)}
    -> {"ok": true, "facts": report} | {"ok": false, "error": "load_failed" | "store_failed" | "crashed", "detail": ...,
                                        "full": whether the scratch space was full as the store failed}

With ``"parts": "ask"`` or ``"shadows": "ask"``, a file that loads is answered ``{"loaded": true}`` first, and the
child waits for ``{"parts": true | false, "shadows": true | false}`` (whether to count the loaded parts, ``facts``,
and to read the shadowed text) before it goes on.

LibreOffice decides what the file is: its deep type detection names the type and, through the type's import filter,
the document family (an MHT page is unpacked first: ``webarchive.py``). The report says:

    {"type": LibreOffice's type name ("" when detection aborted, "web_archive" for MHT), "media_type": the type's,
     "family": "writer" | "calc" | "impress" | "draw" | "other",
     "outcome": "converted" | "refused" | "not_loaded",
     "loaded": facts of the source (the worker reads the OOXML's own from its XML: ``ooxml.py``), with its
               "shadowed" text when asked}

``refused``: plain text, or a family other than the one the export filter writes; such a file is never loaded (random
bytes loaded as text can kill soffice). ``not_loaded``: detection aborted (an encrypted OOXML package) or the import
filter gave nothing back (password-protected or damaged). Facts are what the output checks compare: every sheet name
(chart sheets are sheets here, a scenario's sheet is not), the slide count, the body text's characters without
whitespace, counted per character.

``self_test`` runs ``selftest.py`` in the parent, on the kinds the worker sends (``formats.self_test_kinds``), and
converts each file it made as above: what the children inherit warm.
"""

import contextlib
import functools
import json
import os
import shutil
import sys
import time
from collections import Counter

import counts
import excelsheet
import masters
import selftest
import shadows
import uno
import webarchive
from com.sun.star.beans import PropertyValue

# UpdateDocMode NO_UPDATE: linked content (images, OLE links, external data) is never refreshed;
# MacroExecutionMode NEVER_EXECUTE: no macro runs, whatever the document asks
LOAD = {"Hidden": True, "ReadOnly": True, "UpdateDocMode": 0, "MacroExecutionMode": 0, "Silent": True}

# a filter's DocumentService -> the family the worker compares; the only list of names here
FAMILIES = {
    "com.sun.star.text.TextDocument": "writer",
    "com.sun.star.text.WebDocument": "writer",  # Word-saved HTML loads as Writer/Web
    "com.sun.star.text.GlobalDocument": "writer", "com.sun.star.sheet.SpreadsheetDocument": "calc",
    "com.sun.star.presentation.PresentationDocument": "impress", "com.sun.star.drawing.DrawingDocument": "draw",
}
PLAIN_TEXT = "generic_Text"
# the free scratch space under which a store failed for want of room: a share of it, or a few writes' worth (LibreOffice
# may have removed the temp file it was writing)
FULL_BELOW, FULL_UNDER = 0.02, 8 << 20
IMPORT = 0x1  # a filter's Flags bit: it can import

step = "starting"  # what the bridge was doing, for the detail of a crash


def props(**values):
    return tuple(PropertyValue(Name=name, Value=value) for name, value in values.items())


def struct(kind, **values):
    """A UNO struct of type ``kind`` with ``values``."""
    made = uno.createUnoStruct(kind)
    for name, value in values.items():
        setattr(made, name, value)
    return made


def service(name):
    """A new instance of the UNO service ``name``."""
    context = uno.getComponentContext()
    return context.ServiceManager.createInstanceWithContext(name, context)


def graphic(url):
    """The picture of the file at ``url``, loaded into the document (not linked); None when none is read."""
    try:
        return service("com.sun.star.graphic.GraphicProvider").queryGraphic(props(URL=url))
    except Exception:  # IOException, IllegalArgumentException: a picture LibreOffice cannot read is reported missing
        return None


def as_dict(values):
    return {value.Name: value.Value for value in values}


def reply(**message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class LibreOffice:
    """The desktop plus LibreOffice's type and filter registries, with the families cached."""

    def __init__(self, context):
        self.manager = manager = context.ServiceManager
        self.desktop = manager.createInstanceWithContext("com.sun.star.frame.Desktop", context)
        self.types = manager.createInstanceWithContext("com.sun.star.document.TypeDetection", context)
        self.filters = manager.createInstanceWithContext("com.sun.star.document.FilterFactory", context)
        self.families = {}  # filter name -> family, or None for a filter without a document service
        self.importers = {}  # type name -> names of the filters that import it
        self.media_types = {}  # type name -> its media type

    def filter_family(self, name):
        if name not in self.families:
            service = ""
            if name and self.filters.hasByName(name):
                service = as_dict(self.filters.getByName(name)).get("DocumentService", "")
            self.families[name] = FAMILIES.get(service, "other") if service else None
        return self.families[name]

    def family(self, type_name, chosen_filter):
        """The family of what a detected type loads as. The filter detection chose wins (it is the
        one loading uses: HTML named .xls goes to Calc's web query), then the type's preferred
        filter, then any import filter registered for the type: that walk of the whole filter registry cost a
        fresh LibreOffice's bridge 0.07 s of CPU per type, so it comes last, only when the first two say nothing."""
        found = self.filter_family(chosen_filter)
        if not found and type_name and self.types.hasByName(type_name):
            found = self.filter_family(as_dict(self.types.getByName(type_name)).get("PreferredFilter", "")) or \
                next(filter(None, map(self.filter_family, self.import_filters(type_name))), None)
        return found or "other"

    def import_filters(self, type_name):
        if type_name not in self.importers:
            found = {name: as_dict(self.filters.getByName(name)) for name in self.filters.getElementNames()}
            self.importers[type_name] = [name for name, entry in found.items()
                                         if entry.get("Type") == type_name and entry.get("Flags", 0) & IMPORT]
        return self.importers[type_name]

    def detect(self, path):
        """Deep type detection: the report's type, family and media type, and whether it aborted."""
        descriptor = props(URL=uno.systemPathToFileUrl(os.path.abspath(path)))
        # pyuno hands the in/out descriptor back as the second item
        type_name, descriptor = self.types.queryTypeByDescriptor(descriptor, True)
        found = as_dict(descriptor)
        if found.get("Aborted"):  # an encrypted OOXML package; the type it names is bogus
            return {"type": "", "family": "other", "media_type": ""}, True, ""
        family = self.family(type_name, found.get("FilterName", ""))
        return {"type": type_name, "family": family, "media_type": self.media_type(type_name)}, False, \
            found.get("FilterName", "")

    def media_type(self, type_name):
        """The type's media type (a registry lookup of two calls over the bridge, made once per type)."""
        if type_name not in self.media_types:
            known = type_name and self.types.hasByName(type_name)
            self.media_types[type_name] = as_dict(self.types.getByName(type_name)).get("MediaType", "") if known else ""
        return self.media_types[type_name]

    def load(self, path, import_filter="", password=None, viewed=True):
        """Load ``path``; with the ``import_filter`` deep detection chose, loading does not detect it again. A
        protected file opens with its ``password`` (the MediaDescriptor's Password): without an interaction
        handler, a wrong one loads nothing. A text not ``viewed`` is its filter's DocumentService alone, loaded with no
        frame or view (``XLoadable``), so no layout is computed (Writer's crashed on some files: a section's footnotes);
        its export then leaves out the text's pictures and objects, which the report names."""
        url = uno.systemPathToFileUrl(os.path.abspath(path))
        chosen = {"FilterName": import_filter} if import_filter else {}
        if password:
            chosen["Password"] = password
        found = {} if viewed or not import_filter else as_dict(self.filters.getByName(import_filter))
        if FAMILIES.get(found.get("DocumentService")) != "writer":
            return self.desktop.loadComponentFromURL(url, "_blank", 0, props(**LOAD, **chosen))
        document = self.manager.createInstance(found["DocumentService"])
        document.load(props(URL=url, **LOAD, **chosen))
        return document


def facts(document, walk=True):
    """What a loaded document holds, for the worker's no-silent-loss checks. ``parts`` counts the embedded objects
    and charts LibreOffice loaded (``None`` when it cannot tell), so that an export that drops them shows even where
    the legacy file's own count cannot be read; only when ``walk`` (the worker asks where it could not count them
    itself): that walks the sheets' or slides' shapes, two calls over the bridge each."""
    found, parts = {}, None
    if document.supportsService("com.sun.star.sheet.SpreadsheetDocument"):
        sheets = document.getSheets()
        # a scenario of Excel's Scenario Manager is a sheet of its own in Calc, which the .xlsx export writes as the
        # scenarios of the sheet it changes: no sheet of the result
        found = {"sheets": [sheet.getName() for sheet in map(sheets.getByIndex, range(sheets.getCount()))
                            if not sheet.getIsScenario()]}
        parts = functools.partial(counts.sheet_parts, document, sheets)
    elif document.supportsService("com.sun.star.presentation.PresentationDocument"):
        pages = document.getDrawPages()
        found = {"slides": pages.getCount()}
        parts = functools.partial(counts.slide_parts, document, pages)
    elif document.supportsService("com.sun.star.text.TextDocument") or \
            document.supportsService("com.sun.star.text.WebDocument"):
        # whitespace is layout, not content: the OOXML export turns some of it into indents
        found = {"text": Counter("".join(document.getText().getString().split())) - counts.note_marks(document)}
        with contextlib.suppress(Exception):  # unknown: the text is checked as it is
            found["computed"] = counts.computed(document)
        parts = functools.partial(counts.text_parts, document)
    if walk and parts is not None:
        try:
            found["parts"] = parts()
        except Exception:  # the document does not say: None, a count is never made up
            found["parts"] = None
    return found


def close(document):
    with contextlib.suppress(Exception):
        document.close(True)


def answers(desktop, error=None):
    """False once LibreOffice is gone (crashed, killed) or hurt: a RuntimeException such as std::bad_alloc leaves a
    process that fails whatever it is given next."""
    if error is not None and ("RuntimeException" in type(error).__name__ or "bad_alloc" in str(error)):
        return False
    try:
        desktop.getCurrentComponent()
        return True
    except Exception:
        return False


_office = None  # this process's LibreOffice, once ``prepare`` made it


def prepare():
    """This process's LibreOffice: its desktop, type and filter registries, made while the child waits for its file
    (they cost the first file of a fresh process otherwise)."""
    global _office
    if _office is None:
        _office = LibreOffice(uno.getComponentContext())
    return _office


def convert(request, source_fd, result_fd):
    """Convert as ``request`` says, the source read from ``source_fd`` and the result written to ``result_fd``;
    returns the answer. LibreOffice writes a link to a file beside the document relative to where it stores the
    result: the source is loaded from a copy in this child's own scratch dir (its cwd), named as the customer named
    it (``request["name"]``), and the result is stored beside it, so that such a link names the file beside the
    result (as a plain ``soffice --convert-to`` in place writes it)."""
    name = os.path.basename(request.get("name") or "") or "source"
    local = os.path.abspath(name)
    stored = os.path.abspath("result-" + os.path.basename(request.get("target_name") or "result"))
    try:
        try:
            with open(source_fd, "rb", closefd=False) as given, open(local, "wb") as copy:
                shutil.copyfileobj(given, copy, 1 << 20)
        except OSError as error:  # the sandbox's scratch space is full: nothing was loaded
            return {"ok": False, "error": "load_failed", "detail": f"copying the source: {error}", "full": True}
        # None but for an MHT page, or an HTML table under .xls that carries Excel's marks of its cells
        archive = webarchive.unpack(local, os.path.abspath("web-archive")) or \
            webarchive.html_workbook(local, os.path.abspath("web-archive"))
        return _convert(prepare(), local, stored, result_fd, request, archive)
    finally:
        # the customer's file and its result leave the sandbox before the answer, whatever it says: the worker may
        # hand the next file to another child at once, which runs as the same user and shares the room
        for path in (stored, local):
            with contextlib.suppress(OSError):
                os.unlink(path)
        shutil.rmtree("web-archive", ignore_errors=True)


def _convert(office, source, stored, result_fd, request, archive=None):
    """The answer to ``request``; an MHT ``archive`` is converted from its pages (``webarchive.py``). The document it
    loaded is left open: the child exits with it."""
    global step
    began = time.monotonic()
    seconds = {}  # of each step, for the log and the benchmarks

    def took(name):
        nonlocal began
        now = time.monotonic()
        seconds[name], began = round(now - began, 4), now

    step = "detecting the type"
    detected, aborted, import_filter = office.detect(archive.page if archive else source)
    if archive and archive.mht:
        detected.update(type=webarchive.TYPE, archive=archive.facts())
    took("detect")
    report = dict(detected, outcome="not_loaded", loaded=None, seconds=seconds)
    if aborted:
        return {"ok": True, "facts": report}
    if detected["type"] == PLAIN_TEXT or detected["family"] != office.filter_family(request["filter"]):
        return {"ok": True, "facts": dict(report, outcome="refused")}
    step = "loading the source"
    try:
        document = office.load(archive.page if archive else source, import_filter, request.get("password"),
                               viewed=not request.get("crashed"))
        if archive and (archive.names or archive.given()) and hasattr(document, "getSheets"):
            # a workbook of its sheets' pages, or one whose sheets are given more: a new document, which can take it
            document = webarchive.gather(office, document, archive, import_filter, props)
            excelsheet.place(document, archive.placed, graphic, struct)
            excelsheet.number_formats_to(document, archive.formatted, struct, service)
            excelsheet.notes_to(document, archive.noted, struct)
    except Exception as error:  # IllegalArgumentException, IOException: not loadable
        if not answers(office.desktop, error):
            raise
        return {"ok": False, "error": "load_failed", "detail": f"{type(error).__name__}: {error}"}
    took("load")
    if document is None:  # the import filter said no: password-protected or damaged
        return {"ok": True, "facts": report}
    try:
        walk, shadowed = request.get("parts", True), request.get("shadows", False)
        if "ask" in (walk, shadowed):  # the worker decides from the legacy file's records, read while this loaded
            step = "waiting for the worker"
            reply(loaded=True)
            decided = json.loads(sys.stdin.readline())
            walk, shadowed = decided["parts"], decided.get("shadows", False)
        step = "reading the source"
        report["loaded"] = facts(document, walk=walk is not False)
        took("facts")
        if shadowed and hasattr(document, "getMasterPages"):
            step = "reading the shadowed text"
            report["loaded"]["shadowed"] = shadows.shadowed(document)
            took("shadows")
        if request.get("crashed") and hasattr(document, "getMasterPages"):  # a presentation whose export crashed
            step = "giving each master a theme of its own"
            report["masters_given_own_themes"] = masters.separate(document)
        step = "storing the result"
        document.storeToURL(uno.systemPathToFileUrl(stored), props(FilterName=request["filter"], Overwrite=True))
        with open(stored, "rb") as result, open(result_fd, "wb", closefd=False) as given:
            shutil.copyfileobj(result, given, 1 << 20)  # the worker's file
        took("store")
    except Exception as error:
        if not answers(office.desktop, error):
            raise
        storing = step == "storing the result"  # else the source's facts could not be read
        return {"ok": False, "error": "store_failed" if storing else "load_failed",
                "detail": f"{type(error).__name__}: {error}", "full": storing and scratch_full()}
    # the process that converted it (its own, in the sandbox's PID namespace), and whether it made a view of it
    report.update(outcome="converted", pid=os.getpid(), viewed=document.getCurrentController() is not None)
    return {"ok": True, "facts": report}


def scratch_full(where="."):
    """Whether this child's scratch space (its cwd, in memory) is all but full, as after a store that lacked room."""
    try:
        room = os.statvfs(where)
    except OSError:
        return False
    return room.f_bavail * room.f_frsize < max(room.f_blocks * room.f_frsize * FULL_BELOW, FULL_UNDER)


def self_test(directory, kinds):
    """The self-test (``selftest.py``) in ``directory``, then each file it made converted as a customer's is (type
    detection, load, facts, export): run by the forkit's parent, whose children inherit what this built. Every
    document it opened is closed again. Returns the self-test's answer."""
    office = prepare()
    answer = selftest.run(office.desktop, directory, kinds, props)
    for family, _, name, ooxml in kinds if answer.get("ok") else ():
        with open(os.path.join(directory, name), "rb") as given, \
                open(os.path.join(directory, "converted"), "wb") as stored:
            done = convert({"name": name, "filter": ooxml, "parts": True, "target_name": name + "x"},
                           given.fileno(), stored.fileno())
        if not done.get("ok") or done["facts"].get("outcome") != "converted":
            answer = {"ok": False, "detail": f"{name} ({family}) did not convert: {done}"}
            break
    components = office.desktop.getComponents().createEnumeration()
    while components.hasMoreElements():
        close(components.nextElement())
    # what the files changed in the configuration written now: the writer's thread is idle when children fork
    uno.getComponentContext().getValueByName("/singletons/com.sun.star.configuration.theDefaultProvider").flush()
    return answer


def serve(request, source_fd, result_fd):
    """Answer ``request`` in a child of the forkit (``forkit.py``): a conversion. Returns the exit status."""
    global step
    try:
        reply(**convert(request, source_fd, result_fd))
        return 0
    except Exception as error:  # LibreOffice failed under this child: the worker sees it crashed
        reply(ok=False, error="crashed", detail=f"{step}: {type(error).__name__}: {error}")
        return 1
