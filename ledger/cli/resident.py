"""The resident process: the command line's imports paid once, not by every call (issue 13, section 2).

A pipeline calls `privacy-ledger` once per release, and about 1 s of each call is importing
SQLAlchemy, numpy, scipy and typer before any work. With a resident process (opt in:
`LEDGER_RESIDENT=1`, or `privacy-ledger resident start`), a call is a small client: it
hands its arguments, working directory, environment, umask, resource limits and its
standard streams (the file descriptors themselves, SCM_RIGHTS) over a Unix socket to a
server that has imported everything once; the server forks, and the child runs the command
exactly as `privacy-ledger` would (`ledger.cli.app.main`) on the client's streams, then the
server sends the child's wait status back and the client ends with it (its exit code, or the
same signal). The design of Bazel's server and Gradle's daemon, with a fork per call as in
Android's zygote.

Invariants:
- The server holds imported code and nothing of any ledger: it never opens a database, reads
  a release file or sees a command's output; every command runs in a fresh child with its
  own connection and transaction, its own random seeds (`secrets` draws at call time;
  `random` is reseeded at fork) and the client's environment.
- A call is run at most once: the client falls back to running in its own process only when
  the server could not be reached or refused the call before forking (then nothing ran).
- Only the same user reaches a server (a 0700 directory, a 0600 socket, the peer's uid
  checked with SO_PEERCRED), and only a server of the same code: the socket's name is a
  fingerprint of the interpreter, the import path and every file of the `ledger` package
  (path, size, mtime), and of the environment variables read at import time; a changed
  install starts a new server, the old one ends when idle.
- The server ends after `LEDGER_RESIDENT_IDLE` seconds without a call (default 900), or on
  `privacy-ledger resident stop`; a call in progress finishes first.

`LEDGER_RESIDENT=0` never uses a server; `LEDGER_RESIDENT_DIR` chooses the socket's directory
(default `$XDG_RUNTIME_DIR/privacy-ledger`, else `/tmp/privacy-ledger-UID`).
"""

from __future__ import annotations

import os
import signal
import struct
import sys

from ..core.lazy import lazy_module

json = lazy_module("json")  # imported only once a server is found: a call without one pays a directory listing
socket = lazy_module("socket")

ENABLE_ENV = "LEDGER_RESIDENT"  # "1": start a server when none runs; "0": never use one
DIR_ENV = "LEDGER_RESIDENT_DIR"
IDLE_ENV = "LEDGER_RESIDENT_IDLE"
DEFAULT_IDLE_S = 900.0
START_WAIT_S = 30.0  # `resident start` waits this long for the server's socket
# Environment variables read when modules are imported (not at call time): a server started
# under other values would not behave as a fresh process would, so they are in the fingerprint.
IMPORT_TIME_ENV_PREFIXES = ("PYTHON", "OPENBLAS_", "OMP_", "MKL_", "NUMPY_", "SCIPY_", "MPL", "SQLALCHEMY_",
                            "LC_", "LANG", "TZ")
LIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_CORE", "RLIMIT_STACK")
# One BLAS thread unless the user says otherwise: the matrix products of `pairs` and the
# report (100 x n by n x 100) are small, and OpenBLAS threads waiting on a busy 2-core
# machine made `pairs` 10 times slower (issue 13). Read when numpy is first imported.
THREAD_DEFAULTS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_HEADER = struct.Struct(">I")  # the length of the JSON request that follows
_PID = struct.Struct(">ci")  # b"P", the child's pid; or b"R", 0: refused before forking
_STATUS = struct.Struct(">ci")  # b"S", the child's wait status (os.waitpid)
EXIT_UNKNOWN = 4  # the server ended before the child's status reached the client (failures.EXIT_INTERNAL)


# --------------------------------------------------------------------------
# Where the server listens, and which server
# --------------------------------------------------------------------------


def _chosen_directory() -> str:
    chosen = os.environ.get(DIR_ENV)
    if chosen:
        return chosen
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return (os.path.join(runtime, "privacy-ledger") if runtime
            else os.path.join(os.environ.get("TMPDIR") or "/tmp", f"privacy-ledger-{os.getuid()}"))


