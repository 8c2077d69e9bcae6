"""The web runs ahead of the rest of the box where it may: its polls are cheap, and under a flood
of uploads and conversions they waited for a CPU (bench/traffic.py)."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import Service, autogroup


def may_lower_nice():
    probe = subprocess.run([sys.executable, "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, -10)"])
    return probe.returncode == 0


def web_processes(service):
    master = service.processes["web"].pid
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [master, *map(int, children)]


def test_the_web_runs_at_a_lower_nice_where_it_may(live):
    processes = web_processes(live)
    assert len(processes) == 3  # the master and its two workers
    if not may_lower_nice():
        assert all(os.getpriority(os.PRIO_PROCESS, pid) == 0 for pid in processes)
        assert "needs CAP_SYS_NICE" in (live.data_dir / "web.log").read_text()
        return
    assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in processes] == [-10, -10, -10]
    group = autogroup(processes[0])
    if group is not None:  # with autogroups, CPU is shared between sessions first
        assert group[1] == -10
        assert autogroup("self") is None or autogroup("self")[0] != group[0]


def test_a_web_nice_of_zero_leaves_it_alone(s3, tmp_path):
    service = Service(tmp_path, s3["env"], WEB_NICE=0)
    try:
        service.start_web()
        service.wait_healthy_web()
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in web_processes(service)] == [0, 0, 0]
    finally:
        service.stop()
