"""``docshift convert``: every legacy file of the trees given, a few at a time, each exactly once.

A file is read and hashed by the thread that converts it, so a tree of tens of thousands starts at once.
Its Idempotency-Key comes from its content and its path under the folder it was found in: a run killed at
any moment and started again re-attaches to its tasks as replays, never charged twice. The state file in
--out records each finished file, which a later run does not send at all.
"""

import argparse
import hashlib
import os
import shlex
import sys
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path, PurePosixPath
from typing import Any

import requests

from docshift.client.http import (
    CONFIG_CODES,
    FAILURE_HINTS,
    INTERRUPTED,
    TRANSIENT_CODES,
    idempotency_key,
    line,
    local_name,
    utf8_name,
)
from docshift.client.library import Client
from docshift.client.progress import progress_for
from docshift.client.report import Row, write
from docshift.client.tree import Source, State, collisions, walk
from docshift.contract import ProblemCode, Status, TaskErrorCode
from docshift.errors import ClientProblem as Problem
from docshift.formats import by_filename, target_name

# codes that stop the whole run: every other file would meet them too
STOPPING = CONFIG_CODES | (TRANSIENT_CODES - {ProblemCode.INTERNAL_ERROR}) | {INTERRUPTED}
# a FAILED task that says nothing about the file itself: not recorded as the file's outcome
NOT_THE_FILE = {TaskErrorCode.SUBSCRIPTION_INACTIVE, TaskErrorCode.INPUT_MISSING}
NEEDS_PASSWORD = {TaskErrorCode.ENCRYPTED_DOCUMENT, TaskErrorCode.WRONG_PASSWORD}
CFB_MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")
RESUBMITTED = "resubmitted: the earlier result expired before it was downloaded (charged again)"
REPLAYED_RESUBMISSION = ("replayed: sent again by an earlier run, its first result having expired before it was "
                         "downloaded (not charged again)")