def directory() -> str:
    """The socket directory: created 0700 if missing; refused (None) if it is not a private
    directory of this user (another user could otherwise answer our calls)."""
    chosen = _chosen_directory()
    os.makedirs(chosen, 0o700, exist_ok=True)  # the mode of the last folder (the one checked below)
    info = os.lstat(chosen)
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{chosen} is not a private directory of this user (mode 0700, owned by uid "
                              f"{os.getuid()}): the resident process is not used")
    return chosen


def fingerprint() -> str:
    """Which code a server runs: the interpreter, the import path (with the mtime of each
    site-packages: a package installed or removed changes it), every file of the `ledger`
    package, and the environment read at import time. 24 hex digits of SHA-256."""
    import hashlib

    digest = hashlib.sha256()
    digest.update(f"{sys.executable}\0{sys.version}\0{os.getuid()}\0".encode())
    for entry in sys.path:
        mtime = -1
        if entry.endswith(("site-packages", "dist-packages")):  # not the working directory's: it changes
            try:
                mtime = os.stat(entry).st_mtime_ns
            except OSError:
                pass
        digest.update(f"{entry}\0{mtime}\0".encode())
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for root, folders, files in os.walk(package):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".json", ".html", ".j2", ".css", ".yaml")):
                info = os.stat(os.path.join(root, name))
                digest.update(f"{root}/{name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    environment = {**THREAD_DEFAULTS, **os.environ}  # as ledger.cli.app.main sets them before numpy
    for key in sorted(environment):
        if key.startswith(IMPORT_TIME_ENV_PREFIXES):
            digest.update(f"{key}={environment[key]}\0".encode())
    return digest.hexdigest()[:24]


def socket_path() -> str:
    return os.path.join(directory(), f"{fingerprint()}.sock")


# --------------------------------------------------------------------------
# The client: one call
# --------------------------------------------------------------------------


def run(argv: list[str]) -> int | None:
    """Run `privacy-ledger ARGV` in a resident server's child and return its exit code;
    None when no server took the call (nothing ran: the caller runs it in its own process).
    With LEDGER_RESIDENT=1 and no server, one is started in the background for the next call."""
    mode, mode_problem = _mode()
    idle_problem = _idle()[1] if mode == "1" else None  # (refused before a server is started with it)
    problems = [(name, problem) for name, problem in ((ENABLE_ENV, mode_problem), (IDLE_ENV, idle_problem))
                if problem]
    if problems:  # nothing ran, and nothing runs
        from ..core import failures

        for name, problem in problems:
            failures.say(f"error: environment: {name}: {problem}")
        failures.say(f"{len(problems)} problem{'s' if len(problems) > 1 else ''}; nothing was written.")
        return failures.EXIT_BAD_INPUT
    if mode == "0":
        return None
    if mode != "1" and not _any_socket():  # nothing can answer: no fingerprint, no socket module
        return None
    try:
        path = socket_path()
    except OSError as exc:
        if mode == "1":
            sys.stderr.write(f"privacy-ledger: {exc}\n")
        return None
    connection = _connect(path)
    if connection is None:
        if mode == "1":
            start(path, wait=False)
        return None
    forwarding = _Forwarding()  # a signal that arrives while the call is handed over is held, then forwarded
    with connection:
        pid = _hand_over(connection, argv)
        if pid is None:
            forwarding.release()  # nothing ran: the caller runs it, and a held signal ends it as usual
            return None
        forwarding.to(pid)
        return _await(connection, pid)


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class _Forwarding:
    """The signals a terminal or a pipeline sends the caller go to the child: held until the
    child's pid is known, then forwarded as they come."""

    def __init__(self):
        self.pid: int | None = None
        self.held: list[int] = []
        self.previous = {signum: signal.signal(signum, self._received) for signum in FORWARDED}

    def _received(self, signum, _frame) -> None:
        if self.pid is None:
            self.held.append(signum)
            return
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def to(self, pid: int) -> None:
        self.pid = pid
        for signum in self.held:
            self._received(signum, None)

    def release(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        for signum in self.held:
            os.kill(os.getpid(), signum)


def _mode() -> tuple[str, str | None]:
    """$LEDGER_RESIDENT: "1", "0", or "" (unset or empty: a server is used when one runs), and
    what is wrong with anything else (never read as one of them). No import: every call reads it."""
    mode = os.environ.get(ENABLE_ENV, "").strip()
    if mode in ("", "0", "1"):
        return mode, None
    return mode, (f"must be 1 (use a resident process, starting one), 0 (never use one) or unset (use one "
                  f"when it runs); found {mode[:40]!r}")


def _idle() -> tuple[float, str | None]:
    """$LEDGER_RESIDENT_IDLE: the seconds a server waits for a call before it ends, a positive
    number (unset or empty: DEFAULT_IDLE_S), and what is wrong with anything else."""
    given = os.environ.get(IDLE_ENV, "").strip()
    if not given:
        return DEFAULT_IDLE_S, None
    try:
        value = float(given)
    except ValueError:
        value = float("nan")
    if 0 < value < float("inf"):  # (not NaN either: it would never end)
        return value, None
    return DEFAULT_IDLE_S, (f"must be a positive number of seconds, such as 900 (or unset: {DEFAULT_IDLE_S:g}); "
                            f"found {given[:40]!r}")


def idle_seconds() -> float:
    """`_idle`'s seconds; bad input (exit 2) when it names none."""
    value, problem = _idle()
    if problem:
        from ..core.errors import fail

        raise fail("environment", IDLE_ENV, problem)
    return value


def _any_socket() -> bool:
    """Whether the socket directory holds any server's socket (one listing; nothing created)."""
    try:
        return any(name.endswith(".sock") for name in os.listdir(_chosen_directory()))
    except OSError:
        return False


def _connect(path: str) -> socket.socket | None:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _address(path) as address:
            client.connect(address)
    except OSError:  # no server (no socket, or a stale one: refused)
        client.close()
        return None
    return client


UNIX_PATH_MAX = 100  # bytes of a socket's address (108 on Linux, with room to spare)


class _address:
    """A socket path short enough to bind or connect: itself, or, when its directory's path is
    long (a deep temporary directory), the same file through an open handle of the directory
    (`/proc/self/fd/N/NAME`, Linux)."""

    def __init__(self, path: str):
        self.path, self.handle = path, None

    def __enter__(self) -> str:
        if len(os.fsencode(self.path)) < UNIX_PATH_MAX:
            return self.path
        self.handle = os.open(os.path.dirname(self.path), os.O_PATH | os.O_DIRECTORY)
        return f"/proc/self/fd/{self.handle}/{os.path.basename(self.path)}"

    def __exit__(self, *_) -> None:
        if self.handle is not None:
            os.close(self.handle)


def _request(argv: list[str]) -> dict:
    import resource

    limits = {}
    for name in LIMITS:
        if hasattr(resource, name):
            limits[name] = resource.getrlimit(getattr(resource, name))
    mask = os.umask(0)
    os.umask(mask)
    streams = {}
    for name in ("stdin", "stdout", "stderr"):
        stream = getattr(sys, name)
        streams[name] = {"encoding": getattr(stream, "encoding", None) or "utf-8",
                         "errors": getattr(stream, "errors", None) or "strict"}
    main = sys.modules.get("__main__")  # how click names the program: `python -m ledger` or the script's name
    return {"op": "run", "argv": [sys.argv[0], *argv],
            "main": {"package": getattr(main, "__package__", None), "file": getattr(main, "__file__", None)}, "cwd": os.getcwd(), "env": dict(os.environ),
            "umask": mask, "limits": limits, "streams": streams}


def _hand_over(connection: socket.socket, argv: list[str]) -> int | None:
    """Send the call with the three standard streams; the child's pid, or None if the server
    refused before forking (or a stream is closed: then the call is not sent)."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
        payload = json.dumps(_request(argv)).encode()
        socket.send_fds(connection, [_HEADER.pack(len(payload))], [0, 1, 2])
        connection.sendall(payload)
        reply = _read_exactly(connection, _PID.size)
    except OSError:
        return None
    if reply is None:
        return None
    kind, pid = _PID.unpack(reply)
    return pid if kind == b"P" else None


def _await(connection: socket.socket, pid: int) -> int:
    """End as the child ended: its exit code, or the signal that ended it."""
    try:
        reply = _read_exactly(connection, _STATUS.size)
    except OSError:
        reply = None
    if reply is None:
        sys.stderr.write("privacy-ledger: the resident process ended before this command's exit status "
                         f"reached it (process {pid}); whether it completed is not known: see "
                         "what the ledger holds (`privacy-ledger releases`) before running it again\n")
        return EXIT_UNKNOWN
    _, status = _STATUS.unpack(reply)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # ended by a signal: end by the same one, as the process itself would have
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def _read_exactly(connection: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def control(op: str, path: str | None = None) -> dict | None:
    """Ask the server for its status or to stop: its answer, or None when none runs."""
    connection = _connect(path or socket_path())
    if connection is None:
        return None
    with connection:
        payload = json.dumps({"op": op}).encode()
        connection.sendall(_HEADER.pack(len(payload)) + payload)
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    return json.loads(data) if data else None


def start(path: str | None = None, *, wait: bool) -> dict | None:
    """Start a server in the background (a new session, its output to a log beside the
    socket); with `wait`, until it answers (its status) or START_WAIT_S passes (None)."""
    import subprocess
    import time

    idle_seconds()  # (the server reads it: refused here, where it can be said)
    path = path or socket_path()
    with open(path[:-len(".sock")] + ".log", "ab") as log:
        # the client's import path, not the working directory's modules (`-c` puts "" first)
        bootstrap = "import sys, json; sys.path[:] = json.loads(sys.argv[2]); from ledger.cli.resident import main; main()"
        subprocess.Popen([sys.executable, "-c", bootstrap, path, json.dumps(sys.path)], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True, close_fds=True, cwd="/",
                         env=server_environment())
    if not wait:
        return None
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        status = control("status", path)
        if status is not None:
            return status
        time.sleep(0.05)
    return None


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


SERVER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
              IDLE_ENV)


def server_environment() -> dict[str, str]:
    """The server's own environment: what imports read, and no more (not the caller's database
    URL, credentials or anything else it does not need: each child gets its caller's)."""
    return {key: value for key, value in os.environ.items()
            if key in SERVER_ENV or key.startswith(IMPORT_TIME_ENV_PREFIXES)} | {ENABLE_ENV: "0"}


DRIVERS = ("psycopg",)  # what SQLAlchemy imports for a PostgreSQL URL: named by no module of the ledger


def preload() -> list[str]:
    """Import every module a command may use (the command line, the store, the accounting,
    the reports), as a fresh process would on first use; the modules that failed, by name.
    Nothing else: no database, no file of the working directory, no ledger state."""
    import importlib
    import pkgutil
    from pathlib import Path

    for name, value in THREAD_DEFAULTS.items():  # as ledger.cli.app.main
        os.environ.setdefault(name, value)
    import ledger

    failed = []
    for module in pkgutil.walk_packages(ledger.__path__, "ledger."):
        if module.name in ("ledger.__main__", "ledger.cli.resident"):
            continue
        try:
            importlib.import_module(module.name)
        except Exception as exc:  # noqa: BLE001 -- an optional dependency missing: imported on use, as usual
            failed.append(f"{module.name}: {type(exc).__name__}: {exc}")
    named, maybe = imported_elsewhere(Path(ledger.__file__).parent)
    for name in sorted(named) + list(DRIVERS):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    for name in sorted(maybe - named):  # `from scipy import fft`: fft may be a module or a name
        parent, _, attribute = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], attribute):
            continue  # a name (or a module already imported)
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 -- not a module: nothing to import
            pass
    return failed


