"""What docshift carries over a folder of legacy files that a plain ``soffice --convert-to`` does not: each file's own
VBA project, and the protected files, converted with their password.

- VBA projects: the .doc/.xls/.ppt files in which oletools finds a VBA project; a result carries it whole when every
  stream under the source's project storage (a .doc's ``Macros``, an .xls's ``_VBA_PROJECT_CUR``, the compound file
  of a .ppt's VbaProjectStg record) is in the result's vbaProject.bin byte for byte. Results: a plain cold
  ``soffice --convert-to docm|xlsm|pptm`` (LibreOffice's rewrite), and the worker's engine.
- Protected files: those msoffcrypto-tool calls encrypted. Each goes through the engine with the passwords the
  corpus's files are known by (POI's tests), in turn until one is not ``wrong_password``; its result must be
  encrypted, open with that password and not with another. Without one it must fail ``encrypted_document``.
  A plain ``soffice --convert-to`` cannot be given a password.

The engine is the worker's (a warm LibreOffice in its sandbox), as in ``bench/corpus.py``; no running docshift is
needed. Embedded objects kept: ``bench/objects.py``.

    .venv/bin/python bench/carried.py [FOLDER]        # default ../shared/corpus
"""

import argparse
import io
import subprocess
import tempfile
import zipfile
from collections import defaultdict
from pathlib import Path

import msoffcrypto
import olefile
from oletools.olevba import VBA_Parser

from docshift.engine import Engine, Forkit, cfb, vba, vbaproject
from docshift.errors import ConversionFailed
from docshift.formats import FORMATS

HERE = Path(__file__).resolve().parent
KINDS = ("doc", "xls", "ppt")
# the passwords POI's tests open the corpus's protected files with; "VelvetSweatshop" is Excel's default
PASSWORDS = ("hello", "password", "crypto", "VelvetSweatshop")
TIMEOUT = 120


def kind(path):
    return path.suffix.lower()[1:]


def has_vba(path):
    try:
        parser = VBA_Parser(str(path))
        try:
            return parser.detect_vba_macros()
        finally:
            parser.close()
    except Exception:  # a file oletools cannot read holds no project it can find
        return False


def encrypted(data_or_path):
    try:
        with (open(data_or_path, "rb") if isinstance(data_or_path, Path) else io.BytesIO(data_or_path)) as file:
            return msoffcrypto.OfficeFile(file).is_encrypted()
    except Exception:
        return False


def source_streams(path):
    """{path below the project storage: bytes} of the legacy file's own VBA project; {} when it cannot be read."""
    if kind(path) == "ppt":
        data = vba.ppt_project(path)
        if data is None:
            return {}
        with olefile.OleFileIO(data) as ole:
            return cfb.read_storage(ole, "", vbaproject.MAX_PROJECT_SIZE).streams()
    storage = vbaproject.of_source(path, kind(path))
    return storage.streams if storage is not None and storage.error is None else {}


def kept(source, result):
    """How many of the source project's streams the result's vbaProject.bin holds byte for byte."""
    storage = vbaproject.of_result(result) if result is not None and result.exists() else None
    theirs = storage.streams if storage is not None and storage.error is None else {}
    return sum(1 for name, data in source.items() if theirs.get(name) == data)


def plain_soffice(files, out):
    """{source: the macro-enabled result of a plain cold soffice}, one soffice per type."""
    results = {}
    for kind_ in KINDS:
        batch = [path for path in files if kind(path) == kind_]
        if not batch:
            continue
        target = FORMATS[kind_].macro_enabled
        outdir = out / kind_
        subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={(out / 'p').as_uri()}",
                        "--convert-to", f"{target.extension}:{target.export_filter}", "--outdir", str(outdir),
                        *map(str, batch)], capture_output=True, timeout=60 * len(batch) + 60)
        results.update({path: outdir / f"{path.stem}.{target.extension}" for path in batch})
    return results


def converted(engine, path, work, password=None):
    """(the engine's result or None, the failure's code or None)."""
    workdir = Path(tempfile.mkdtemp(dir=work))
    try:
        return engine.convert(path, kind(path), workdir, TIMEOUT, password=password).path, None
    except ConversionFailed as failure:
        return None, failure.code


def projects(engine, folder, files, work):
    found = [path for path in files if has_vba(path)]
    plain = plain_soffice(found, work / "plain")
    totals = defaultdict(lambda: [0, 0, 0])
    print(f"## VBA projects carried whole ({len(found)} files with one)\n")
    print("| file | streams | plain soffice: same | whole | docshift: same | whole |")
    print("|---|---|---|---|---|---|")
    for path in found:
        source = source_streams(path)
        ours, failed = converted(engine, path, work)
        same = kept(source, plain[path]), kept(source, ours)
        whole = ["yes" if source and n == len(source) else "no" for n in same]
        print(f"| {path.relative_to(folder)} | {len(source)} | {same[0] if plain[path].exists() else 'no result'} "
              f"| {whole[0]} "
              f"| {same[1] if ours else failed} | {whole[1]} |")
        for key in (kind(path), "all"):
            totals[key][0] += 1
            totals[key][1] += bool(source) and same[0] == len(source)
            totals[key][2] += bool(source) and same[1] == len(source)
    print("\n| type | with a project | whole, plain soffice | whole, docshift |\n|---|---|---|---|")
    for key in (*KINDS, "all"):
        if key in totals:
            print(f"| {key} | {totals[key][0]} | {totals[key][1]} | {totals[key][2]} |")


def opens_only_with(result, password):
    """Is ``result`` encrypted, opened by ``password`` into an OOXML package, and refused to another password?"""
    data = result.read_bytes()
    if not encrypted(data):
        return False
    office = msoffcrypto.OfficeFile(io.BytesIO(data))
    try:
        office.load_key(password="not " + password, verify_password=True)
        return False
    except msoffcrypto.exceptions.InvalidKeyError:
        pass
    office = msoffcrypto.OfficeFile(io.BytesIO(data))
    office.load_key(password=password, verify_password=True)
    plain = io.BytesIO()
    office.decrypt(plain)
    with zipfile.ZipFile(plain) as package:
        return "[Content_Types].xml" in package.namelist()


def protected(engine, folder, files, work):
    found = [path for path in files if encrypted(path)]
    done = 0
    print(f"\n## Protected files ({len(found)} encrypted)\n")
    print("| file | no password | password | with it | opens only with it |")
    print("|---|---|---|---|---|")
    for path in found:
        without = converted(engine, path, work)[1] or "SUCCEEDED"
        result, outcome, used = None, None, "-"
        for password in PASSWORDS:
            result, outcome = converted(engine, path, work, password)
            if outcome != "wrong_password":
                used = password
                break
        only = result is not None and opens_only_with(result, used)
        done += only
        print(f"| {path.relative_to(folder)} | {without} | {used if result else 'none known'} "
              f"| {'SUCCEEDED' if result else f'FAILED {outcome}'} | {'yes' if only else 'no'} |")
    print(f"\nconverted with their password, and opening only with it: {done} of {len(found)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, nargs="?", default=HERE.parent.parent / "shared" / "corpus")
    folder = parser.parse_args().folder
    files = sorted(p for p in folder.rglob("*") if kind(p) in KINDS)
    with tempfile.TemporaryDirectory(prefix="bench-carried-") as work:
        engine = Engine(Forkit(Path(work) / "office", name="bench"))
        engine.start()
        try:
            projects(engine, folder, files, Path(work))
            protected(engine, folder, files, Path(work))
        finally:
            engine.close()


if __name__ == "__main__":
    main()
