"""``make image-test``: the image as a user runs it, with podman, from the host.

1. compose.yaml's services (web, worker, objects on one volume, with its runtime options), started
   as compose starts them: an account registered as the README says, a .doc, .xls and .ppt of the
   corpus converted through the published port and downloaded by the ``docshift`` client;
   ``/healthz`` ok with ``sandbox: ok``; LibreOffice (``forkit.py``'s parent, and its children) under the
   unprivileged uid, in a network namespace with only a loopback, not dumpable (its environment is beyond the
   worker's user), and no data dir in view.
2. compose.yaml's ``nodes`` profile: Redis and a conversion node do the conversions of a
   coordinator that converts nothing itself.
3. The worker without the runtime options refuses to start (78) and names them.
4. The all-in-one default command as ``make image-run`` starts it: seconds to a healthy
   ``/healthz``, a conversion, then SIGTERM drains and the container exits 0.

Everything it makes (containers, volumes, network) carries its label and is removed at the end,
whatever happened. Not part of pytest's collection: it needs podman and a built image.
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import requests
import yaml

from docshift.client.tree import STATE_FILE

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"
IMAGE = os.environ.get("IMAGE", "docshift:latest")
PROJECT = f"docshift-image-test-{os.getpid()}"
LABEL = f"docshift-image-test={PROJECT}"
PODMAN = ["podman"]
# the client's and the checks' waits: LibreOffice starts in its sandbox, then self-tests
HEALTHY_WITHIN = 180
# from the host, beyond the container's loopback, /healthz shows its report only with the metrics token
METRICS_TOKEN = os.urandom(16).hex()


def podman(*args, check=True, capture=True, timeout=600):
    done = subprocess.run([*PODMAN, *args], capture_output=capture, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])}... failed ({done.returncode}): {done.stderr.strip()}")
    return done


def say(message):
    print(f"image-test: {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


# compose.yaml, the part of the compose file format it uses ------------------------------------

def interpolate(value, env):
    """Compose's ``${NAME:-default}``, ``${NAME}`` and ``$$``."""
    def one(match):
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1)) or (match.group(3) or "")
    return re.sub(r"\$\$|\$\{(\w+)(:-([^}]*))?\}", one, value)


def services(env, profiles=()):
    """compose.yaml's services of the default and the given profiles, interpolated with ``env``."""
    raw = yaml.safe_load((ROOT / "compose.yaml").read_text())
    chosen = {}
    for name, service in raw["services"].items():
        if set(service.get("profiles", [])) <= set(profiles):
            chosen[name] = json.loads(interpolate(json.dumps(service), env))
    return chosen


def run_args(name, service, env, index):
    """``podman run`` arguments that start one of ``service``'s containers as compose would."""
    args = ["run", "-d", "--pull", "never", "--name", f"{PROJECT}-{name}-{index}", "--label", LABEL,
            "--network", f"{PROJECT}_default", "--network-alias", name]
    for volume in service.get("volumes", []):
        source, target = volume.split(":", 1)
        args += ["-v", f"{PROJECT}_{source}:{target}"]
    for port in service.get("ports", []):
        args += ["-p", port]
    for entry in service.get("environment", []):
        key, sep, value = entry.partition("=")
        if sep or key in env:  # a bare name passes the variable on only when it is set
            args += ["-e", f"{key}={value if sep else env[key]}"]
    for option in service.get("security_opt", []):
        kind, _, value = option.partition("=")
        if kind == "seccomp" and value != "unconfined":
            option = f"seccomp={ROOT / value}"  # relative to the compose file, as compose does
        args += ["--security-opt", option]
    for cap in service.get("cap_drop", []):
        args += ["--cap-drop", cap]
    if "restart" in service:  # the nodes profile's coordinator may start before Redis, fail, and start again
        args += ["--restart", service["restart"]]
    if "stop_grace_period" in service:
        args += ["--stop-timeout", service["stop_grace_period"].rstrip("s")]
    if service.get("healthcheck", {}).get("disable"):
        args += ["--no-healthcheck"]
    command = service.get("command", [])
    return [*args, IMAGE, *(shlex.split(command) if isinstance(command, str) else command)]