def imported_elsewhere(package) -> tuple[set[str], set[str]]:
    """The modules outside the ledger and the standard library that the ledger's source imports
    anywhere (inside functions too: what a command imports on first use), and `lazy_module` /
    `lazy_callable` names: read from the source itself, so the list cannot drift from the
    code. Second, `from X import Y`'s X.Y, which may be a submodule."""
    import ast

    named: set[str] = set()
    maybe: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named.add(node.module)
                maybe.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("lazy_module", "lazy_callable")
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                named.add(node.args[0].value)

    def outside(name: str) -> bool:
        top = name.split(".")[0]
        return top != "ledger" and top not in sys.stdlib_module_names

    return {n for n in named if outside(n)}, {n for n in maybe if outside(n)}


def warm() -> None:
    """Run once what every command's first use of the libraries costs: the click command built
    from the typer application (about 0.2 s), and the store's first statements on an empty
    ledger in memory (SQLAlchemy configures the ORM's mappers and initialises its compiler on
    first use). The engine is disposed: no connection, no ledger, crosses the fork."""
    from ledger.cli import app
    from ledger.store import database as store

    app.command()
    engine = store.make_engine("sqlite://")
    try:
        store.ensure_schema(engine)
        with store.read_session(engine) as session:
            store.write_context(session)
    finally:
        engine.dispose()


