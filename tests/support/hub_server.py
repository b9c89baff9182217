"""A stand-in Hugging Face Hub: a small local HTTP server that pushes and loads can talk to.

Tests cannot reach the real Hub, yet pushing a repository and loading it back with
``load_dataset("org/name", config)`` should run the real client code of ``huggingface_hub``
and ``datasets``. This server speaks the part of the Hub's HTTP API those clients use:

- ``GET /api/whoami-v2``; ``POST /api/repos/create``; ``POST /api/validate-yaml``;
- ``POST /api/{type}s/{repo}/preupload/{rev}`` (upload mode per file: LFS for binary files,
  files of 10 MB or more and the patterns of ``.gitattributes``);
- ``POST /{prefix}{repo}.git/info/lfs/objects/batch``, then ``PUT /_lfs/{oid}`` and
  ``POST /_lfs/{oid}/verify`` (the basic transfer; the sha256 of every upload is checked);
- ``POST /api/{type}s/{repo}/commit/{rev}`` (ndjson: header, file, lfsFile, deletedFile,
  deletedFolder; ``parentCommit`` checked: 412 when the branch moved on); with ``create_pr=1``
  the commit opens a pull request (any signed-in user may): a discussion ``N`` and a new ref
  ``refs/pr/N`` from ``rev``, which later commits of its author or of a writer (and downloads)
  may name as their revision while it is open;
- ``GET /api/{type}s/{repo}/discussions`` (``type``, ``status``, ``author``, pages ``p``),
  ``POST .../discussions/{N}/status`` and ``.../discussions/{N}/merge``;
- evaluation results as the Hub's specification has them (``rf100vl_hf.hub.specification``,
  the same check the library runs before a push): a commit leaving a dataset repository with
  an ``eval.yaml`` that breaks the specification, or whose tasks name a config or split its
  card does not list, is refused (400, as the Hub validates it at push time). A dataset is a
  *benchmark* when its ``main`` has a valid ``eval.yaml`` whose ``evaluation_framework`` is
  in :attr:`StandInHub.frameworks` (the Hub's list, as of the specification's date; a test
  registers another as a merged huggingface.js pull request would). ``GET
  /api/models/{repo}?expand=evalResults`` lists the entries of the ``.eval_results/*.yaml``
  of ``main`` and of open pull requests (those with ``pullRequest``) on benchmarks, and each
  file that breaks the specification or names a task its benchmark does not declare as
  ``{"filename", "error"}``; ``GET /api/datasets/{repo}/leaderboard`` ranks them per task
  (404 for a dataset that is not a benchmark);
- ``POST /api/{type}s/{repo}/branch/{branch}``, ``GET /api/{type}s/{repo}/refs``;
- ``GET /api/{type}s/{repo}[/revision/{rev}]`` (repo info), ``GET .../tree/{rev}[/{path}]``
  (``recursive``, ``expand``, paginated with a ``Link`` header), ``POST .../paths-info/{rev}``;
- ``GET``/``HEAD /{prefix}{repo}/resolve/{rev}/{path}`` with ``ETag``, ``X-Repo-Commit``,
  ``Content-Length`` and ``Range`` support (files are served directly, no CDN redirect).

Faults can be injected, so tests can prove that clients fail clearly and in bounded time:
:meth:`StandInHub.fail` answers an endpoint (by route name, e.g. ``"commit"``) with an
error status, :meth:`StandInHub.answer` with a body of the test's own (HTML, JSON of the
wrong shape), :meth:`StandInHub.hang` makes it accept the request and never answer, and
``with hub.down():`` closes the port for the duration of the block.

Errors carry the ``X-Error-Code`` headers the client maps to its exceptions
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``). Reading a public repository
needs no token; writing needs :attr:`StandInHub.token` (user :data:`USER`, member of
:data:`ORG`); a wrong token is refused with 401 everywhere, as on the Hub. Blobs are stored
once per sha256 in a folder; commits and branches are kept in memory.

:func:`serve_hub` starts the server in a thread and points both libraries at it for the
duration of a ``with`` block. ``huggingface_hub`` reads its settings into
``huggingface_hub.constants`` and ``datasets`` into ``datasets.config`` when they are
imported, and the test session has imported them (offline) long before, so setting
``HF_ENDPOINT`` is not enough: the block patches the module attributes the libraries read
at call time (endpoint, offline mode, Xet off, telemetry off, the hub cache and the token
file, both moved under the server's folder), the endpoint of the ``HfApi`` instance behind
the top-level functions (``huggingface_hub.create_repo``...), built at import, and the
environment, and restores all of it on exit; ``HfFileSystem`` instances, which fsspec
caches, are dropped. Clients built inside the block (``HfApi()``, ``HfFileSystem()``) need
no arguments. The ``hub_server`` fixture of ``tests/conftest.py`` wraps it::

    def test_push(hub_server, tmp_path):
        push_repository(folder, "org/name", token=hub_server.token)
        ds = load_dataset("org/name", "config", split="test")
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import re
import socket
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import pytest
import yaml

USER = "tester"
ORG = "org"
TOKEN = "hf_standin_write_token"
LFS_THRESHOLD = 10 * 1024 * 1024
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in ("*.parquet", "*.arrow", "*.bin", "*.png", "*.jpg", "*.jpeg", "*.zip", "*.gz", "*.tar")
)
_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob with ``data`` (what the Hub reports as a regular file's oid)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class StoredFile:
    size: int
    sha256: str  # the blob's name in storage
    lfs: bool
    last_commit: str  # the commit that last changed the file
    content_oid: str  # git oid of the content, for a regular file

    @property
    def blob_id(self) -> str:
        """The git oid: of the content for a regular file, of the pointer for an LFS file."""
        return git_blob_id(lfs_pointer(self.sha256, self.size)) if self.lfs else self.content_oid

    @property
    def oid(self) -> str:
        """What preupload reports, as the client computes it locally: sha256 for LFS, git oid otherwise."""
        return self.sha256 if self.lfs else self.content_oid


@dataclass
class Commit:
    oid: str
    title: str
    date: str
    files: dict[str, StoredFile]


@dataclass
class Discussion:
    """A pull request (the only discussions the stand-in opens): its ref is ``refs/pr/{num}``."""

    num: int
    title: str
    author: str
    created: str
    base: str  # the commit it was opened from, for a merge
    status: str = "open"  # open, closed or merged

    @property
    def ref(self) -> str:
        return f"refs/pr/{self.num}"


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    branches: dict[str, str] = field(default_factory=dict)  # also holds the refs/pr/N of pull requests
    commits: dict[str, Commit] = field(default_factory=dict)
    discussions: list[Discussion] = field(default_factory=list)

    def open_pull_requests(self) -> list[Discussion]:
        return [d for d in self.discussions if d.status == "open"]

    def resolve(self, revision: str) -> Commit | None:
        """A branch name or a commit id (full, or a prefix of at least 7 characters)."""
        revision = unquote(revision)
        if revision in self.branches:
            return self.commits[self.branches[revision]]
        if re.fullmatch(r"[0-9a-f]{7,40}", revision):
            found = [c for oid, c in self.commits.items() if oid.startswith(revision)]
            if len(found) == 1:
                return found[0]
        return None


class HubError(Exception):
    """An HTTP error answer, with the Hub's ``X-Error-Code``/``X-Error-Message`` headers."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None,
                 **extra: Any):
        super().__init__(message)
        self.status, self.message, self.code, self.headers, self.extra = status, message, code, headers or {}, extra


