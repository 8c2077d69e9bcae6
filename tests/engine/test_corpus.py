"""The compatibility corpus (``../shared/corpus``) through the worker's conversion path, against a cold
``soffice --convert-to`` of the same LibreOffice, computed in this session (``bench/reference.py``).

- a file the cold soffice converts into a valid document SUCCEEDS, and our result holds the same
  sheets, slides and text as the cold one; plain text is the one exception (the SPEC refuses it, while
  a cold soffice imports anything as text);
- an encrypted file (msoffcrypto-tool says so, and the cold soffice makes nothing of it) FAILS
  ``encrypted_document``;
- a damaged compound file that LibreOffice refuses as it is (POI's fuzzed files) SUCCEEDS from its salvaged copy
  where the document's own stream reads whole: ours then holds what a cold soffice makes of that copy, and the
  report names the streams left out;
- every other file FAILS, within the conversion timeout.
"""

import importlib.util
import json
import random
import sys
import zipfile

import olefile
import pytest
import requests
from conftest import ROOT, post_file, register
from msoffcrypto import OfficeFile

from docshift.engine import Engine, inventory, mended, stored, vba
from docshift.engine.convert import content_lost
from docshift.formats import FORMATS
from docshift.storage import tasks
from docshift.tasks import conversion, maintenance
from docshift.web import create_app
from docshift.web.context import get_db, get_store

CORPUS = ROOT.parent / "shared" / "corpus"
TIMEOUT = 60  # 42474-2.ppt takes 15 s of CPU on a slow hour; nothing in the corpus needs more
sys.path.append(str(ROOT / "bench"))  # reference.py's own import: its neighbour priority.py
_spec = importlib.util.spec_from_file_location("docshift_bench_reference", ROOT / "bench" / "reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)

FILES = sorted(p for p in CORPUS.glob("*/*") if p.suffix.lower() in (".doc", ".xls", ".ppt"))


@pytest.fixture(scope="module")
def cold():
    runs = reference.Cold(FILES, TIMEOUT)
    yield runs
    runs.close()


@pytest.fixture(scope="module")
def corpus_app(s3, tmp_path_factory, cold):
    app = create_app({"TESTING": True, "DATA_DIR": str(tmp_path_factory.mktemp("corpus")),
                      "S3_BUCKET": f"t-corpus-{random.randrange(10**6)}", "CONVERSION_TIMEOUT": TIMEOUT})
    with app.app_context():
        get_store().ensure_bucket()
    client = app.test_client()
    return app, client, register(client, app, f"corpus-{random.randrange(10**9)}", plan="business")


def encrypted(path):
    try:
        with open(path, "rb") as f:
            return OfficeFile(f).is_encrypted()
    except Exception:
        return False


def taken_for_text(path, cold_content):
    """Whether the cold soffice, too, read the file as text: it is neither an OLE2 compound file nor a
    zip, or Calc's text import made of it its one sheet, named after the file."""
    return (not olefile.isOleFile(str(path)) and not zipfile.is_zipfile(path)) or \
        cold_content.get("sheets") == [path.stem[:31]]


def check_salvaged(path, tmp_path, ours, cold_content, fidelity):
    """A damaged compound file converted from its salvaged copy (``mended.py``): a cold soffice made nothing of the
    file as it is, or took it for text; ours holds what a cold soffice makes of the same copy, and the report is
    the one counted independently, with the streams left out named."""
    assert mended.damaged(path)
    assert cold_content is None or taken_for_text(path, cold_content)
    kind = reference.kind(path)
    (tmp_path / "copy").mkdir()
    copy = mended.copy(kind, path, "refused", lambda: None, tmp_path / "copy")
    runs = reference.Cold([copy.path], TIMEOUT)
    try:
        theirs, _ = runs.result(copy.path)
    finally:
        runs.close()
    assert theirs is not None and content_lost(theirs, ours) is None, (theirs, ours)
    independent = inventory.report(inventory.of_source(path, kind), inventory.of_result(tmp_path / "ours", kind))
    assert fidelity == mended.report(independent, copy.left_out)


# parts a plain soffice keeps that ours must keep too (cells, characters and macros are checked against the source)
PARTS = ("sheets", "slides", "notes", "images", "embedded_objects", "charts", "comments", "headers_footers")


def check_fidelity(path, result, cold_result, fidelity):
    """Our result keeps every part the cold soffice's keeps, every VBA module (olevba) and every stored cell
    value (xlrd), or the report names the difference; a report that says complete has nothing lost."""
    kind = reference.kind(path)
    source, ours, theirs = (inventory.of_source(path, kind), inventory.of_result(result, kind),
                            inventory.of_result(cold_result, kind))
    for what in PARTS:
        if theirs.counts.get(what) is not None:
            assert (ours.counts.get(what) or 0) >= theirs.counts[what], (what, ours.counts, theirs.counts)
    modules = vba.modules(path)
    if modules:
        assert set(vba.modules(result)) == set(modules), "every VBA module is kept"
    if kind == "xls":  # less the formulas whose stored results no program calculated (``stored.settled``)
        source = stored.settled(path, source, ours)[0]
    independent = inventory.report(source, ours)
    assert fidelity == independent
    if source.counts.get("cells"):
        cells = fidelity["counts"]["cells"]
        assert cells["result"] == cells["source"] or any(loss["what"] == "cells" for loss in fidelity["lost"])
    assert fidelity["complete"] == (not fidelity["lost"])


def test_the_corpus_is_there():
    assert len(FILES) >= 250, f"the compatibility corpus is missing or short at ../shared/corpus ({len(FILES)} files)"


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_corpus_file(path, corpus_app, cold, office, tmp_path):
    app, client, key = corpus_app
    response = post_file(client, key, path.read_bytes(), path.name)
    assert response.status_code == 202, response.get_data(as_text=True)
    task_id = response.get_json()["task_id"]
    with app.app_context():
        conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], Engine(office), maintenance.worker_name())
        task = tasks.get_task(get_db(), task_id)
        ours = None
        if task.status == "SUCCEEDED":
            url = get_store().presign_result(task.result_key, "attachment", FORMATS[reference.kind(path)].target,
                                             60)
            (tmp_path / "ours").write_bytes(requests.get(url, timeout=30).content)
            ours = reference.content(tmp_path / "ours", reference.kind(path))
    outcome = (task.status, task.error_code, task.detected_format)
    expected, _ = cold.result(path)
    fidelity = json.loads(task.fidelity) if task.fidelity else {"lost": []}
    if any(loss["what"] == "streams" for loss in fidelity["lost"]):
        check_salvaged(path, tmp_path, ours, expected, fidelity)
    elif expected is not None and outcome == ("FAILED", "unsupported_content", "text"):
        assert taken_for_text(path, expected), f"LibreOffice took a document for text: {outcome}"
    elif expected is not None:
        assert task.status == "SUCCEEDED", f"a cold soffice converts it: {outcome} {task.error_message}"
        assert ours is not None and content_lost(expected, ours) is None, (content_lost(expected, ours), ours)
        check_fidelity(path, tmp_path / "ours", cold.result(path)[1], fidelity)
    elif encrypted(path):
        assert outcome[:2] == ("FAILED", "encrypted_document"), outcome
    else:
        assert task.status == "FAILED", f"a cold soffice makes nothing of it, but: {outcome}"