def in_order(chosen):
    """Service names, each after what it ``depends_on``: the order compose starts them in."""
    order = []
    def visit(name):
        if name not in order:
            for dependency in chosen[name].get("depends_on", []):
                visit(dependency)
            order.append(name)
    for name in chosen:
        visit(name)
    return order


def up(env, profiles=()):
    """Start the chosen services; returns ``{service: [container name, ...]}``."""
    started = {}
    chosen = services(env, profiles)
    for name in in_order(chosen):
        service = chosen[name]
        count = int(service.get("deploy", {}).get("replicas", 1))
        for index in range(1, count + 1):
            podman(*run_args(name, service, env, index))
            started.setdefault(name, []).append(f"{PROJECT}-{name}-{index}")
    return started


def remove_everything():
    ids = podman("ps", "-aq", "--filter", f"label={LABEL}", check=False).stdout.split()
    if ids:
        podman("rm", "-f", "-v", "-t", "0", *ids, check=False)
    for volume in podman("volume", "ls", "-q", check=False).stdout.split():
        if volume.startswith(PROJECT):
            podman("volume", "rm", "-f", volume, check=False)
    podman("network", "rm", "-f", f"{PROJECT}_default", check=False)


def show_containers():
    """What a failure leaves to read: each container's state and the end of its log."""
    for name in podman("ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}", check=False).stdout.split():
        state = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name, check=False).stdout
        logs = podman("logs", "--tail", "15", name, check=False)
        print(f"--- {name}: {state.strip()}\n{logs.stdout}{logs.stderr}", file=sys.stderr)


# what is checked ----------------------------------------------------------------------------

def wait_healthy(base, within=HEALTHY_WITHIN):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            answer = requests.get(f"{base}/healthz", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=5)
            if answer.status_code == 200:
                return answer.json()
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{base}/healthz not healthy in {within} s: {answer.text if 'answer' in locals() else ''}")


def register(container, base, customer):
    """The README's way: the operator CLI in the container prints a link, its token gets the key."""
    printed = podman("exec", container, "flask", "--app", "app", "marketplace", "issue-token",
                     "--customer", customer, "--plan", "starter").stdout
    link = printed.strip().splitlines()[-1]
    answer = requests.post(f"{base}/marketplace/register", headers={"Accept": "application/json"},
                           data={"x-amzn-marketplace-token": link.split("token=", 1)[1]}, timeout=30)
    answer.raise_for_status()
    return answer.json()["api_key"]


def corpus_files(kinds=("doc", "xls", "ppt"), rank=0):
    """Of each kind, the smallest (``rank`` 0) file that the corpus expects to convert, or the next."""
    rows = [line.split(",") for line in (CORPUS / "expected.csv").read_text().splitlines()[1:]]
    chosen = []
    for kind in kinds:
        ok = sorted((int(size), name) for name, expected, size, *_ in rows
                    if expected == "ok" and name.startswith(f"{kind}/"))
        chosen.append(CORPUS / ok[rank][1])
    return chosen