def convert_one(client: Client, source: Source, state: State, out_dir: Path, timeout: float,
                password: str | None = None, protection: str | None = None, overwrite: bool = False) -> Row:
    """Convert one source, or take its outcome from the state file; a Problem in STOPPING propagates.
    ``password`` (Document-Password) and ``protection`` go with it when given. A file already where its result goes
    that no run of this --out wrote for it is not overwritten, and the source not sent, unless ``overwrite``."""
    row = Row(utf8_name(source.shown), source.kind)
    if client.stop.is_set():
        raise Problem(INTERRUPTED, "Stopped before this file was read.")
    limit = client.upload_limit()
    try:
        size = source.path.stat().st_size
        data = b"" if limit and size > limit[0] else source.path.read_bytes()  # a huge file is never read
    except OSError as error:
        row.status, row.error, row.message = Status.FAILED, "unreadable", str(error.strerror or error)
        return row
    if limit and size > limit[0]:
        row.status, row.error, row.note = Status.FAILED, ProblemCode.FILE_TOO_LARGE, "not sent"
        row.message = f"{size:,} bytes, over the service's limit of {limit[1]}; not sent."
        return row
    sha256 = hashlib.sha256(data).hexdigest()
    earlier = state.get(source.rel, sha256)
    # a file that needed a password is sent again once one is given: the same one replays its failure, unbilled
    retry = password is not None and earlier is not None and earlier.get("error") in NEEDS_PASSWORD
    # and one whose result kept its source's password is converted again when the run asks for none
    retry = retry or (protection == "remove" and earlier is not None and bool(earlier.get("protected")))
    if earlier and "status" in earlier and _result_kept(earlier, out_dir) and not retry:
        _fill(row, earlier, out_dir)
        row.earlier = True
        return row
    origin = os.path.abspath(source.path)
    taken = None if overwrite else _taken(source, origin, state, out_dir)
    if taken is not None:
        row.status, row.error, row.note = Status.FAILED, "result_exists", "not sent"
        row.message = (f"{taken} is there already, and no earlier run wrote it for this file: not overwritten, and "
                       "the file not sent. Move it away, convert into another --out, or give --overwrite.")
        return row
    generation = earlier.get("generation", 0) if earlier else 0
    resent = earlier.get("resent", "") if earlier else ""  # why the last generation was sent: "", or a failure's code
    try:
        # the first answer, and one resubmission if its result expired unfetched, or if it failed for a reason not
        # the file's (an account inactive then, an input lost): its key would replay that failure for a day
        for attempt in range(2):
            key = idempotency_key(str(source.rel), data, generation, client.api.options_tag(password, protection))
            submitted = client.submit(source.path, data=data, name=source.rel.name, busy_wait=timeout, key=key,
                                      password=password, protection=protection)
            row.replayed = bool(submitted.get("idempotent_replay"))  # of the task the row ends with
            task = client.wait(submitted, timeout)
            target = out_dir / source.rel.parent / local_name(task.get("result_filename"), source.rel.name)
            if task["status"] == Status.SUCCEEDED:  # the result's name is this file's before it is written
                state.put({"rel": str(source.rel), "sha256": sha256, "generation": generation, "resent": resent,
                           "source": origin, "result": _under(target, out_dir)})
                task = _download(client, task, target)
            if task["status"] == Status.EXPIRED and _fetched(target, task):
                task["status"] = Status.SUCCEEDED  # a run killed between its download and its record
            not_the_files = (task.get("error") or {}).get("code") if task["status"] == Status.FAILED else None
            if attempt or not (task["status"] == Status.EXPIRED or not_the_files in NOT_THE_FILE):
                break
            generation += 1  # recorded before it is sent: a run killed now re-attaches to the new task
            resent = not_the_files or ""
            state.put({"rel": str(source.rel), "sha256": sha256, "generation": generation, "resent": resent,
                       "source": origin})
    except Problem as problem:
        if problem.code in STOPPING:
            raise
        row.status, row.error, row.message = Status.FAILED, problem.code, problem.detail
        return row
    except requests.exceptions.InvalidHeader:  # its text would repeat the header: a password, never shown
        row.status, row.error = Status.FAILED, ProblemCode.INVALID_REQUEST
        row.message = "A header of it could not be sent."
        return row
    except OSError as error:  # the result could not be written under --out
        row.status, row.error, row.message = Status.FAILED, "cannot_write", str(error.strerror or error)
        return row
    fidelity, failure = task.get("fidelity") or {}, task.get("error") or {}
    record = {"rel": str(source.rel), "source": origin, "sha256": sha256, "generation": generation,
              "status": task["status"],
              "task_id": task["task_id"], "billing_class": task.get("billing_class", ""),
              "complete": fidelity.get("complete"), "lost": fidelity.get("lost") or [],
              "error": failure.get("code", ""), "message": failure.get("message", ""),
              "detected_format": task.get("detected_format", ""),
              "resent": resent, "note": _note(generation, resent, row.replayed)}
    if task["status"] == Status.SUCCEEDED:
        record.update(result=_under(target, out_dir), result_size=target.stat().st_size, protected=_protected(target))
    if task["status"] == Status.SUCCEEDED or (task["status"] == Status.FAILED and record["error"] not in NOT_THE_FILE):
        state.put(record)  # EXPIRED twice over is not the file's outcome either: a later run tries again
    _fill(row, record, out_dir)
    return row


def _taken(source: Source, origin: str, state: State, out_dir: Path) -> Path | None:
    """A file where ``source``'s result goes (as either of its types: ``.docx`` or ``.docm``) that no run of this
    --out wrote for it: the user's own, or the result of a file of the same path under another folder (runs of two
    folders into one --out). A result this file had before it was edited is its own."""
    found = by_filename(source.rel.name)
    record = state.records.get(str(source.rel))
    for extension in sorted({found.result(False).extension, found.result(True).extension} if found else ()):
        target = out_dir / source.rel.parent / (target_name(source.rel.name, extension) or "")
        if target.exists() and not (record is not None and record.get("source", origin) == origin
                                    and record.get("result") == _under(target, out_dir)):
            return target
    return None


def _protected(result: Path) -> bool:
    """Whether a result is protected by a password: an encrypted OOXML package is a compound file, not a zip."""
    with open(result, "rb") as f:
        return f.read(8) == CFB_MAGIC


def _under(target: Path, out_dir: Path) -> str:
    """``target``'s path under --out, as the state file keeps it."""
    return str(PurePosixPath(*target.relative_to(out_dir).parts))


def _note(generation: int, resent: str, replayed: bool) -> str:
    if not generation:
        return ""
    if resent:
        return f"resubmitted: the earlier task failed {resent}, through no fault of the file's (it was not charged)"
    return REPLAYED_RESUBMISSION if replayed else RESUBMITTED


