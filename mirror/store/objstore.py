"""S3-compatible object storage for archives: the one module that talks to obstore.

An archive in a store keeps the folder's layout under its prefix: an object's key is its
file's path below the archive folder (mirror/layout.py, the one place that names them;
`key_of`, `path_of`): `warc/<file name>` for each closed WARC file, `index.cdxj`, and
`manifest.sqlite3` (a snapshot of the manifest, never the live file). Endpoint and
credentials come from the standard AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION).

A WARC file is uploaded once, with a conditional put (`If-None-Match: *`): an object is
never overwritten, so an upload retried after a crash or a lost answer cannot damage a
finished file. The put sends the whole file in one request (S3 evaluates the condition on
PutObject; a multipart upload could not be conditional here), from a memory map, so the
bytes are the page cache's, not the process's. Each WARC object carries the file's SHA-256
as metadata (x-amz-meta-sha256): when the key exists, its size and that digest say whether
the bytes are the same (the upload counts as done) or not (StoreConflict), without reading
the object back. An object someone else put without the digest is compared by its ETag,
which is the MD5 of the bytes for a single-part PUT.

Every obstore error becomes a StoreError here, naming the object and a readable reason.
"""

from __future__ import annotations

import io
import mmap
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from mirror.errors import UsageError
from mirror.layout import ArchiveLayout

#: how to install what this module needs
EXTRA = "pip install 'mirror[fleet]'"


def key_of(layout: ArchiveLayout, path: Path) -> str:
    """The key of `path`, a file of the archive folder at `layout` ('warc/x.warc.gz');
    ValueError for a path outside the folder."""
    return path.relative_to(layout.root).as_posix()


def path_of(layout: ArchiveLayout, key: str) -> Path:
    """The file of the archive folder at `layout` that `key` names; ValueError for a key
    that would leave the folder (absolute, or an empty, '.' or '..' part)."""
    parts = key.split("/")
    if "\\" in key or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{key!r}: not the key of a file in an archive folder")
    return layout.root.joinpath(*parts)


_FOLDER = ArchiveLayout(Path())  # the layout's names, relative to the folder
WARC_PREFIX = key_of(_FOLDER, _FOLDER.warc) + "/"
INDEX_KEY = key_of(_FOLDER, _FOLDER.index)
MANIFEST_KEY = key_of(_FOLDER, _FOLDER.manifest)
#: the user metadata a WARC object carries: the file's SHA-256, hex
SHA256 = "sha256"
#: S3's largest single PUT (a conditional put is one PUT)
SINGLE_PUT_MAX = 5 * 1024**3

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_MD5 = re.compile(r'"?([0-9a-f]{32})"?')

# connection set-up, then whole requests: metadata, ranges and listings are quick; an
# upload or download of a 1 GB WARC file is not (and may not stall for a minute)
_QUICK = {"connect_timeout": "5s", "timeout": "60s"}
_BULK = {"connect_timeout": "5s", "timeout": "3600s", "read_timeout": "60s"}
_RETRY = {"max_retries": 3, "retry_timeout": timedelta(seconds=30),
          "backoff": {"init_backoff": timedelta(milliseconds=200),
                      "max_backoff": timedelta(seconds=5), "base": 2}}