class StandInHub:
    """The server's state (repositories, blobs, tokens) and its lifecycle.

    ``requests`` records ``(method, path, status)`` of every request, which helps to see
    what a client asked when a test fails; ``tree_page_size`` and ``tree_expand_page_size``
    (1000 and 50, as on the Hub) and ``discussions_page_size`` (50) can be lowered to exercise
    the client's pagination; ``frameworks`` holds the evaluation framework ids it accepts.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.blobs = self.root / "blobs"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.token = TOKEN
        self.user = USER
        self.orgs = [ORG]
        self.tokens = {TOKEN: USER}
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[str, str, int]] = []
        self.tree_page_size = 1000
        self.tree_expand_page_size = 50
        self.discussions_page_size = 50
        self.frameworks: set[str] = set(_specification().FRAMEWORKS)
        self.lock = threading.RLock()
        self.faults: dict[str, int] = {}  # route -> the status it answers
        self.answers: dict[str, tuple[bytes, str]] = {}  # route -> the body (and its type) it answers
        self.hanging: set[str] = set()
        self.connections: set[Any] = set()  # open client sockets, closed when the server goes down
        self._release = threading.Event()
        self._announced: set[tuple[str, int]] = set()
        self._counter = 0
        self._server = self._listen(0)
        self._url = "http://{}:{}".format(*self._server.server_address[:2])
        self._thread: threading.Thread | None = None

    def _listen(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        server.daemon_threads = True
        server.hub = self  # type: ignore[attr-defined]
        return server

    @property
    def url(self) -> str:
        return self._url

    def start(self) -> None:
        self._release.clear()
        self._thread = threading.Thread(target=self._server.serve_forever, name="stand-in-hub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._release.set()  # hanging requests end (unanswered)
        self._server.shutdown()
        self._server.server_close()
        with self.lock:
            for connection in list(self.connections):  # kept-alive connections would keep serving
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join()
        self._thread = None

    # Faults ----------------------------------------------------------------------------

    def fail(self, route: str, status: int = 500) -> None:
        """Answer requests to ``route`` (a name of ``_ROUTES``, e.g. "commit") with ``status``
        until :meth:`clear_faults`."""
        with self.lock:
            self.faults[route] = status

    def answer(self, route: str, body: bytes, content_type: str = "application/json") -> None:
        """Answer requests to ``route`` with 200 and ``body`` until :meth:`clear_faults`."""
        with self.lock:
            self.answers[route] = (body, content_type)

    def hang(self, route: str) -> None:
        """Accept requests to ``route`` and never answer them (until :meth:`clear_faults` or stop)."""
        with self.lock:
            self.hanging.add(route)

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()
            self.answers.clear()
            self.hanging.clear()
        self._release.set()
        self._release = threading.Event()

    def injected(self, route: str) -> int | None:
        """The status to answer ``route`` with instead of serving it, if a fault is set."""
        with self.lock:
            return self.faults.get(route)

    def wait_hanging(self, route: str) -> bool:
        """Block a request to a hanging route until released; True when it was one."""
        if route not in self.hanging:
            return False
        self._release.wait(timeout=600)
        return True

    @contextmanager
    def down(self) -> Iterator[None]:
        """Nothing listens on the server's port inside the block (connections are refused)."""
        port = self._server.server_address[1]
        self.stop()
        try:
            yield
        finally:
            self._server = self._listen(port)
            self.start()

    # Storage -------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        sha256 = hashlib.sha256(data).hexdigest()
        path = self.blobs / sha256
        if not path.exists():
            tmp = path.with_suffix(".tmp-" + threading.current_thread().name)
            tmp.write_bytes(data)
            tmp.replace(path)
        return sha256

    def read_blob(self, sha256: str) -> bytes:
        return (self.blobs / sha256).read_bytes()

    def has_blob(self, sha256: str, size: int | None = None) -> bool:
        path = self.blobs / sha256
        return path.is_file() and (size is None or path.stat().st_size == size)

    def stored(self, data: bytes, lfs: bool, commit: str) -> StoredFile:
        return StoredFile(len(data), self.put_blob(data), lfs, commit, git_blob_id(data))

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> dict[str, bytes]:
        """The content of every file of a repository at a revision (for assertions in tests)."""
        commit = self.repos[(repo_type, repo_id)].resolve(revision)
        assert commit is not None, f"no revision {revision!r} in {repo_id}"
        return {path: self.read_blob(f.sha256) for path, f in commit.files.items()}

    # Repositories --------------------------------------------------------------------

    def new_oid(self, *parts: str) -> str:
        with self.lock:
            self._counter += 1
            return hashlib.sha1("\0".join((str(self._counter), *parts)).encode()).hexdigest()

    def create_repo(self, repo_type: str, repo_id: str, private: bool) -> Repo:
        repo = Repo(repo_type, repo_id, private)
        oid = self.new_oid(repo_id, "initial commit")
        attributes = self.stored(DEFAULT_GITATTRIBUTES.encode(), False, oid)
        repo.commits[oid] = Commit(oid, "initial commit", _now(), {".gitattributes": attributes})
        repo.branches["main"] = oid
        self.repos[(repo_type, repo_id)] = repo
        return repo

    def can_write(self, user: str | None, repo_id: str) -> bool:
        return user is not None and repo_id.split("/")[0] in {user, *self.orgs}

    def announce(self, sha256: str, size: int) -> None:
        with self.lock:
            self._announced.add((sha256, size))

    def was_announced(self, sha256: str, size: int) -> bool:
        with self.lock:
            return (sha256, size) in self._announced


    # Evaluation results ----------------------------------------------------------------

    def text(self, commit: Commit, path: str) -> str | None:
        stored = commit.files.get(path)
        return self.read_blob(stored.sha256).decode("utf-8", "replace") if stored else None

    def eval_yaml_refusal(self, files: dict[str, StoredFile]) -> str | None:
        """Why a dataset repository holding ``files`` has an ``eval.yaml`` the Hub refuses (None: it does not)."""
        blob = files["eval.yaml"]
        try:
            data = yaml.safe_load(self.read_blob(blob.sha256))
        except yaml.YAMLError as exc:
            return f"eval.yaml is not YAML ({str(exc).splitlines()[0]})"
        problems = _specification().eval_yaml_problems(data)
        card = files.get("README.md")
        configs = _card_configs(self.read_blob(card.sha256).decode("utf-8", "replace")) if card else None
        if not problems and configs is not None:
            problems = _specification().task_resolution_problems(data["tasks"], *configs)
        return "; ".join(problems) or None

    def benchmark_tasks(self, dataset: str) -> tuple[list[str] | None, str]:
        """The task ids of the benchmark ``dataset`` (None when it is not one), and why it is not."""
        repo = self.repos.get(("dataset", dataset))
        if repo is None or repo.private:
            return None, f"there is no public dataset {dataset}"
        text = self.text(repo.commits[repo.branches["main"]], "eval.yaml")
        if text is None:
            return None, f"{dataset} has no eval.yaml"
        data = yaml.safe_load(text)  # validated when it was pushed
        if data["evaluation_framework"] not in self.frameworks:
            return None, (f"the eval.yaml of {dataset} names evaluation_framework {data['evaluation_framework']!r}, "
                          "which is not a registered evaluation framework")
        return [task["id"] for task in data["tasks"]], ""

    def eval_result_files(self, repo: Repo) -> list[tuple[str, int | None, str]]:
        """(path, pull request, text) of the ``.eval_results`` files of ``main`` and of each
        open pull request (those it changes)."""
        main = repo.commits[repo.branches["main"]]
        found: list[tuple[str, int | None, str]] = [
            (path, None, self.text(main, path) or "") for path in sorted(main.files) if _is_eval_file(path)]
        for pr in repo.open_pull_requests():
            head = repo.commits[repo.branches[pr.ref]]
            found += [(path, pr.num, self.text(head, path) or "") for path in sorted(head.files)
                      if _is_eval_file(path) and head.files[path].sha256 != getattr(main.files.get(path), "sha256", None)]
        return found

    def eval_results(self, repo: Repo) -> list[dict[str, Any]]:
        """The ``evalResults`` of a model: its entries on benchmarks, and its files with errors."""
        items: list[dict[str, Any]] = []
        for path, pr, text in self.eval_result_files(repo):
            origin = {"pullRequest": pr} if pr else {}
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                items.append({"filename": path, "error": f"not YAML ({str(exc).splitlines()[0]})", **origin})
                continue
            problems = _specification().eval_result_problems(data)
            for entry in data if not problems else []:
                tasks, _ = self.benchmark_tasks(entry["dataset"]["id"])
                if tasks is not None and entry["dataset"]["task_id"] not in tasks:
                    problems.append(f"task {entry['dataset']['task_id']!r} is not a task of the eval.yaml of "
                                    f"{entry['dataset']['id']}")
            if problems:
                items.append({"filename": path, "error": "; ".join(problems), **origin})
                continue
            items += [{"filename": path, "data": entry, **origin} for entry in data
                      if self.benchmark_tasks(entry["dataset"]["id"])[0] is not None]
        return items

    def leaderboard(self, dataset: str) -> list[dict[str, Any]]:
        """The leaderboard of the benchmark ``dataset``: per task, its public models by value."""
        tasks, why = self.benchmark_tasks(dataset)
        if tasks is None:
            raise HubError(404, f"{dataset} is not a benchmark: {why}")
        found = [(repo.repo_id, item) for repo in list(self.repos.values()) if repo.repo_type == "model" and not repo.private
                 for item in self.eval_results(repo) if item.get("data", {}).get("dataset", {}).get("id") == dataset]
        ranked = []
        for task in tasks:
            of_task = sorted((pair for pair in found if pair[1]["data"]["dataset"]["task_id"] == task),
                             key=lambda pair: -pair[1]["data"]["value"])
            for rank, (repo_id, item) in enumerate(of_task, start=1):
                entry, owner = item["data"], repo_id.split("/")[0]
                ranked.append({"rank": rank, "modelId": repo_id, "value": entry["value"], "filename": item["filename"],
                               "verified": False, "source": entry.get("source"), "notes": entry.get("notes"),
                               "author": {"type": "org" if owner in self.orgs else "user", "name": owner},
                               "pullRequest": item.get("pullRequest"), "taskId": task})
        return ranked


