"""gunicorn's settings for the web process, one place for the Procfile, the systemd unit and
the tests: ``gunicorn -c python:docshift.gunicorn_conf 'app:create_app()'``.

gevent workers: every connection waits for its request in a greenlet, not in one of a
few threads, so clients that send half a request and stall hold a socket each, never the
API (with gthread, 16 such clients left /healthz unanswered). A request's headers must
arrive within ``keepalive`` seconds; its body may pause at most ``DOCSHIFT_READ_TIMEOUT``
seconds (the app sets that on the socket). Nothing in a request holds a SQLite
transaction across network I/O, so greenlets never wait on each other's locks.

It lives outside ``docshift.web`` so that gunicorn's master, which reads it, imports nothing
of the app: gevent must patch ``ssl`` before urllib3 is first imported.
"""

import os

# a PaaS says where to listen with PORT; otherwise loopback, as make run and the systemd unit want
_paas_port = os.environ.get("PORT")
bind = [f"0.0.0.0:{_paas_port}" if _paas_port else f"127.0.0.1:{os.environ.get('DOCSHIFT_PORT', '8000')}"]
workers = 2
worker_class = "gevent"
worker_connections = 1000
keepalive = 5
control_socket_disable = True

# The API before the rest of the box: a poll costs about 1.6 ms of CPU, yet while uploads, the
# object store and conversions saturated two cores it waited as long again for one (nginx's
# worker_priority is the same idea). A lower nice needs CAP_SYS_NICE; without it the web keeps
# its nice and says so (the systemd unit gives it the nice and a CPU weight).
_web_nice = int(os.environ.get("DOCSHIFT_WEB_NICE", "-10"))


def on_starting(server):
    """Lower the master's nice before it forks: the workers inherit it. With autogroup scheduling
    (Debian's default) CPU time is shared between sessions first, so the session's group gets the
    same nice: under make run and systemd the web has a session of its own."""
    if _web_nice >= os.getpriority(os.PRIO_PROCESS, 0):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, _web_nice)
    except PermissionError:
        server.log.info("the web keeps nice %d: nice %d (DOCSHIFT_WEB_NICE) needs CAP_SYS_NICE",
                        os.getpriority(os.PRIO_PROCESS, 0), _web_nice)
        return
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(_web_nice))
    except OSError:  # no autogroups, or the kernel's default group: the nice alone counts
        pass
