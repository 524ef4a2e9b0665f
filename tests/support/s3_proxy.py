"""A loopback HTTP proxy in front of the SeaweedFS S3 server: counts what reaches the wire and
injects faults, whatever client made the request (s3fs / botocore, Arrow's native S3 client).

    with SeaweedS3() as s3, S3Proxy(s3.endpoint_url) as proxy:
        fs = s3.filesystem(client_kwargs={"endpoint_url": proxy.endpoint_url, ...})
        ...
        proxy.counts()  # {"GET": n, "HEAD": n, "LIST": n, "PUT": n, ...}, proxy.bytes_out
        fs = proxy.filesystem(s3)  # an s3fs filesystem whose requests all go through the proxy

Requests are forwarded verbatim (Host header included, so SigV4 signatures made for the proxy's
address verify upstream) over one upstream connection per client connection. `fault`, when set,
is called with (method, path, headers) before forwarding and may return a `Fault` to answer with
instead: a status (503 SlowDown, 500), a truncated body, or a dropped connection.
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class Fault:
    status: int = 0  # answer with this status and an S3 error body (0: forward the request)
    code: str = "InternalError"
    truncate: int = -1  # forward, then send only this many body bytes and close
    drop: bool = False  # close the connection without an answer


class S3Proxy:
    def __init__(self, upstream: str):
        u = urllib.parse.urlsplit(upstream)
        self.upstream = (u.hostname, u.port)
        self.lock = threading.Lock()
        self.requests = []  # (kind, path, status, body bytes sent to the client)
        self.fault = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                kind = proxy.kind(self.command, self.path)
                f = proxy.fault(self.command, self.path, self.headers) if proxy.fault else None
                if f is not None and f.drop:
                    proxy.record(kind, self.path, 0, 0)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if f is not None and f.status:
                    msg = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{f.code}</Code>"
                           f"<Message>injected</Message></Error>").encode()
                    proxy.record(kind, self.path, f.status, len(msg))
                    self.send_response(f.status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                conn = getattr(self, "_up", None)
                if conn is None:
                    conn = self._up = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except (OSError, http.client.HTTPException):
                    conn.close()
                    self._up = None
                    self.close_connection = True
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                if f is not None and 0 <= f.truncate < len(data):
                    proxy.record(kind, self.path, resp.status, f.truncate)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: f.truncate])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                head_len = resp.getheader("Content-Length") if self.command == "HEAD" else None
                # recorded before the client can see the answer: counts are complete when it returns
                proxy.record(kind, self.path, resp.status, 0 if self.command == "HEAD" else len(data))
                self.send_header("Content-Length", head_len or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

            def finish(self):
                up = getattr(self, "_up", None)
                if up is not None:
                    up.close()
                super().finish()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = None

    @staticmethod
    def kind(method, path):
        """GET of an object, LIST (a GET on a bucket with list parameters), HEAD, PUT, ..."""
        u = urllib.parse.urlsplit(path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        if method == "GET" and ("list-type" in q or u.path.strip("/").count("/") == 0):
            return "LIST"
        return method

    def record(self, kind, path, status, nbytes):
        with self.lock:
            self.requests.append((kind, path, status, nbytes))

    def counts(self) -> dict:
        with self.lock:
            out = {}
            for kind, *_ in self.requests:
                out[kind] = out.get(kind, 0) + 1
            return out

    @property
    def bytes_out(self) -> int:
        """Body bytes of object GETs sent to the client."""
        with self.lock:
            return sum(n for kind, _, _, n in self.requests if kind == "GET")

    def requests_total(self) -> int:
        """Every request that reached the wire (GET, HEAD, LIST, ...)."""
        with self.lock:
            return len(self.requests)

    def storage_options(self, server) -> dict:
        """`server`'s s3fs options with every request sent through this proxy."""
        opts = server.storage_options()
        opts["client_kwargs"] = dict(opts["client_kwargs"], endpoint_url=self.endpoint_url)
        return opts

    def filesystem(self, server):
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options(server))

    def reset(self):
        with self.lock:
            self.requests = []

    def __enter__(self):
        self.thread = threading.Thread(target=self.server.serve_forever, name="s3-proxy", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