# Request handling ----------------------------------------------------------------------

_REPO = r"(?P<repo>[^/]+/[^/]+)"
_API = rf"^/api/(?P<kind>models|datasets|spaces)/{_REPO}"
_PREFIXED = rf"^/(?:(?P<kind>datasets|spaces)/)?{_REPO}"
_ROUTES: list[tuple[str, str, str]] = [
    ("GET", r"^/api/whoami-v2$", "whoami"),
    ("POST", r"^/api/repos/create$", "create_repo"),
    ("POST", r"^/api/validate-yaml$", "validate_yaml"),
    ("POST", _API + r"/preupload/(?P<rev>[^/]+)$", "preupload"),
    ("POST", _API + r"/commit/(?P<rev>[^/]+)$", "commit"),
    ("POST", _API + r"/branch/(?P<branch>[^/]+)$", "create_branch"),
    ("GET", _API + r"/refs$", "refs"),
    ("GET", _API + r"/discussions$", "discussions"),
    ("POST", _API + r"/discussions/(?P<num>\d+)/status$", "discussion_status"),
    ("POST", _API + r"/discussions/(?P<num>\d+)/merge$", "merge"),
    ("GET", rf"^/api/datasets/{_REPO}/leaderboard$", "leaderboard"),
    ("GET", _API + r"(?:/revision/(?P<rev>[^/]+))?$", "repo_info"),
    ("GET", _API + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$", "tree"),
    ("POST", _API + r"/paths-info/(?P<rev>[^/]+)$", "paths_info"),
    ("POST", _PREFIXED + r"\.git/info/lfs/objects/batch$", "lfs_batch"),
    ("PUT", r"^/_lfs/(?P<oid>[0-9a-f]{64})$", "lfs_put"),
    ("POST", r"^/_lfs/(?P<oid>[0-9a-f]{64})/verify$", "lfs_verify"),
    ("GET", _PREFIXED + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", "resolve"),
    ("HEAD", _PREFIXED + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", "resolve"),
]
_INVALID = object()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's pooled connections expect
    server: ThreadingHTTPServer

    @property
    def hub(self) -> StandInHub:
        return self.server.hub  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # the request log is kept in hub.requests
        pass

    def setup(self) -> None:
        super().setup()
        with self.hub.lock:
            self.hub.connections.add(self.connection)

    def finish(self) -> None:
        with self.hub.lock:
            self.hub.connections.discard(self.connection)
        super().finish()

    # Plumbing ------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              content_type: str = "application/json", length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        self.hub.requests.append((self.command, self.path, status))

    def _json(self, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), headers)

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        self.query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.expand = parse_qs(url.query).get("expand", [])
        self.body = self._body() if self.command in ("POST", "PUT") else b""
        try:
            self.user = self._authenticate()
            for method, pattern, name in _ROUTES:
                match = re.match(pattern, url.path) if method == self.command else None
                if match:
                    if self.hub.wait_hanging(name):
                        self.close_connection = True
                        return
                    status = self.hub.injected(name)
                    if status is not None:
                        raise HubError(status, f"injected fault: {self.command} {url.path} answers {status}")
                    if name in self.hub.answers:
                        body, content_type = self.hub.answers[name]
                        self._send(200, body, content_type=content_type)
                        return
                    getattr(self, "do_" + name)(**{k: unquote(v) if v else v for k, v in match.groupdict().items()})
                    return
            raise HubError(404, f"the stand-in Hub does not serve {self.command} {url.path}")
        except HubError as exc:
            headers = dict(exc.headers)
            if exc.code:
                headers["X-Error-Code"] = exc.code
            headers["X-Error-Message"] = exc.message
            self._json({"error": exc.message, **exc.extra}, exc.status, headers)

    do_GET = do_POST = do_PUT = do_HEAD = _dispatch  # type: ignore[assignment]

    def _authenticate(self) -> str | None:
        header = self.headers.get("Authorization")
        if not header:
            return None
        user = self.hub.tokens.get(header.removeprefix("Bearer").strip(), _INVALID)
        if user is _INVALID:
            raise HubError(401, "Invalid credentials in Authorization header")
        return user  # type: ignore[return-value]

    def _require_user(self) -> str:
        if self.user is None:
            raise HubError(401, "You must be authenticated to do this: pass a token")
        return self.user

    def _repo(self, kind: str | None, repo_id: str, write: bool = False) -> Repo:
        repo_type = _TYPES[kind] if kind else "model"
        repo = self.hub.repos.get((repo_type, repo_id))
        if repo is None or (repo.private and not self.hub.can_write(self.user, repo_id)):
            raise HubError(404, "Repository not found", "RepoNotFound")
        if write and not self.hub.can_write(self._require_user(), repo_id):
            raise HubError(403, f"You don't have the rights to write to {repo_id}")
        return repo

    def _writable(self, kind: str, repo_id: str, rev: str) -> tuple[Repo, Discussion | None]:
        """The repository a commit to ``rev`` goes to, and the pull request whose ref it is: any
        signed-in user may open a pull request, its author may commit to it while it is open."""
        target = self._repo(kind, repo_id)
        user = self._require_user()
        pr = next((d for d in target.discussions if d.ref == unquote(rev)), None)
        opening = self.query.get("create_pr", "").lower() in ("1", "true")
        if not (self.hub.can_write(user, repo_id) or opening or (pr is not None and pr.author == user)):
            raise HubError(403, f"You don't have the rights to write to {repo_id}")
        if pr is not None and pr.status != "open":
            raise HubError(403, f"Pull request #{pr.num} is {pr.status}: commits to it are refused")
        return target, pr

    def _commit(self, repo: Repo, revision: str) -> Commit:
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    def _json_body(self) -> Any:
        try:
            return json.loads(self.body or b"{}")
        except json.JSONDecodeError as exc:
            raise HubError(400, f"body is not JSON: {exc}") from None

    # Account and repositories ---------------------------------------------------------

    def do_whoami(self) -> None:
        user = self._require_user()
        self._json({
            "type": "user", "id": hashlib.sha1(user.encode()).hexdigest()[:24], "name": user, "fullname": user,
            "orgs": [{"type": "org", "name": org} for org in self.hub.orgs],
            "auth": {"type": "access_token", "accessToken": {"displayName": "stand-in", "role": "write"}},
        })

    def do_create_repo(self) -> None:
        user = self._require_user()
        payload = self._json_body()
        repo_type = payload.get("type") or "model"
        repo_id = f"{payload.get('organization') or user}/{payload['name']}"
        if not self.hub.can_write(user, repo_id):
            raise HubError(403, f"You don't have the rights to create a repository under {repo_id.split('/')[0]}")
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        url = f"{self.hub.url}/{_URL_PREFIX[repo_type]}{repo_id}"
        with self.hub.lock:
            if (repo_type, repo_id) in self.hub.repos:
                raise HubError(409, "You already created this repo", url=url)
            self.hub.create_repo(repo_type, repo_id, private)
        self._json({"url": url, "name": repo_id})

    def do_validate_yaml(self) -> None:
        content = self._json_body().get("content", "")
        match = re.match(r"^---\r?\n(.*?)\r?\n---", content, flags=re.DOTALL)
        errors = []
        try:
            data = yaml.safe_load(match.group(1)) if match else {}
        except yaml.YAMLError as exc:
            data, errors = None, [f"YAML does not parse: {exc}"]
        if not errors and not isinstance(data, dict):
            errors.append("the metadata block must be a mapping")
        elif not errors:
            errors += _card_errors(data)
        self._json({"errors": [{"message": m} for m in errors], "warnings": []}, 400 if errors else 200)

    def do_create_branch(self, kind: str, repo: str, branch: str) -> None:
        target = self._repo(kind, repo, write=True)
        start = self._json_body().get("startingPoint") or "main"
        with self.hub.lock:
            if branch in target.branches:
                raise HubError(409, "Reference already exists")
            target.branches[branch] = self._commit(target, start).oid
        self._json({})

    def do_refs(self, kind: str, repo: str) -> None:
        target = self._repo(kind, repo)
        branches = [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": oid}
                    for n, oid in target.branches.items() if not n.startswith("refs/pr/")]
        pulls = [{"name": n, "ref": n, "targetCommit": oid}
                 for n, oid in target.branches.items() if n.startswith("refs/pr/")]
        include = self.query.get("include_prs", "").lower() in ("1", "true")
        self._json({"branches": branches, "converts": [], "tags": [], **({"pullRequests": pulls} if include else {})})

    def _discussion(self, target: Repo, num: str) -> Discussion:
        found = next((d for d in target.discussions if d.num == int(num)), None)
        if found is None:
            raise HubError(404, f"Discussion #{num} not found")
        return found

    def do_discussions(self, kind: str, repo: str) -> None:
        target = self._repo(kind, repo)
        wanted, status, author = self.query.get("type", "all"), self.query.get("status", "all"), self.query.get("author")
        chosen = [d for d in reversed(target.discussions) if wanted in ("all", "pull_request")
                  and (status == "all" or d.status == status or (status == "closed" and d.status == "merged"))
                  and author in (None, d.author)]
        start = int(self.query.get("p") or 0) * self.hub.discussions_page_size
        page = chosen[start : start + self.hub.discussions_page_size]
        self._json({
            "discussions": [{"num": d.num, "title": d.title, "author": {"name": d.author, "type": "user"},
                             "createdAt": d.created, "status": d.status, "isPullRequest": True,
                             "repo": {"name": repo, "type": target.repo_type}, "numComments": 0, "pinned": False}
                            for d in page],
            "count": len(chosen), "start": start,
            "numClosedDiscussions": sum(d.status != "open" for d in target.discussions),
        })

    def do_discussion_status(self, kind: str, repo: str, num: str) -> None:
        target = self._repo(kind, repo)
        user = self._require_user()
        pr = self._discussion(target, num)
        if not (self.hub.can_write(user, repo) or pr.author == user):
            raise HubError(403, f"You don't have the rights to change the status of #{num}")
        status = self._json_body().get("status")
        if status not in ("open", "closed") or pr.status == "merged":
            raise HubError(400, f"cannot set the status of #{num} ({pr.status}) to {status!r}")
        pr.status = status
        self._json({"newStatus": {"id": self.hub.new_oid(repo, num, status)[:24], "type": "status-change",
                                  "createdAt": _now(), "author": {"name": user}, "data": {"status": status}}})

    def do_merge(self, kind: str, repo: str, num: str) -> None:
        target = self._repo(kind, repo, write=True)
        with self.hub.lock:
            pr = self._discussion(target, num)
            if pr.status != "open":
                raise HubError(400, f"Pull request #{num} is {pr.status}")
            base, head = target.commits[pr.base], target.commits[target.branches[pr.ref]]
            main = target.commits[target.branches["main"]]
            files = dict(main.files)
            for path in set(base.files) | set(head.files):
                before, after = base.files.get(path), head.files.get(path)
                if (before and (before.sha256, before.lfs)) != (after and (after.sha256, after.lfs)):
                    if after is None:
                        files.pop(path, None)
                    else:
                        files[path] = after
            oid = self.hub.new_oid(repo, "merge", num)
            target.commits[oid] = Commit(oid, f"Merge #{num}: {pr.title}", _now(), files)
            target.branches["main"] = oid
            pr.status = "merged"
        self._json({})

    def do_leaderboard(self, repo: str) -> None:
        self._repo("datasets", repo)
        with self.hub.lock:
            self._json(self.hub.leaderboard(repo))

    def do_repo_info(self, kind: str, repo: str, rev: str | None = None) -> None:
        target = self._repo(kind, repo)
        commit = self._commit(target, rev or "main")
        card = {}
        if "README.md" in commit.files:
            text = self.hub.read_blob(commit.files["README.md"].sha256).decode()
            match = re.match(r"^---\r?\n(.*?)\r?\n---", text, flags=re.DOTALL)
            card = (yaml.safe_load(match.group(1)) if match else None) or {}
        first = min(target.commits.values(), key=lambda c: c.date)
        info = {
            "_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "id": repo, "author": repo.split("/")[0],
            "sha": commit.oid, "lastModified": commit.date, "createdAt": first.date, "private": target.private,
            "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [], "cardData": card,
            "siblings": [{"rfilename": path} for path in sorted(commit.files)],
        }
        if self.expand:  # only the properties asked for, as on the Hub
            with self.hub.lock:
                extra = {"evalResults": self.hub.eval_results(target)} if target.repo_type == "model" else {}
            info = {key: value for key, value in {**info, **extra}.items() if key in ("_id", "id", *self.expand)}
        self._json(info)

    # Upload ---------------------------------------------------------------------------

    def _is_lfs(self, commit: Commit, path: str, size: int, sample: bytes) -> bool:
        if size >= LFS_THRESHOLD or b"\0" in sample:
            return True
        try:
            sample.decode("utf-8")
        except UnicodeDecodeError as exc:  # a cut multi-byte character at the end of the sample is still text
            if exc.start < len(sample) - 3:
                return True
        attributes = commit.files.get(".gitattributes")
        text = self.hub.read_blob(attributes.sha256).decode() if attributes else ""
        patterns = [line.split()[0] for line in text.splitlines() if "filter=lfs" in line]
        name = path.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatch(path if "/" in p else name, p) for p in patterns)

    def do_preupload(self, kind: str, repo: str, rev: str) -> None:
        target, _ = self._writable(kind, repo, rev)
        commit = self._commit(target, rev)
        answers = []
        for item in self._json_body().get("files", []):
            sample = base64.b64decode(item.get("sample") or "")
            existing = commit.files.get(item["path"])
            answers.append({
                "path": item["path"],
                "uploadMode": "lfs" if self._is_lfs(commit, item["path"], int(item["size"]), sample) else "regular",
                "shouldIgnore": False,
                "oid": existing.oid if existing else None,
            })
        self._json({"files": answers, "commitOid": commit.oid})

    def do_lfs_batch(self, kind: str | None, repo: str) -> None:
        payload = self._json_body()
        write = payload.get("operation") == "upload"
        self._repo(kind, repo, write=write)
        if "basic" not in payload.get("transfers", ["basic"]):
            raise HubError(422, "the stand-in Hub only offers the basic LFS transfer")
        objects = []
        for obj in payload.get("objects", []):
            oid, size = obj["oid"], int(obj["size"])
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if write and not self.hub.has_blob(oid, size):
                self.hub.announce(oid, size)
                entry["actions"] = {
                    "upload": {"href": f"{self.hub.url}/_lfs/{oid}", "header": {}},
                    "verify": {"href": f"{self.hub.url}/_lfs/{oid}/verify", "header": {}},
                }
            elif not write and not self.hub.has_blob(oid, size):
                entry["error"] = {"code": 404, "message": "Object does not exist"}
            objects.append(entry)
        self._send(200, json.dumps({"transfer": "basic", "objects": objects}).encode(),
                   content_type="application/vnd.git-lfs+json")

    def do_lfs_put(self, oid: str) -> None:
        if not self.hub.was_announced(oid, len(self.body)):
            raise HubError(403, "upload of an object the LFS batch did not announce (or of the wrong size)")
        if hashlib.sha256(self.body).hexdigest() != oid:
            raise HubError(400, "the uploaded bytes do not hash to the announced sha256")
        self.hub.put_blob(self.body)
        self._send(200, headers={"ETag": f'"{hashlib.md5(self.body).hexdigest()}"'})

    def do_lfs_verify(self, oid: str) -> None:
        size = self._json_body().get("size")
        if not self.hub.has_blob(oid, size):
            raise HubError(404, f"object {oid} of size {size} was not uploaded")
        self._json({"success": True})

    def do_commit(self, kind: str, repo: str, rev: str) -> None:
        target, _ = self._writable(kind, repo, rev)
        lines = [json.loads(line) for line in self.body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "a commit payload starts with its header line")
        header = lines[0]["value"]
        pull_request = None
        with self.hub.lock:
            branch = unquote(rev)
            if branch not in target.branches:
                raise HubError(404, f"Invalid rev id: {branch} (commits go to a branch)", "RevisionNotFound")
            parent = target.commits[target.branches[branch]]
            if header.get("parentCommit") and header["parentCommit"] != parent.oid:
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            oid = self.hub.new_oid(repo, header.get("summary", ""), parent.oid)
            files = dict(parent.files)
            for line in lines[1:]:
                self._apply(line["key"], line["value"], files, oid)
            touched = {line["value"].get("path") for line in lines[1:]}
            if target.repo_type == "dataset" and "eval.yaml" in files and touched & {"eval.yaml", "README.md"}:
                refusal = self.hub.eval_yaml_refusal(files)
                if refusal:
                    raise HubError(400, f"Invalid eval.yaml: {refusal}")
            if self.query.get("create_pr", "").lower() in ("1", "true"):
                pull_request = Discussion(len(target.discussions) + 1, header.get("summary", ""), self.user or "",
                                          _now(), parent.oid)
                target.discussions.append(pull_request)
                branch = pull_request.ref
            target.commits[oid] = Commit(oid, header.get("summary", ""), _now(), files)
            target.branches[branch] = oid
        prefix = _URL_PREFIX[target.repo_type]
        pr_url = f"{self.hub.url}/{prefix}{repo}/discussions/{pull_request.num}" if pull_request else None
        self._json({"success": True, "commitOid": oid, "commitUrl": f"{self.hub.url}/{prefix}{repo}/commit/{oid}",
                    "pullRequestUrl": pr_url})

    def _apply(self, key: str, value: dict, files: dict[str, StoredFile], oid: str) -> None:
        path = value["path"]
        if key == "file":
            data = base64.b64decode(value["content"]) if value.get("encoding") == "base64" else value["content"].encode()
            new = self.hub.stored(data, False, oid)
        elif key == "lfsFile":
            if not self.hub.has_blob(value["oid"], value.get("size")):
                raise HubError(422, f"LFS object {value['oid']} of {path} was never uploaded")
            size = (self.hub.blobs / value["oid"]).stat().st_size
            new = StoredFile(size, value["oid"], True, oid, "")
        elif key == "deletedFile":
            if files.pop(path, None) is None:
                raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            return
        elif key == "deletedFolder":
            prefix = path.rstrip("/") + "/"
            doomed = [p for p in files if p.startswith(prefix)]
            if not doomed:
                raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
            for p in doomed:
                del files[p]
            return
        else:
            raise HubError(400, f"unknown commit operation {key!r}")
        old = files.get(path)
        files[path] = old if old is not None and (old.sha256, old.lfs) == (new.sha256, new.lfs) else new

    # Download -------------------------------------------------------------------------

    def _entry(self, commit: Commit, path: str, expand: bool) -> dict[str, Any]:
        stored = commit.files.get(path)
        if stored is None:  # a folder
            entry: dict[str, Any] = {"type": "directory", "oid": hashlib.sha1(f"{commit.oid}:{path}".encode()).hexdigest(),
                                     "size": 0, "path": path}
            last = commit.oid
        else:
            entry = {"type": "file", "oid": stored.blob_id, "size": stored.size, "path": path}
            if stored.lfs:
                entry["lfs"] = {"oid": stored.sha256, "size": stored.size,
                                "pointerSize": len(lfs_pointer(stored.sha256, stored.size))}
            last = stored.last_commit
        if expand:
            entry["lastCommit"] = {"id": last, "title": commit.title, "date": commit.date}
            if stored is not None:
                entry["securityFileStatus"] = {"status": "safe", "avScan": {"virusFound": False}, "pickleImportScan": None}
        return entry

    @staticmethod
    def _folders(commit: Commit) -> set[str]:
        return {p.rsplit("/", i)[0] for p in commit.files for i in range(1, p.count("/") + 1)}

    def do_tree(self, kind: str, repo: str, rev: str, path: str | None = None) -> None:
        commit = self._commit(self._repo(kind, repo), rev)
        base = (path or "").strip("/")
        folders = self._folders(commit)
        if base and base not in folders:
            raise HubError(404, f"{base} is not a folder of revision {rev}", "EntryNotFound",
                           {"X-Repo-Commit": commit.oid})
        recursive = self.query.get("recursive", "").lower() in ("1", "true")
        expand = self.query.get("expand", "").lower() in ("1", "true")
        prefix = base + "/" if base else ""
        paths = sorted(
            p for p in (*folders, *commit.files)
            if p.startswith(prefix) and p != base and (recursive or "/" not in p[len(prefix):])
        )
        size = self.hub.tree_expand_page_size if expand else self.hub.tree_page_size
        start = int(self.query.get("cursor") or 0)
        page = [self._entry(commit, p, expand) for p in paths[start : start + size]]
        headers = {}
        if start + size < len(paths):
            query = urlencode({**self.query, "cursor": str(start + size)})
            headers["Link"] = f'<{self.hub.url}{urlsplit(self.path).path}?{query}>; rel="next"'
        self._json(page, headers=headers)

    def do_paths_info(self, kind: str, repo: str, rev: str) -> None:
        commit = self._commit(self._repo(kind, repo), rev)
        if self.headers.get("Content-Type", "").startswith("application/json"):
            form = self._json_body()
            paths, expand = form.get("paths", []), bool(form.get("expand"))
        else:
            form = parse_qs(self.body.decode())
            paths, expand = form.get("paths", []), form.get("expand", ["false"])[-1].lower() in ("1", "true")
        folders = self._folders(commit)
        wanted = [p.strip("/") for p in paths]
        self._json([self._entry(commit, p, expand) for p in wanted if p in commit.files or p in folders])

    def do_resolve(self, kind: str | None, repo: str, rev: str, path: str) -> None:
        target = self._repo(kind, repo)
        commit = self._commit(target, rev)
        stored = commit.files.get(path)
        if stored is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit.oid})
        data = self.hub.read_blob(stored.sha256)
        etag = stored.sha256 if stored.lfs else stored.blob_id
        headers = {"ETag": f'"{etag}"', "X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes"}
        if stored.lfs:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(stored.size)})
        status, body = 200, data
        window = _byte_range(self.headers.get("Range"), len(data))
        if window is not None:
            first, last = window
            status, body = 206, data[first : last + 1]
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        self._send(status, body, headers, content_type="application/octet-stream")


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive byte window of a single-range ``Range`` header, or None for the whole file."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", (header or "").strip())
    if not match or size == 0 or match.group(1) == match.group(2) == "":
        return None
    first, last = match.groups()
    if first == "":
        return max(0, size - int(last)), size - 1
    return int(first), min(size - 1, int(last)) if last else size - 1


