"""Direct S3 reads for tables on an s3fs filesystem: SigV4-signed GET and LIST over keep-alive
connections, the same objects and bytes as s3fs at a fraction of its CPU per request.

Why: a one-shot scan of a remote table opens every partition's `_pm`, a small object each. s3fs
(aiobotocore) spends ~3.4 ms of client CPU per GET, so 300 partitions take ~1 s of pure client
work before any data moves; these requests cost ~0.2 ms each. Writes, and everything else, stay
on s3fs.

`S3Direct.from_fsspec(fs)` takes the configuration an s3fs filesystem already has, and returns
None (callers then keep s3fs) for anything it does not reproduce exactly: no explicit endpoint
(AWS region discovery and virtual-hosted addressing stay s3fs's), anonymous access, extra client
or request options, requester pays, versioned reads. Credentials are the filesystem's, else the
standard botocore chain (environment, config files, instance roles), resolved per request so
that refreshed credentials are used; they are never logged.

Transient failures (throttling, 5xx, a dropped connection) are retried with exponential backoff;
what still fails is a StorageError naming the object, the byte range and the answer. A server
that stops answering costs at most ATTEMPTS connect timeouts, not read timeouts.

An object never changes under a reader: the ETag of each object's first listing or response is
kept (until close()) and every later GET of it sends `If-Match`, so a replaced object answers 412, a
StorageError, never bytes of another version; a caller that knows the object's size (the `_pm`
snapshot's) passes `size=` and a first response of another size is refused as well. What stays
undetectable is a same-size replacement made before the object was first listed or read (a
table opened with explicit partitions, as a Spark task is, lists nothing).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import random
import ssl
import sys
import threading
import time
import urllib.parse
import weakref
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

from ..errors import StorageError

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
RETRY_STATUS = {429, 500, 502, 503, 504}
ATTEMPTS = 5  # tries per request, backoff 50 ms x 2^k (+ jitter) between them
WORKERS = 16  # concurrent requests of one get_many
CONNECT_TIMEOUT = 10  # seconds to open a connection: a dead server fails fast, per attempt
READ_TIMEOUT = 60  # seconds without a byte from a connected server
_UNRESERVED = "-_.~"
_OPTIONS = {"key", "secret", "token", "client_kwargs", "use_listings_cache", "skip_instance_cache",
            "listings_expiry_time", "max_paths", "use_ssl", "endpoint_url"}
_CLIENT_KWARGS = {"endpoint_url", "region_name", "verify"}


def _quote(s, safe="/"):
    return urllib.parse.quote(s, safe=safe + _UNRESERVED)


class S3Direct:
    """GET / range GET / LIST of one endpoint (path-style addressing), signed with SigV4."""

    def __init__(self, endpoint_url, region, credentials, *, verify=True):
        u = urllib.parse.urlsplit(endpoint_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"endpoint {endpoint_url!r} is not an http(s) URL")
        self.scheme, self.host = u.scheme, u.netloc
        self.base = u.path.rstrip("/")
        self.region = region
        self._credentials = credentials  # () -> (key, secret, token or None)
        self._ssl = None
        if self.scheme == "https":
            self._ssl = ssl.create_default_context() if verify else ssl._create_unverified_context()
        self._idle = []  # keep-alive connections not in use; shared by threads, closed by close()
        self._lock = threading.Lock()
        self._etags = {}  # "bucket/key" -> ETag of its first response: later GETs must match it
        # closes idle connections when this object is collected without close(): no socket leaks
        self._finalizer = weakref.finalize(self, _close_all, self._idle, self._lock)

    @classmethod
    def from_fsspec(cls, fs):
        """An S3Direct reading what `fs` (an s3fs.S3FileSystem) reads, or None when `fs` is not one
        or is configured in a way this client does not reproduce."""
        # An s3fs filesystem means s3fs is imported already: other filesystems (local, memory,
        # gcs, ...) never pay its ~0.3 s import (aiobotocore, aiohttp) just to be told apart.
        s3fs = sys.modules.get("s3fs")
        if s3fs is None or type(fs) is not getattr(s3fs, "S3FileSystem", None):  # subclasses may differ
            return None
        opts = dict(fs.storage_options)
        ck = dict(opts.get("client_kwargs") or {})
        if set(opts) - _OPTIONS or set(ck) - _CLIENT_KWARGS or fs.anon or fs.requester_pays \
                or fs.version_aware or fs.config_kwargs or fs.s3_additional_kwargs:
            return None
        endpoint = ck.get("endpoint_url") or opts.get("endpoint_url")
        region = ck.get("region_name") or "us-east-1"
        if not endpoint:
            return None
        key, secret, token = opts.get("key"), opts.get("secret"), opts.get("token")
        if key and secret:
            def credentials():
                return key, secret, token
        else:
            import botocore.session  # the standard chain, as s3fs would resolve it

            found = botocore.session.get_session().get_credentials()
            if found is None:
                return None

            def credentials():
                c = found.get_frozen_credentials()
                return c.access_key, c.secret_key, c.token
        return cls(endpoint, region, credentials, verify=ck.get("verify", True) is not False)

    # -- requests -------------------------------------------------------------------------------

    def _take(self):
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return http.client.HTTPSConnection(self.host, timeout=CONNECT_TIMEOUT, context=self._ssl) if self._ssl \
            else http.client.HTTPConnection(self.host, timeout=CONNECT_TIMEOUT)

    def _give(self, conn):
        with self._lock:
            if len(self._idle) < 2 * WORKERS:
                self._idle.append(conn)
                return
        conn.close()

    def close(self):
        """Close every idle connection (requests after this open new ones) and forget the ETags
        kept: objects read after this may be newer versions."""
        self._etags.clear()
        _close_all(self._idle, self._lock)

    def _sign(self, path, query, headers):
        key, secret, token = self._credentials()
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        headers.update({"host": self.host, "x-amz-date": amz_date, "x-amz-content-sha256": EMPTY_SHA256})
        if token:
            headers["x-amz-security-token"] = token
        names = sorted(headers)
        canonical_query = "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in sorted(query.items()))
        canonical = "\n".join(["GET", path, canonical_query, "".join(f"{k}:{headers[k].strip()}\n" for k in names),
                               ";".join(names), EMPTY_SHA256])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        k = hmac.new(("AWS4" + secret).encode(), day.encode(), hashlib.sha256).digest()
        for part in (self.region, "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={';'.join(names)}, "
                                    f"Signature={sig}")
        return headers

    def _request(self, bucket_key, query=None, start=None, end=None, what=None, if_match=None):
        """(status, body, response) of one GET, retried on throttling, 5xx and dropped connections."""
        query = query or {}
        path = _quote(f"{self.base}/{bucket_key}")
        target = path + ("?" + "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in sorted(query.items()))
                         if query else "")
        what = what or f"s3://{bucket_key}"
        last = None
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(0.05 * 2 ** (attempt - 1) * (1 + random.random()))
            headers = {"range": f"bytes={start}-{end - 1}"} if start is not None else {}
            if if_match:
                headers["if-match"] = if_match
            headers = self._sign(path, query, headers)
            conn = self._take()
            try:
                if conn.sock is None:  # a new connection: connect within CONNECT_TIMEOUT, then read slower
                    conn.connect()
                    conn.sock.settimeout(READ_TIMEOUT)
                conn.request("GET", target, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as e:  # reset, refused, truncated body
                conn.close()
                last = f"{type(e).__name__}: {e}"
                continue
            if resp.getheader("connection", "").lower() == "close":
                conn.close()
            else:
                self._give(conn)
            if resp.status in RETRY_STATUS:
                last = f"HTTP {resp.status} {_error_code(body)}"
                continue
            return resp.status, body, resp
        raise StorageError(f"{what}: request failed after {ATTEMPTS} attempts: {last}")

    # -- what Table needs (the fsspec calls it makes, same results) -----------------------------

    def cat_file(self, path, start=None, end=None, *, size=None):
        """Bytes [start, end) of object `path` ("bucket/key"), or all of it. `size`: the object's
        size as the caller knows it (e.g. its `_pm` snapshot's); an object of another size is a
        StorageError. Every read after the object's first sends that answer's ETag (If-Match)."""
        if start is not None and end is not None and end <= start:
            return b""
        rng = None if start is None and end is None else (start or 0, end)
        if rng is not None and rng[1] is None:
            raise ValueError("cat_file: an open-ended range needs an end")
        what = f"s3://{path}" + (f" bytes [{rng[0]}, {rng[1]})" if rng else "")
        pinned = self._etags.get(path)
        status, body, resp = self._request(path, start=rng[0] if rng else None, end=rng[1] if rng else None,
                                           what=what, if_match=pinned and f'"{pinned}"')
        if status == 404:  # as s3fs says it, so callers treat a missing object alike on either path
            raise FileNotFoundError(f"{what}: no such object (HTTP 404 {_error_code(body)})")
        if status == 412:
            raise StorageError(f"{what}: the object changed since it was first read (ETag {pinned} no longer "
                               "matches, HTTP 412); it was replaced, so its _pm snapshot no longer describes it")
        if status == 416:
            raise StorageError(f"{what}: the object ends before the range (HTTP 416); it is shorter than its "
                               "_pm snapshot says, or was replaced")
        if status not in (200, 206):
            raise StorageError(f"{what}: HTTP {status} {_error_code(body)}")
        self._check_version(path, what, resp, status, size)
        if rng is not None and status == 200:  # a server that ignored Range: cut it here
            body = body[rng[0]:rng[1]]
        return body

    def _check_version(self, path, what, resp, status, size):
        """Keep the first ETag of `path`; refuse an answer of another ETag (a server that ignored
        If-Match, or a concurrent first read that saw another version) or of another total size."""
        etag = _etag(resp.getheader("etag") or "")
        if etag:
            kept = self._etags.setdefault(path, etag)  # atomic: concurrent first reads agree on one
            if kept != etag:
                raise StorageError(f"{what}: the object changed while it was read (ETag {etag}, first read "
                                   f"{kept}); it was replaced, so its _pm snapshot no longer describes it")
        if size is None:
            return
        if status == 206:
            total = (resp.getheader("content-range") or "").rpartition("/")[2]
        else:
            total = resp.getheader("content-length")
        if total and total.isdigit() and int(total) != size:
            raise StorageError(f"{what}: the object is {int(total)} bytes, "
                               f"{'shorter' if int(total) < size else 'longer'} than its _pm snapshot says ({size}); it was "
                               "replaced or rewritten since the snapshot")

    def cat(self, paths, on_error="raise"):
        """{path: bytes} of whole objects, fetched concurrently."""
        paths = list(paths)
        if len(paths) <= 1:
            return {p: self.cat_file(p) for p in paths}
        with ThreadPoolExecutor(min(WORKERS, len(paths)), thread_name_prefix="qdbpm-s3") as pool:
            return dict(zip(paths, pool.map(self.cat_file, paths)))

    def find(self, path, *, detail=False, page_size=1000):
        """Every object key under `path` ("bucket/prefix"), as "bucket/key", sorted; listed in
        pages of at most `page_size` keys. detail=True: {key: {"size": n, "ETag": etag}} (as
        fsspec's find(detail=True) gives them)."""
        bucket, _, prefix = path.strip("/").partition("/")
        prefix = prefix + "/" if prefix else ""
        out, details, token = [], {}, None
        while True:
            q = {"list-type": "2", "prefix": prefix, "max-keys": str(page_size)}
            if token:
                q["continuation-token"] = token
            status, body, _ = self._request(bucket, query=q, what=f"s3://{bucket}/{prefix} (listing)")
            if status != 200:
                raise StorageError(f"s3://{bucket}/{prefix}: listing failed: HTTP {status} {_error_code(body)}")
            try:
                root = ET.fromstring(body)
            except ET.ParseError as e:
                raise StorageError(f"s3://{bucket}/{prefix}: listing is not XML: {e}") from None
            ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            for c in root.iter(f"{ns}Contents"):
                key, etag = c.findtext(f"{ns}Key"), c.findtext(f"{ns}ETag")
                if key:
                    out.append(f"{bucket}/{key}")
                    try:
                        details[f"{bucket}/{key}"] = {"size": int(c.findtext(f"{ns}Size") or -1), "ETag": etag}
                    except ValueError:
                        raise StorageError(f"s3://{bucket}/{key}: the listing gives a size that is no "
                                           f"integer: {c.findtext(f'{ns}Size')[:40]!r}") from None
                    if etag:  # a listed object is pinned from here: replaced after it, it is refused
                        self._etags.setdefault(f"{bucket}/{key}", _etag(etag))
            truncated = (root.findtext(f"{ns}IsTruncated") or "").lower() == "true"
            token = root.findtext(f"{ns}NextContinuationToken")
            if not truncated:
                return {k: details[k] for k in sorted(out)} if detail else sorted(out)
            if not token:
                raise StorageError(f"s3://{bucket}/{prefix}: listing is truncated without a continuation token")

    def __repr__(self):
        return f"<S3Direct {self.scheme}://{self.host}{self.base} region={self.region}>"


def _close_all(idle, lock):
    with lock:
        conns, idle[:] = list(idle), []
    for c in conns:
        c.close()


def _etag(value) -> str:
    """An ETag without its quotes (listings and GET answers may quote it differently)."""
    return value.strip().removeprefix("W/").strip('"')


def _error_code(body) -> str:
    """The <Code> of an S3 error body, if it has one."""
    try:
        return ET.fromstring(body).findtext("Code") or ""
    except (ET.ParseError, TypeError):
        return ""