class Server:
    """Accept calls on `path` and fork a child for each; report each child's wait status to
    its caller; end when idle (no call and no child for `idle` seconds) or asked to stop."""

    def __init__(self, path: str, idle: float):
        import fcntl
        import selectors
        import time

        self.path, self.idle, self.started = path, idle, time.time()
        self.lock = open(path[:-len(".sock")] + ".lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # one server per socket (BlockingIOError)
        self.failed = preload()
        try:
            warm()
        except Exception as exc:  # noqa: BLE001 -- only slower: each child does it on first use
            self.failed.append(f"warm-up: {type(exc).__name__}: {exc}")
        import gc

        gc.collect()
        gc.freeze()  # what is imported stays out of the children's collections: fewer pages copied
        self.children: dict[int, socket.socket] = {}
        self.calls = 0
        self.wake_read, self.wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd is written
        signal.set_wakeup_fd(self.wake_write)
        temporary = f"{path}.{os.getpid()}"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with _address(temporary) as address:
            self.listener.bind(address)
        os.chmod(temporary, 0o600)
        self.listener.listen(128)
        os.replace(temporary, path)  # atomically: a stale socket of a server that died is replaced
        self.inode = os.stat(path).st_ino
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "call")
        self.selector.register(self.wake_read, selectors.EVENT_READ, "child")
        self.accepting = True

    def serve(self) -> None:
        import time

        last = time.monotonic()
        while self.accepting or self.children:
            events = self.selector.select(timeout=min(self.idle, 5.0))
            for key, _ in events:
                if key.data == "call" and self._accept():
                    last = time.monotonic()
                elif isinstance(key.data, int):
                    self._caller_gone(key.data)
            if self._reap():
                last = time.monotonic()  # idle counts from the last call's end
            if self.accepting and (not self._still_ours() or
                                   (not self.children and time.monotonic() - last > self.idle)):
                self._close()

    def _still_ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def _close(self) -> None:
        """Stop accepting: the socket is removed (the next call starts a new server) while
        the calls in progress finish and are reported."""
        if self._still_ours():
            os.unlink(self.path)
        self.selector.unregister(self.listener)
        self.listener.close()
        self.accepting = False
        self.lock.close()

    def _accept(self) -> bool:
        """Take one connection: a call (True when a child was forked), or a status or stop."""
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return False
        fds: list[int] = []
        try:
            credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", credentials)
            if uid != os.getuid():
                connection.close()
                return False
            connection.settimeout(10.0)  # a client that connects and says nothing does not stop the server
            header, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
            if len(header) < _HEADER.size:
                header += _read_exactly(connection, _HEADER.size - len(header)) or b""
            (length,) = _HEADER.unpack(header)
            request = json.loads(_read_exactly(connection, length) or b"null")
            connection.settimeout(None)
        except (OSError, ValueError, struct.error):
            request = None
        if not isinstance(request, dict):
            for fd in fds:
                os.close(fd)
            connection.close()
            return False
        if request.get("op") in ("status", "stop"):
            for fd in fds:
                os.close(fd)
            answer = {"pid": os.getpid(), "socket": self.path, "started": self.started, "calls": self.calls,
                      "running": len(self.children), "idle_s": self.idle, "not_preloaded": self.failed}
            if request["op"] == "stop":
                self._close()
                answer["stopping"] = True
            connection.sendall(json.dumps(answer).encode())
            connection.close()
            return False
        if request.get("op") != "run" or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            connection.sendall(_PID.pack(b"R", 0))
            connection.close()
            return False
        self.calls += 1
        pid = os.fork()
        if pid == 0:  # the child: never returns into the server's loop
            code = EXIT_UNKNOWN
            try:
                connection.close()
                code = self._child(request, fds)
            except BaseException as exc:  # noqa: BLE001 -- e.g. the caller's directory is gone
                os.write(2, f"privacy-ledger: the resident process could not run this call: {exc}\n".encode())
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        self.children[pid] = connection
        try:
            connection.sendall(_PID.pack(b"P", pid))
        except OSError:
            pass
        import selectors

        self.selector.register(connection, selectors.EVENT_READ, pid)  # readable only if the caller is gone
        return True

    def _caller_gone(self, pid: int) -> None:
        """The caller sends nothing after its call: its connection became readable because it
        ended (killed, say). Its child is killed too, as the command dies with a fresh process
        (a record in progress is rolled back: never half written)."""
        connection = self.children.get(pid)
        if connection is None:
            return
        self.selector.unregister(connection)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _reap(self) -> bool:
        """Report every child that ended to its caller; True if any did."""
        try:
            while os.read(self.wake_read, 4096):
                pass
        except BlockingIOError:
            pass
        ended = False
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            ended = True
            connection = self.children.pop(pid, None)
            if connection is not None:
                try:
                    self.selector.unregister(connection)
                except (KeyError, ValueError):
                    pass
                try:
                    connection.sendall(_STATUS.pack(b"S", status))
                except OSError:
                    pass
                connection.close()
        return ended

    def _child(self, request: dict, fds: list[int]) -> int:
        """In the forked child: become the client's process (streams, directory, environment,
        umask, limits), run the command line, and return its exit code."""
        signal.set_wakeup_fd(-1)
        for fd in (self.wake_read, self.wake_write):
            os.close(fd)
        self.selector.close()
        self.listener.close()
        self.lock.close()
        for connection in self.children.values():
            connection.close()
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _become(request)
        code = 0
        try:
            from ledger.cli.app import main

            main()
        except SystemExit as exc:
            code = _exit_code(exc)
        except BaseException as exc:  # noqa: BLE001 -- as the interpreter would: the traceback, exit 1
            import traceback

            traceback.print_exc()
            code = -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
        finally:
            import atexit

            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001 -- a closed pipe: nothing more to say
                    pass
        if code < 0:  # an interrupted interpreter ends by the signal itself (exit status 130 in a shell)
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        return code


