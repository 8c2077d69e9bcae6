"""The reference a compatibility run is judged against: a cold ``soffice --convert-to`` of the same
LibreOffice, and what an OOXML package holds (sheet names, slide count, text).

Used by ``bench/corpus.py`` and by ``tests/engine/test_corpus.py``, so a change of LibreOffice moves the
reference with it.
"""

import os
import queue
import shutil
import signal
import subprocess
import tempfile
import xml.etree.ElementTree as ElementTree
import zipfile
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from priority import same_priority

from docshift.formats import FORMATS

MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
PRESENTATION = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
WORD = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
BATCH = 12  # files per cold soffice: its start-up dominates, and a batch cut short is redone file by file


def kind(path):
    return Path(path).suffix.lower()[1:]


def content(path, kind_):
    """What an OOXML package holds, in the shape of the engine's facts; None if it is not a valid one."""
    try:
        with zipfile.ZipFile(path) as package:
            if "[Content_Types].xml" not in package.namelist():
                return None
            with package.open(FORMATS[kind_].main_part) as main:
                root = ElementTree.parse(main).getroot()
    except (KeyError, OSError, zipfile.BadZipFile, ElementTree.ParseError):
        return None
    if kind_ == "xls":
        return {"sheets": [sheet.get("name") for sheet in root.iter(f"{MAIN}sheet")]}
    if kind_ == "ppt":
        return {"slides": sum(1 for _ in root.iter(f"{PRESENTATION}sldId"))}
    text = "".join(node.text or "" for node in root.iter(f"{WORD}t"))
    return {"text": Counter("".join(text.split()))}


class Cold:
    """Cold ``soffice --convert-to`` runs of many files, ``workers`` at a time, in the background;
    ``result(path)`` waits for one file's output (or None). Each soffice is a process of its own; the profile
    its worker's first run made is used again by the next (a profile made anew costs each start 1.2 s of its
    2 s), and made anew after a run that did not end well."""

    def __init__(self, paths, timeout, workers=2):
        self.work = Path(tempfile.mkdtemp(prefix="cold-soffice-"))
        self.timeout = timeout
        self.profiles = queue.SimpleQueue()
        for n in range(workers):
            self.profiles.put(self.work / f"profile-{n}")
        self.pool = ThreadPoolExecutor(workers)
        self.futures = {}
        for batch in self.batches(paths):
            future = self.pool.submit(self.convert, batch)
            for path in batch:
                self.futures[path] = future

    @staticmethod
    def batches(paths):
        """Batches of one kind and distinct stems (soffice names outputs by the stem), in order."""
        pending = defaultdict(list)
        for path in paths:
            batch = pending[kind(path)]
            if any(p.stem == path.stem for p in batch):
                yield batch
                batch = pending[kind(path)] = []
            batch.append(path)
            if len(batch) == BATCH:
                yield batch
                pending[kind(path)] = []
        yield from (batch for batch in pending.values() if batch)

    def run(self, paths, outdir):
        extension, export_filter = FORMATS[kind(paths[0])].target, FORMATS[kind(paths[0])].export_filter
        profile = self.profiles.get()
        argv = ["soffice", "--headless", "--norestore", f"-env:UserInstallation={profile.as_uri()}",
                "--convert-to", f"{extension}:{export_filter}", "--outdir", str(outdir), *map(str, paths)]
        # at the CPU priority of docshift's LibreOffice (nice 10): at nice 0 the two cold ones took the cores from
        # it, and a deck that takes 10 s alone ran past the engine's 60 s beside them
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True, preexec_fn=same_priority)
        complete = False
        try:
            complete = process.wait(self.timeout * len(paths)) == 0
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:  # soffice is a launcher: its soffice.bin is in the same process group
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
            if not complete:
                shutil.rmtree(profile, ignore_errors=True)
            self.profiles.put(profile)
        return complete, {path: outdir / f"{path.stem}.{extension}" for path in paths}

    def convert(self, batch):
        outdir = Path(tempfile.mkdtemp(dir=self.work))
        complete, outputs = self.run(batch, outdir)
        if not complete and len(batch) > 1:  # a file that crashed or stalled soffice is tried on its own
            for path, output in outputs.items():
                if content(output, kind(path)) is None:
                    outputs[path] = self.convert([path])[path]
        return outputs

    def result(self, path):
        """(content of the cold output or None, the output's path)."""
        output = self.futures[path].result()[path]
        return content(output, kind(path)), output

    def close(self):
        self.pool.shutdown(cancel_futures=True)
        shutil.rmtree(self.work, ignore_errors=True)


def legacy_files(folders):
    """The .doc, .xls and .ppt files of ``folders``, in order."""
    return [path for folder in folders for path in sorted(Path(folder).iterdir())
            if path.suffix.lower() in (".doc", ".xls", ".ppt")]


def both(files, name, timeout):
    """Each of ``files`` converted by a cold ``soffice`` and by the worker's engine (a fresh child of the
    preinitialised parent in its sandbox, the mends, the checks): (path, kind, the plain result's content or None,
    the plain result, docshift's result or None, docshift's error code or None)."""
    from docshift.engine import Engine, Forkit
    from docshift.errors import ConversionFailed

    cold = Cold(files, timeout)
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    engine = Engine(Forkit(work / "engine", name=name))
    engine.start()
    try:
        for number, path in enumerate(files):
            plain_content, plain = cold.result(path)
            try:
                ours, code = engine.convert(path, kind(path), work / f"job-{number}", timeout).path, None
            except ConversionFailed as failure:
                ours, code = None, failure.code
            yield path, kind(path), plain_content, plain, ours, code
    finally:
        engine.close()
        cold.close()