class StoreError(UsageError):
    """An object store cannot do what was asked; str() names the object and why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


class FileRefused(StoreError):
    """This one file cannot be uploaded (the store is fine: other files may go on)."""


class StoreConflict(FileRefused):
    """The key holds different bytes than the file to upload: nothing was overwritten."""


class StoreMissing(StoreError):
    """No object under that key."""


class StoreRefused(StoreError):
    """The store answered that it cannot be used as configured (its bucket does not exist,
    the credentials or the access were refused, it holds another folder's archive): trying
    again will not help, so a run stops before it crawls."""


def parse_store_url(url: str) -> tuple[str, str]:
    """(bucket, prefix without a trailing slash) of an `s3://bucket/prefix` address."""
    if not isinstance(url, str) or not url.startswith("s3://"):
        raise ValueError(f"{url!r}: expected an address such as s3://bucket/prefix")
    if any(c in url for c in "?#\\") or any(ord(c) < 33 for c in url):
        raise ValueError(f"{url!r}: an s3:// address has no query, fragment, backslash or "
                         "space")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise ValueError(f"{url!r}: {bucket!r} is not a bucket name (3 to 63 lower-case "
                         "letters, digits, '.' and '-')")
    prefix = prefix.strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValueError(f"{url!r}: the prefix has an empty, '.' or '..' part")
    return bucket, prefix


def open_store(url: str, env: dict[str, str] | None = None) -> ObjectStore:
    """The store at `url` (s3://bucket/prefix), configured from the AWS_* variables of
    `env` (default: this process's). StoreError when it cannot be used as configured."""
    return ObjectStore(url, env)


def _obstore() -> Any:
    try:
        import obstore
    except ImportError:
        raise StoreError("obstore", f"not installed: an archive in object storage needs "
                         f"it ({EXTRA})") from None
    return obstore


def _has_credentials(env: dict[str, str]) -> bool:
    """Whether the environment names a credential source (keys, web identity, ECS)."""
    keys = env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")
    return bool(keys or env.get("AWS_WEB_IDENTITY_TOKEN_FILE")
                or env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
                or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"))


class ObjectStore:
    """One archive's place in a bucket. Keys are relative to the prefix ('warc/x.warc.gz')."""

    def __init__(self, url: str, env: dict[str, str] | None = None) -> None:
        try:
            self.bucket, self.prefix = parse_store_url(url)
        except ValueError as exc:
            raise StoreError(str(url), str(exc).split(": ", 1)[-1]) from None
        self.url = f"s3://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")
        env = dict(os.environ if env is None else env)
        self.endpoint = (env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or "")
        self._ob = _obstore()
        if not _has_credentials(env):
            raise StoreError(self.url, "no credentials: set AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for a store "
                             "other than AWS)")
        config: dict[str, Any] = {
            "region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"}
        if self.endpoint:
            config["endpoint"] = self.endpoint
        for key, name in (("AWS_ACCESS_KEY_ID", "access_key_id"),
                          ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
                          ("AWS_SESSION_TOKEN", "token")):
            if env.get(key):
                config[name] = env[key]
        http = {"allow_http": True} if self.endpoint.startswith("http://") else {}
        try:
            make = self._ob.store.S3Store
            self._quick = make(self.bucket, prefix=self.prefix or None, config=config,
                               client_options={**_QUICK, **http}, retry_config=_RETRY)
            self._bulk = make(self.bucket, prefix=self.prefix or None, config=config,
                              client_options={**_BULK, **http}, retry_config=_RETRY)
        except Exception as exc:  # noqa: BLE001 - obstore's configuration errors
            raise StoreError(self.url, f"cannot be configured: {_first_line(exc)}") from None

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r})"

    def where(self, key: str = "") -> str:
        return f"{self.url}/{key}" if key else self.url

    # -- writing -----------------------------------------------------------------------------
    def upload(self, path: Path, key: str) -> bool:
        """Put a closed file under `key` unless the key exists (If-None-Match: *). True: put
        now; False: the same bytes were there already (a retried upload). StoreConflict
        when other bytes are there; StoreError when the store cannot be written."""
        size = path.stat().st_size
        if size > SINGLE_PUT_MAX:
            raise FileRefused(self.where(key), f"{size:,} bytes: larger than S3's largest "
                             "single PUT (5 GiB), which the conditional put needs; lower "
                             "[archive] warc_max_bytes")
        digest = file_digest(path, "sha256")
        there = self._head(key)
        if there is not None:
            return self._same(key, path, size, digest, there)
        ob = self._ob
        try:
            with _mapped(path) as data:
                ob.put(self._bulk, key, data, mode="create", use_multipart=False,
                       attributes={SHA256: digest})
        except (ob.exceptions.AlreadyExistsError, ob.exceptions.PreconditionError):
            # put meanwhile, or by our own try whose answer was lost: compare what is there
            there = self._head(key)
            if there is None:
                raise StoreError(self.where(key), "the store refused the put as if the "
                                 "object existed, but it does not") from None
            return self._same(key, path, size, digest, there)
        except Exception as exc:  # noqa: BLE001 - translated at this one boundary
            raise self._error(exc, key, "put") from None
        return True

    def put_bytes(self, key: str, data: bytes) -> None:
        """Put (or replace) a small object."""
        self._call("put", key, lambda: self._ob.put(self._bulk, key, data))

    def put_file(self, path: Path, key: str) -> None:
        """Put (or replace) an object from a file of any size (a multipart upload past
        5 MB, streamed from the file): the index, a manifest snapshot."""
        self._call("put", key, lambda: self._ob.put(self._bulk, key, path))

    def delete(self, key: str) -> None:
        """Delete an object (nothing happens when there is none)."""
        self._call("delete", key, lambda: self._ob.delete(self._bulk, key))

    def check(self) -> None:
        """One listing of at most one key: StoreRefused naming the bucket when it does not
        exist or the credentials are refused, StoreError when the store cannot be reached.
        A missing bucket must not pass for an empty store (a HEAD of a key cannot tell)."""
        def first() -> None:
            next(iter(self._ob.list(self._quick, prefix=None, chunk_size=1)), None)
        self._call("list", "", first)

    # -- reading -----------------------------------------------------------------------------
    def get_bytes(self, key: str) -> bytes:
        """A whole (small) object; StoreMissing when there is none."""
        return bytes(self._call("get", key, lambda: self._ob.get(self._bulk, key).bytes()))

    def read_range(self, key: str, start: int, length: int) -> bytes:
        """`length` bytes from `start` (fewer at the object's end): one ranged GET."""
        if length <= 0:
            return b""
        return bytes(self._call("get", key, lambda: self._ob.get_range(
            self._quick, key, start=start, length=length)))

    def size(self, key: str) -> int | None:
        """The object's size, or None when there is none."""
        there = self._head(key)
        return None if there is None else int(there[0]["size"])

    def list(self, prefix: str = "") -> dict[str, int]:
        """Every object under `prefix` (relative to the store's): key -> size."""
        return {key: size for key, (size, _) in self.list_meta(prefix).items()}

    def list_meta(self, prefix: str = "") -> dict[str, tuple[int, str]]:
        """Every object under `prefix`: key -> (size, ETag)."""
        def collect() -> dict[str, tuple[int, str]]:
            out: dict[str, tuple[int, str]] = {}
            for batch in self._ob.list(self._quick, prefix=prefix or None, chunk_size=1000):
                for meta in batch:
                    out[str(meta["path"])] = (int(meta["size"]), str(meta.get("e_tag") or ""))
            return out
        listed: dict[str, tuple[int, str]] = self._call("list", prefix or "", collect)
        return listed

    def stat(self, key: str) -> tuple[int, str] | None:
        """(size, ETag) of the object, or None when there is none."""
        there = self._head(key)
        return None if there is None else (int(there[0]["size"]), str(there[0].get("e_tag")))

    def download(self, key: str, path: Path) -> None:
        """The object into `path`, streamed, atomically: a temporary file beside it,
        fsynced, checked against the object's size, renamed."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.download.tmp")
        try:
            with open(tmp, "wb") as out:
                with self.open_stream(key) as src:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                    expected = src.size
                out.flush()
                os.fsync(out.fileno())
                if out.tell() != expected:
                    raise StoreError(self.where(key), f"the download ended after "
                                     f"{out.tell():,} of {expected:,} bytes")
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def open_stream(self, key: str) -> ObjectStream:
        """The object as a file to read from its start to its end, in bounded memory."""
        result = self._call("get", key, lambda: self._ob.get(self._bulk, key))
        return ObjectStream(self, key, result)

    def open_range(self, key: str, start: int, length: int,
                   chunk: int = 1 << 16) -> RangeReader:
        """Bytes [start, start + length) of the object as a file, fetched `chunk` bytes at a
        time by ranged GETs, as they are read (a record's head costs one GET)."""
        return RangeReader(self, key, start, length, chunk)

    # -- the boundary ------------------------------------------------------------------------
    def _head(self, key: str) -> tuple[dict[str, Any], dict[str, str]] | None:
        """(meta, attributes) of the object, or None when there is none."""
        try:
            result = self._call("head", key, lambda: self._ob.get(
                self._quick, key, options={"head": True}))
        except StoreMissing:
            return None
        return dict(result.meta), {str(k).lower(): str(v) for k, v in
                                   dict(result.attributes).items()}

    def _same(self, key: str, path: Path, size: int, digest: str,
              there: tuple[dict[str, Any], dict[str, str]]) -> bool:
        """False when the object holds the file's bytes; else StoreConflict."""
        meta, attributes = there
        theirs = attributes.get(SHA256)
        if int(meta["size"]) == size and theirs == digest:
            return False
        if int(meta["size"]) == size and theirs is None:
            etag = _MD5.fullmatch(str(meta.get("e_tag") or ""))
            if etag and etag.group(1) == file_digest(path, "md5"):
                return False
            if not etag:
                raise StoreConflict(self.where(key), "exists without a SHA-256 and with an "
                                    "ETag that is not an MD5: cannot tell whether it holds "
                                    f"the bytes of {path}; not overwritten")
        raise StoreConflict(self.where(key), f"exists with other bytes ({int(meta['size']):,} "
                            f"bytes, sha256 {theirs or 'unknown'}) than {path} ({size:,} "
                            f"bytes, sha256 {digest}); not overwritten")

    def _call(self, op: str, key: str, fn: Any) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - translated at this one boundary
            raise self._error(exc, key, op) from None

    def _error(self, exc: BaseException, key: str, op: str) -> StoreError:
        where, text = self.where(key), _first_line(exc)
        errors = self._ob.exceptions
        lower = text.lower()
        if "nosuchbucket" in lower or (op in ("put", "list") and (
                isinstance(exc, errors.NotFoundError | FileNotFoundError)
                or "404 not found" in lower)):
            return StoreRefused(where, f"bucket {self.bucket!r} does not exist"
                              + (f" at {self.endpoint}" if self.endpoint else ""))
        if isinstance(exc, errors.NotFoundError | FileNotFoundError):
            return StoreMissing(where, "no such object")
        if isinstance(exc, errors.AlreadyExistsError | errors.PreconditionError):
            return StoreConflict(where, "exists already; not overwritten")
        if any(s in str(exc) for s in ("InvalidAccessKeyId", "SignatureDoesNotMatch",
                                       "401 Unauthorized")) \
                or isinstance(exc, errors.UnauthenticatedError):
            return StoreRefused(where, f"bucket {self.bucket!r}: the credentials were "
                                "refused (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY): "
                                f"{_detail(text)}")
        if "403 Forbidden" in text or isinstance(exc, errors.PermissionDeniedError):
            return StoreRefused(where, f"bucket {self.bucket!r}: access denied: "
                                f"{_detail(text)}")
        if "error sending request" in lower or "connect" in lower or "timed out" in lower:
            return StoreError(where, "cannot reach the store's endpoint "
                              f"{self.endpoint or '(AWS)'}: {_detail(text)}")
        return StoreError(where, f"{op} failed: {_detail(text)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _detail(text: str) -> str:
    """obstore's message without its URL-laden preamble, shortened."""
    text = re.sub(r"Error performing \w+ \S+ in [\d.]+\S*( after [^-]*)?- ", "", text)
    return text if len(text) <= 300 else text[:297] + "..."


@contextmanager
def _mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes as a read-only memory map (b"" for an empty file)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def file_digest(path: Path, algorithm: str) -> str:
    """The hex digest of a file, read in 1 MiB chunks."""
    import hashlib  # here: it loads OpenSSL, which `mirror check` need not

    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class ObjectStream(io.RawIOBase):
    """A whole object, read in order as obstore streams it (for verify and WACZ)."""

    def __init__(self, store: ObjectStore, key: str, result: Any) -> None:
        super().__init__()
        self.store, self.key = store, key
        self.size = int(result.meta["size"])
        self._chunks = iter(result.stream(min_chunk_size=1 << 20))
        self._buf = memoryview(b"")
        self._pos = 0

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def readinto(self, b: Any) -> int:
        if not self._buf:
            try:
                self._buf = memoryview(bytes(next(self._chunks)))
            except StopIteration:
                return 0
            except Exception as exc:  # noqa: BLE001 - translated at the boundary
                raise self.store._error(exc, self.key, "get") from None
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._pos += n
        return n


class RangeReader(io.RawIOBase):
    """Part of an object as a seekable file; bytes come by ranged GETs as they are read."""

    def __init__(self, store: ObjectStore, key: str, start: int, length: int,
                 chunk: int) -> None:
        super().__init__()
        self.store, self.key = store, key
        self.start, self.end, self.chunk = start, start + length, max(chunk, 1)
        self._pos = start  # absolute offset in the object
        self._buf, self._buf_at = b"", start

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.end}[whence]
        self._pos = base + offset
        return self._pos

    def readinto(self, b: Any) -> int:
        if self._pos >= self.end or self._pos < self.start:
            return 0
        inside = self._pos - self._buf_at
        if not 0 <= inside < len(self._buf):
            want = min(max(self.chunk, len(b)), self.end - self._pos)
            self._buf = self.store.read_range(self.key, self._pos, want)
            self._buf_at, inside = self._pos, 0
            if len(self._buf) < want:  # the object ends here
                self.end = self._pos + len(self._buf)
            if not self._buf:
                return 0
        n = min(len(b), len(self._buf) - inside, self.end - self._pos)
        b[:n] = self._buf[inside:inside + n]
        self._pos += n
        return n