def _card_errors(data: dict[str, Any]) -> list[str]:
    """The structural checks the Hub makes on a dataset card's ``configs`` and ``dataset_info``."""
    errors = []
    configs = data.get("configs", [])
    if not isinstance(configs, list):
        return ["configs must be a list"]
    for i, config in enumerate(configs):
        if not isinstance(config, dict) or not isinstance(config.get("config_name"), str):
            errors.append(f"configs[{i}] needs a config_name")
            continue
        for item in config.get("data_files", []) if isinstance(config.get("data_files"), list) else []:
            if isinstance(item, dict) and not re.fullmatch(r"\w+(\.\w+)*", str(item.get("split", ""))):
                errors.append(f"configs[{i}].data_files: bad split name {item.get('split')!r}")
    infos = data.get("dataset_info", [])
    infos = infos if isinstance(infos, list) else [infos]
    names = [info.get("config_name", "default") for info in infos if isinstance(info, dict)]
    if len(names) != len(set(names)):
        errors.append("dataset_info lists a config twice")
    return errors


def _specification() -> Any:
    """The library's table of the Hub's specification, the check a push runs too (imported when
    used: importing ``rf100vl_hf.hub`` imports both HF libraries, which this module must not)."""
    from rf100vl_hf.hub import specification

    return specification