def _become(request: dict) -> None:
    import io
    import resource
    import time

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    os.umask(request["umask"])
    for name, (soft, hard) in request.get("limits", {}).items():
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError, AttributeError):
            pass  # above the server's own hard limit: the server's stands (it is lower)
    streams = request["streams"]
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=streams["stdin"]["encoding"],
                                 errors=streams["stdin"]["errors"])
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=streams["stdout"]["encoding"],
                                  errors=streams["stdout"]["errors"], line_buffering=os.isatty(1))
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding=streams["stderr"]["encoding"],
                                  errors=streams["stderr"]["errors"], line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = list(request["argv"])
    import types

    main = types.ModuleType("__main__")
    main.__package__, main.__file__ = request["main"]["package"], request["main"]["file"]
    sys.modules["__main__"] = main


def _exit_code(exc: SystemExit) -> int:
    """The exit code the interpreter gives a SystemExit (a message is printed, code 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def main() -> None:
    """The server (started by `start`): `main()` with the socket's path as the first argument."""
    path = sys.argv[1]
    idle = idle_seconds()  # (checked by `start`, which started this server)
    try:
        server = Server(path, idle)
    except BlockingIOError:  # another server holds this socket's lock: it serves
        return
    server.serve()


if __name__ == "__main__":
    main()