def convert(base, key, files, out):
    """The ``docshift`` client converts and downloads, through the published ports."""
    env = {**os.environ, "DOCSHIFT_URL": base, "DOCSHIFT_API_KEY": key}
    client = Path(sys.executable).parent / "docshift"
    done = subprocess.run([str(client), "convert", *map(str, files), "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"docshift convert: {done.stdout}{done.stderr}"
    # the results; the client's own state file (``client.tree.STATE_FILE``) is not one
    results = {result.stem: result for result in out.iterdir() if result.name != STATE_FILE}
    assert sorted(results) == sorted(source.stem for source in files), results
    for source in files:  # the OOXML of the source's type (a macro-enabled one keeps its macros)
        result = results[source.stem]
        assert result.suffix in (source.suffix + "x", source.suffix + "m"), result
        assert zipfile.is_zipfile(result) and "[Content_Types].xml" in zipfile.ZipFile(result).namelist()
    return sorted(result.name for result in results.values())


# run in the worker's container, as its user: each LibreOffice process (python running forkit.py, the parent and any
# child of it), as the container sees it. They are not dumpable: their environ is root's, which the user cannot read
SANDBOXED = r"""
import json, os
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        command = open(f"/proc/{pid}/cmdline", "rb").read()
        if not (command.startswith(b"/usr/bin/python3\0") and b"forkit.py\0" in command):
            continue
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except PermissionError:
            environ = None
        seen.append({
            "uid": status["Uid"].split(), "uid_map": open(f"/proc/{pid}/uid_map").read().split(),
            "own_net": os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net"),
            "interfaces": [l.split(":")[0].strip() for l in open(f"/proc/{pid}/net/dev").readlines()[2:]],
            "environ_owner": os.stat(f"/proc/{pid}/environ").st_uid,
            "environment": None if environ is None else sorted(e.split(b"=")[0].decode() for e in environ if e),
            "sees_data": os.path.exists(f"/proc/{pid}/root/data"),
            "sees_passwd": os.path.exists(f"/proc/{pid}/root/etc/passwd"),
        })
    except FileNotFoundError:
        pass
print(json.dumps(seen))
"""


def check_sandbox(container):
    seen = json.loads(podman("exec", container, "python", "-c", SANDBOXED).stdout)
    assert seen, "no LibreOffice (forkit.py) in the worker's container"
    container_uid = podman("exec", container, "id", "-u").stdout.strip()
    assert container_uid != "0"
    for office in seen:
        assert office["uid"] == [container_uid] * 4, office  # the image's user, never root
        assert office["uid_map"] == ["65534", container_uid, "1"], office  # nobody inside
        assert office["own_net"] and office["interfaces"] == ["lo"], office
        # not dumpable: its /proc files are root's, and the worker's user cannot read its environment
        assert office["environ_owner"] == 0 and office["environment"] is None, office
        assert not office["sees_data"] and not office["sees_passwd"], office
    return len(seen)


def compose_phase(workdir):
    port, s3_port = free_port(), free_port()
    env = {"DOCSHIFT_PORT": str(port), "DOCSHIFT_S3_PORT": str(s3_port),
           "DOCSHIFT_S3_PUBLIC_URL": f"http://127.0.0.1:{s3_port}", "DOCSHIFT_WORKERS": "2",
           "DOCSHIFT_METRICS_TOKEN": METRICS_TOKEN}
    podman("network", "create", "--label", LABEL, f"{PROJECT}_default")
    podman("volume", "create", "--label", LABEL, f"{PROJECT}_data")
    started = up(env)
    say(f"compose.yaml's {', '.join(started)} started")
    base = f"http://127.0.0.1:{port}"
    health = wait_healthy(base)
    assert health["checks"]["sandbox"] == "ok" and health["checks"]["engine"] == "ok", health
    podman("healthcheck", "run", started["web"][0])  # the image's HEALTHCHECK, as the runtime runs it
    key = register(started["web"][0], base, "image-test")
    names = convert(base, key, corpus_files(), workdir / "compose")
    say(f"converted and downloaded {', '.join(names)}; /healthz {health['checks']}")
    offices = check_sandbox(started["worker"][0])
    say(f"{offices} LibreOffice processes: the image's uid (nobody inside), only a loopback, not dumpable, no /data")
    return env, started, key


def nodes_phase(env, started, key, workdir):
    """The coordinator (web and worker again, on Redis, converting nothing) with a node."""
    secrets = {"REDIS_PASSWORD": os.urandom(16).hex(), "DOCSHIFT_QUEUE_KEY": os.urandom(32).hex()}
    env = {**env, **secrets, "DOCSHIFT_QUEUE_URL": f"redis://:{secrets['REDIS_PASSWORD']}@redis:6379/0",
           "DOCSHIFT_WORKERS": "0", "DOCSHIFT_NODES": "1"}
    # as compose stops them: what depends on the store first, so the worker drains into it
    podman("rm", "-f", "-t", "150", *started["web"], *started["worker"])
    podman("rm", "-f", "-t", "150", *started["objects"])
    started = up(env, profiles=["nodes"])
    say(f"compose.yaml's nodes profile: {', '.join(started)} started")
    base = f"http://127.0.0.1:{env['DOCSHIFT_PORT']}"
    wait_healthy(base)
    # not a file converted before: the client's Idempotency-Key would replay that task
    names = convert(base, key, corpus_files(("doc",), rank=1), workdir / "nodes")
    logs = podman("logs", started["node"][0])
    assert "taking jobs with 1 LibreOffice" in logs.stdout + logs.stderr
    coordinator = json.loads(podman("exec", started["worker"][0], "python", "-c", SANDBOXED).stdout)
    assert coordinator == [], coordinator
    say(f"converted {', '.join(names)} on a node (the coordinator runs no LibreOffice)")


def refusal_phase():
    done = podman("run", "--rm", "--pull", "never", "--label", LABEL, "--name", f"{PROJECT}-nosandbox", IMAGE, "worker",
                  check=False, timeout=120)
    assert done.returncode == 78, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    said = done.stdout + done.stderr
    assert "systempaths=unconfined" in said and "seccomp=deploy/container/seccomp.json" in said, said[-2000:]
    say("without its options the worker refuses to start (78) and names them")


MEMORY = """
import json
from docshift.engine import memory
group, watch = memory.Cgroup.own(), memory.Watch("image")
print(json.dumps({"limit": group.limit(), "kills": group.oom_kills(), "watched": type(watch.bounds).__name__}))
"""


def memory_phase():
    """With ``--memory`` the worker finds the container's limit (on cgroup v1 the path ``/proc/self/cgroup`` names is
    the host's, not the container's) and can read its OOM kills: its watch runs, and a child killed for memory is
    told from a crash. (Without ``--memory`` it would watch the machine's.)"""
    done = podman("run", "--rm", "--pull", "never", "--label", LABEL, "--name", f"{PROJECT}-memory", "--memory", "3g",
                  "--entrypoint", "python", IMAGE, "-c", MEMORY, timeout=120)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"limit": 3 << 30, "kills": 0, "watched": "Cgroup"}, seen
    say("with --memory 3g the worker finds the container's limit and its OOM kill count: the memory watch runs")


def allinone_phase(workdir):
    port, s3_port = free_port(), free_port()
    options = shlex.split(os.environ["SANDBOX_OPTIONS"])
    started_at = time.monotonic()
    podman("run", "-d", "--pull", "never", "--label", LABEL, "--name", f"{PROJECT}-allinone", "-p", f"{port}:8000",
           "-p", f"{s3_port}:8333", "-v", f"{PROJECT}_allinone:/data",
           "-e", f"DOCSHIFT_S3_PUBLIC_URL=http://127.0.0.1:{s3_port}", "-e", f"DOCSHIFT_METRICS_TOKEN={METRICS_TOKEN}",
           "--stop-timeout", "150", *options, IMAGE)
    base = f"http://127.0.0.1:{port}"
    health = wait_healthy(base)
    to_healthy = time.monotonic() - started_at
    assert health["checks"]["sandbox"] == "ok", health
    key = register(f"{PROJECT}-allinone", base, "all-in-one")
    names = convert(base, key, corpus_files(("xls",)), workdir / "allinone")
    podman("stop", "-t", "150", f"{PROJECT}-allinone")
    status = podman("inspect", "--format", "{{.State.ExitCode}}", f"{PROJECT}-allinone").stdout.strip()
    assert status == "0", status
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    say(f"all in one ({' '.join(options)}): healthy {to_healthy:.1f} s after podman run; converted "
        f"{', '.join(names)}; SIGTERM drained, exit 0")
    say(f"{IMAGE}: {size / 1e6:.0f} MB")


def main():
    if os.environ.get("PODMAN_CONF"):
        os.environ["CONTAINERS_CONF"] = os.environ["PODMAN_CONF"]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below still removes all
    with tempfile.TemporaryDirectory(prefix="docshift-image-test-") as tmp:
        workdir = Path(tmp)
        try:
            env, started, key = compose_phase(workdir)
            nodes_phase(env, started, key, workdir)
            refusal_phase()
            memory_phase()
            allinone_phase(workdir)
        except BaseException:
            show_containers()
            raise
        finally:
            remove_everything()
    say("passed; everything it made is removed")


if __name__ == "__main__":
    main()