def _is_eval_file(path: str) -> bool:
    return path.startswith(".eval_results/") and path.endswith((".yaml", ".yml"))


def _card_configs(card: str) -> tuple[dict[str, set[str]], str | None] | None:
    """The configs a dataset card lists (config -> splits) and its default config; None for a
    card that lists none (its configs come from its files, which the stand-in does not infer)."""
    match = re.match(r"^---\r?\n(.*?)\r?\n---", card, flags=re.DOTALL)
    data = yaml.safe_load(match.group(1)) if match else None
    entries = data.get("configs") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    configs, default = {}, None
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("config_name"), str):
            continue
        files = entry.get("data_files")
        items = files if isinstance(files, list) else [files]
        configs[entry["config_name"]] = {str(i["split"]) if isinstance(i, dict) and "split" in i else "train"
                                         for i in items if i is not None}
        if entry.get("default") or entry["config_name"] == "default":
            default = entry["config_name"]
    return configs, default


@contextmanager
def serve_hub(root: Path) -> Iterator[StandInHub]:
    """Run a stand-in Hub storing under ``root`` and point ``huggingface_hub`` and ``datasets`` at it."""
    import datasets.config
    import huggingface_hub.constants as hub_constants
    from huggingface_hub import HfFileSystem, hf_api

    hub = StandInHub(Path(root))
    hub.start()
    cache = Path(root) / "hf-home"
    settings: list[tuple[Any, str, Any]] = [
        (hub_constants, "ENDPOINT", hub.url),
        (hub_constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}"),
        (hub_constants, "HF_URL_HOSTS", hub_constants.HF_URL_HOSTS | {urlsplit(hub.url).hostname}),
        (hub_constants, "HF_HUB_OFFLINE", False),
        (hub_constants, "HF_HUB_DISABLE_XET", True),
        (hub_constants, "HF_HUB_DISABLE_TELEMETRY", True),
        (hub_constants, "HF_HUB_CACHE", str(cache / "hub")),
        (hub_constants, "HUGGINGFACE_HUB_CACHE", str(cache / "hub")),
        (hub_constants, "HF_TOKEN_PATH", str(cache / "token")),
        (hub_constants, "HF_STORED_TOKENS_PATH", str(cache / "stored_tokens")),
        (hf_api.api, "endpoint", hub.url),  # behind huggingface_hub.create_repo & co., built at import
        (datasets.config, "HF_ENDPOINT", hub.url),
        (datasets.config, "HUB_DATASETS_URL", hub.url + "/datasets/{repo_id}/resolve/{revision}/{path}"),
        (datasets.config, "HF_HUB_OFFLINE", False),
        (datasets.config, "HF_DATASETS_OFFLINE", False),
        (datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False),  # would HEAD a public bucket
        (datasets.config, "USE_PARQUET_EXPORT", False),  # would ask the public dataset viewer
    ]
    environment = {
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_CACHE": str(cache / "hub"),
        "HF_TOKEN_PATH": str(cache / "token"),
    }
    try:
        with pytest.MonkeyPatch.context() as patch:
            for module, name, value in settings:
                patch.setattr(module, name, value)
            for name, value in environment.items():
                patch.setenv(name, value)
            for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HUGGINGFACE_CO_STAGING"):
                patch.delenv(name, raising=False)
            yield hub
    finally:
        HfFileSystem.clear_instance_cache()  # its instances hold listings of this server's repositories
        hub.stop()


def echo_token(handler: _Handler, **_: str) -> None:
    """A route's handler that refuses with a message repeating the request's token as it came,
    percent-encoded and in base64, as a Hub error may: ``monkeypatch.setattr(_Handler,
    "do_commit", echo_token)``."""
    token = (handler.headers.get("Authorization") or "").removeprefix("Bearer").strip()
    raise HubError(400, f"refused for token {token} (as {''.join(f'%{b:02X}' for b in token.encode())} "
                        f"and {base64.b64encode(token.encode()).decode()})")
