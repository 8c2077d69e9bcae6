"""docshift: the client of the docshift API, as a command and as a library.

    export DOCSHIFT_URL=http://127.0.0.1:8000 DOCSHIFT_API_KEY=dsk_...
    docshift convert ARCHIVE --out CONVERTED --report CONVERTED/report.csv
    docshift usage
    docshift task tsk_...

``convert`` walks the folders it is given and keeps their layout under --out (``run.py``); the library
is ``Client`` (``library.py``): ``Client(url, key).convert("report.doc", "converted/")``.

Exit codes: 0 every legacy file succeeded, 1 a file failed or expired before it was downloaded (or a
request failed), 2 a usage, configuration or authentication problem (bad arguments, missing or invalid
key, inactive subscription, wrong URL).
"""

import argparse
import json
import os
import sys
from typing import Any
from urllib.parse import urlsplit

import requests

from docshift.client import passwords
from docshift.client.http import (  # noqa: F401 - HINTS, FAILURE_HINTS: the hints the command gives
    DEFAULT_URL,
    FAILURE_HINTS,
    HINTS,
    exit_code,
    line,
)
from docshift.client.library import WAIT, Client, Conversion
from docshift.client.run import run_convert
from docshift.contract import TASK_ID
from docshift.errors import ClientProblem as Problem

__all__ = ["Client", "Conversion", "main"]


def run_usage(client: Client, args: argparse.Namespace) -> int:
    usage = client.usage()
    if args.json:
        print(json.dumps(usage, indent=2))
        return 0
    width = max(map(len, usage), default=0)
    for field, value in usage.items():
        print(f"{field.replace('_', ' '):<{width}}  {value}")
    return 0


def run_task(client: Client, args: argparse.Namespace) -> int:
    if not TASK_ID.fullmatch(args.task_id):  # asked of the service, it is a 404 that reads like a wrong URL
        print(f"docshift: {args.task_id!r} is no task id (tsk_ and 24 hex digits, as a submission gives it).",
              file=sys.stderr)
        return 2
    print(json.dumps(client.task(args.task_id), indent=2))
    return 0


def positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be a number above 0, not {text!r}")
        return value
    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="docshift",
        description="Convert .doc/.xls/.ppt to .docx/.xlsx/.pptx with a docshift service.",
        epilog=f"Environment: DOCSHIFT_URL (default {DEFAULT_URL}), DOCSHIFT_API_KEY (required), "
               f"{passwords.ENVIRONMENT} (the password of every protected file).")
    commands = p.add_subparsers(dest="command", required=True)
    convert = commands.add_parser(
        "convert", help="convert files and folder trees into a folder",
        description="Convert every .doc, .xls and .ppt of the files and folders given; each result goes to the "
                    "same path under --out as its source has under the folder given. Other files are counted "
                    "and skipped. Run the same command again to resume: finished files are not sent again, "
                    "unfinished ones re-attach to their tasks without a second charge.")
    convert.add_argument("sources", nargs="+", metavar="SRC", help="a legacy file, or a folder to walk")
    convert.add_argument("--out", required=True, metavar="DIR", help="folder for the results (and the state file)")
    convert.add_argument("--report", metavar="FILE.csv",
                         help="write one CSV row per legacy file, and FILE.html beside it")
    convert.add_argument("--parallel", type=positive(int), default=4, metavar="N", help="files at a time (4)")
    convert.add_argument("--timeout", type=positive(float), default=WAIT, metavar="S",
                         help=f"give up waiting for one file after S seconds ({WAIT:g})")
    convert.add_argument("--password-file", metavar="FILE",
                         help="passwords of protected files: lines 'relative/path<TAB>password', or "
                              "'*<TAB>password' for every file (or DOCSHIFT_DOCUMENT_PASSWORD for all)")
    convert.add_argument("--protection", choices=("keep", "remove"),
                         help="a protected file's result keeps its password (keep, the service's default) or not")
    convert.add_argument("--overwrite", action="store_true",
                         help="replace files already in --out where results go (by default a file that no run of this "
                              "--out wrote is kept, and its source not sent)")
    convert.set_defaults(run=run_convert)
    usage = commands.add_parser("usage", help="show the plan's usage this period")
    usage.add_argument("--json", action="store_true", help="print the raw JSON")
    usage.set_defaults(run=run_usage)
    task = commands.add_parser("task", help="show one task as JSON")
    task.add_argument("task_id", metavar="ID")
    task.set_defaults(run=run_task)
    return p


def well_formed(url: str) -> bool:
    """A URL requests can send to: a host, a port in range, no spaces."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError when out of range
        requests.Request("GET", url).prepare()
    except (ValueError, requests.RequestException):
        return False
    return bool(parts.hostname) and not any(c.isspace() for c in url)


def main(argv: list[str] | None = None) -> int | str | None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser().parse_args(argv)
    except SystemExit as error:  # argparse exits on --help and usage errors; return the code instead
        return error.code
    args.argv = argv  # what to run again to resume
    if args.command == "convert":
        try:
            args.passwords = passwords.load(args.password_file)
        except ValueError as error:
            print(f"docshift: {error}", file=sys.stderr)
            return 2
    key = os.environ.get("DOCSHIFT_API_KEY", "").strip()
    if not key:
        print("docshift: DOCSHIFT_API_KEY is not set; export your key (dsk_...).", file=sys.stderr)
        return 2
    if not all("\x21" <= c <= "\x7e" for c in key):
        print("docshift: DOCSHIFT_API_KEY holds characters no key has; check it.", file=sys.stderr)
        return 2
    url = os.environ.get("DOCSHIFT_URL", "").strip() or DEFAULT_URL
    if not url.startswith(("http://", "https://")) or not well_formed(url):
        print(f"docshift: DOCSHIFT_URL must be an http:// or https:// URL with a host (got {url!r}).",
              file=sys.stderr)
        return 2
    try:
        return args.run(Client(url, key), args)
    except Problem as problem:
        print(line(problem), file=sys.stderr)
        return exit_code(problem)
    except KeyboardInterrupt:
        print("docshift: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # what read the output went (`| head`): the run stops; what is done is kept
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that the exit's flush says nothing
        print("docshift: the output's reader closed it; stopped. Run the same command again to resume.",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