def _download(client: Client, task: dict[str, Any], target: Path) -> dict[str, Any]:
    """Download a SUCCEEDED task's result; the task as it then is (EXPIRED if its result went meanwhile)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(2):
        try:
            client.download(task, target)
            return task
        except Problem as problem:
            # a link refused: the result may have expired since the query, or the link outlived itself
            if problem.code != "download_failed" or attempt:
                raise
            task = client.task(task["task_id"])
            if task["status"] != Status.SUCCEEDED:
                return task
    raise AssertionError("unreachable")  # pragma: no cover


def _fetched(target: Path, task: dict[str, Any]) -> bool:
    """The result is already at ``target``: a download ends with an atomic rename, so a file of the result's
    size under its name is the whole result."""
    try:
        return target.stat().st_size == task.get("result_size")
    except OSError:
        return False


def _result_kept(record: dict[str, Any], out_dir: Path) -> bool:
    if record["status"] != Status.SUCCEEDED:
        return True
    try:
        return bool(record.get("result")) and (out_dir / record["result"]).stat().st_size == record.get("result_size")
    except OSError:
        return False  # moved or deleted since: fetched again (replayed, or resubmitted if it expired)


def _fill(row: Row, record: dict[str, Any], out_dir: Path) -> None:
    row.status, row.task_id = record["status"], record.get("task_id", "")
    row.result = utf8_name(str(out_dir / record["result"])) if record.get("result") else ""
    row.complete, row.lost = record.get("complete"), record.get("lost") or []
    for name in ("error", "message", "detected_format", "note", "billing_class"):
        setattr(row, name, record.get(name) or "")
    if row.status == Status.EXPIRED:
        row.message = "The result expired before it was downloaded, and so did the resubmission's."


def describe(row: Row) -> str:
    """The row as the one line printed when it is done."""
    if row.status == Status.SUCCEEDED:
        notes = [f"task {row.task_id}", row.billing_class]
        if row.earlier:  # the note (a resubmission's, and its charge) was an earlier run's: the report keeps it
            notes.append("done earlier: not sent again")
        else:
            notes += ["replayed: not charged again" if row.replayed else "", row.note]
        lost = f"; lost: {'; '.join(str(x.get('detail')) for x in row.lost)}" if row.complete is False else ""
        return f"{row.source} -> {row.result} ({', '.join(n for n in notes if n)}){lost}"
    if not row.task_id:  # the client's own refusal, or the service's answer to the submission
        return line(Problem(row.error, row.message), row.source)
    said = f"{row.status} {row.error}:" if row.error else f"{row.status}:"
    hint = next((text for code, text in FAILURE_HINTS.items() if code == row.error), "")
    return " ".join(f"docshift: {row.source}: {said} {row.message} (task {row.task_id}) {hint}".split())


def run_convert(client: Client, args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    found = walk(args.sources, out_dir)
    if found.missing:
        print(f"docshift: {found.missing[0]}: no such file or folder.", file=sys.stderr)
        return 2
    for unlisted in found.unreadable:
        print(f"docshift: cannot list the folder {unlisted}; what it holds is not converted.", file=sys.stderr)
    for first, second in collisions(found.sources)[:1]:
        print(f"docshift: {first.shown} and {second.shown} would both become {second.rel.with_suffix('')}.* "
              f"in {out_dir}; convert them into different --out folders.", file=sys.stderr)
        return 2
    # a line of the password file that names no file of this run, as one that gives the path as the run shows it (it
    # takes the path under the folder given) does, would leave its file to fail for want of the password
    for unmatched in sorted(set(args.passwords.named) - {str(source.rel) for source in found.sources}):
        print(f"docshift: the password file names {unmatched}, which is no file of this run: its lines give a file's "
              "path under the folder converted (archive/a/b.doc is a/b.doc when archive is given).", file=sys.stderr)
    csv_path = Path(args.report) if args.report else None
    if csv_path is not None and csv_path.suffix.lower() in (".html", ".htm"):
        print(f"docshift: --report names the CSV file; its HTML page goes beside it ({csv_path.with_suffix('.csv')} "
              f"gives {csv_path.with_suffix('.html')} too).", file=sys.stderr)
        return 2
    client.usage()  # fail once, before any upload or folder, on a bad key, an inactive plan or a wrong URL
    client.upload_limit()
    for folder in (out_dir, *([csv_path.parent] if csv_path else [])):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            os.close(os.open(folder / ".docshift-write-test", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
            os.unlink(folder / ".docshift-write-test")
        except OSError as error:
            print(f"docshift: cannot write in {folder}: {error.strerror or error}.", file=sys.stderr)
            return 2

    state = State(out_dir)
    rows = {source: Row(utf8_name(source.shown), source.kind) for source in found.sources}
    progress = progress_for(len(rows))
    fatal: Problem | None = None
    interrupted = False
    pool = ThreadPoolExecutor(max_workers=max(1, args.parallel))
    futures: dict[Future[Row], Source] = {}
    counted: set[Source] = set()  # the files the bar counts
    try:
        futures = {
            pool.submit(convert_one, client, source, state, out_dir, args.timeout, args.passwords.of(source.rel),
                        args.protection, args.overwrite): source for source in rows}
        for future in as_completed(futures):
            try:
                row = rows[futures[future]] = future.result()
            except Problem as problem:
                fatal = problem
                break
            except OSError as error:  # the state file could not be written: the disk under --out is full
                fatal = Problem("cannot_write", f"Cannot write under {out_dir}: {error.strerror or error}.")
                break
            progress.done(describe(row), row.status == Status.SUCCEEDED)
            counted.add(futures[future])
    except KeyboardInterrupt:
        interrupted = True
    finally:
        client.stop.set()  # running files stop at their next wait, the others never start
        pool.shutdown(wait=True, cancel_futures=True)
        for future, source in futures.items():  # what ended while the run stopped is reported as it ended
            if future.done() and not future.cancelled() and future.exception() is None:
                rows[source] = future.result()
                if source not in counted and rows[source].status != "PENDING":  # a Ctrl-C came before the bar
                    progress.done(describe(rows[source]), rows[source].status == Status.SUCCEEDED)
        progress.close()
        state.close()
    done = list(rows.values())
    for row in done:
        if row.status == "PENDING":
            row.note = "not done: the run stopped first; run the same command again"
    page = None
    if csv_path:
        try:
            page = write(csv_path, done, found.skipped)
        except OSError as error:
            print(f"docshift: cannot write the report {csv_path}: {error.strerror or error}; the results are "
                  "kept, and the same command writes it again.", file=sys.stderr)
    print(summary(done, found.skipped))
    if page:
        print(f"report: {csv_path} and {page}")
    if fatal and fatal.code == INTERRUPTED:  # a stop that was no error: the Ctrl-C raced a file's wait
        fatal, interrupted = None, True
    if fatal or interrupted:
        if fatal:
            print(line(fatal), file=sys.stderr)
        resume = shlex.join(["docshift", *args.argv])
        print(f"docshift: {'interrupted' if interrupted else 'stopped'}; what is done is kept. To resume, "
              f"run the same command again: {resume}", file=sys.stderr)
        if interrupted:
            return 130
        return 2 if fatal and fatal.code in CONFIG_CODES else 1
    whole = all(row.status == Status.SUCCEEDED for row in done) and not found.unreadable
    return 0 if whole and (page or not csv_path) else 1


def summary(rows: list[Row], skipped: int) -> str:
    """One line: how many files ended how, and what was free."""
    count = {status: sum(row.status == status for row in rows) for status in ("SUCCEEDED", "FAILED", "EXPIRED",
                                                                               "PENDING")}
    parts = [f"{len(rows)} legacy file{'' if len(rows) == 1 else 's'}: {count['SUCCEEDED']} succeeded"]
    lossy = sum(row.complete is False and row.status == Status.SUCCEEDED for row in rows)
    if lossy:
        parts[0] += f" ({lossy} with losses)"
    parts += [f"{count['FAILED']} failed"] + [f"{count[s]} {s.lower()}" for s in ("EXPIRED", "PENDING") if count[s]]
    parts.append(f"{skipped} skipped (not .doc/.xls/.ppt)")
    free = [f"{n} {what}" for n, what in ((sum(r.earlier for r in rows), "done earlier"),
                                          (sum(r.replayed and not r.earlier for r in rows), "replayed"),
                                          (sum(r.note.startswith("resubmitted") and not r.earlier for r in rows),
                                           "resubmitted"))
            if n]
    return ", ".join(parts) + (f"; {', '.join(free)}" if free else "")
