"""The private parts of waitress, botocore and flask-smorest that the service relies on, by name.

`app/server.py` subclasses waitress's channel, parser and tasks and reads their state;
`app/streaming.py` hands waitress a file it can only read the way waitress 3.0 reads a
`wsgi.file_wrapper`; `app/storage/s3.py` sends presigned reads through botocore's own
connection pool; `app/docs/openapi.py` overrides two of flask-smorest's hooks and sets the
attribute its decorators keep a view's documentation in; `app/shared.py` implements limits'
storage interface. None of this is public API, so pyproject.toml pins all four to the minor
version checked here, and each test below names the
internal it checks: an upgrade that moves one fails here, loudly, instead of silently switching
a defence off in production (or changing the API document).
"""

from __future__ import annotations

import ast
import inspect
import re
import socket
import threading
import time
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import boto3
import flask_smorest
import pytest
from botocore import hooks
from botocore.awsrequest import AWSPreparedRequest, AWSRequest, AWSResponse
from limits.storage import Storage, storage_from_string
from packaging.requirements import Requirement
from packaging.version import Version
from waitress.adjustments import Adjustments
from waitress.buffers import ReadOnlyFileBasedBuffer
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.server import create_server
from waitress.task import ErrorTask, WSGITask
from waitress.utilities import Error

from app.docs import openapi
from app.server import Channel, JSONErrorTask, Parser, Task
from app.shared import ProcessesStorage
from app.streaming import PumpedBody

ROOT = Path(__file__).resolve().parent.parent


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def _app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("204 No Content", [])
    return []


@pytest.fixture
def server():
    server = create_server(_app, host="127.0.0.1", port=0, threads=1)
    try:
        yield server
    finally:
        server.close()
        server.task_dispatcher.shutdown()


# --- waitress: the classes app/server.py subclasses ---------------------------------------


def test_waitress_subclassed_methods_keep_their_signatures():
    """Overridden or called by app/server.py; a renamed or re-shaped one would be bypassed."""
    expected = {
        HTTPRequestParser.__init__: ["self", "adj"],
        HTTPRequestParser.parse_header: ["self", "header_plus"],
        HTTPRequestParser.received: ["self", "data"],
        HTTPRequestParser.close: ["self"],
        HTTPChannel.__init__: ["self", "server", "sock", "addr", "adj", "map"],
        HTTPChannel.received: ["self", "data"],
        HTTPChannel.readable: ["self"],
        HTTPChannel.writable: ["self"],
        HTTPChannel.handle_close: ["self"],
        HTTPChannel.send_continue: ["self"],
        ErrorTask.execute: ["self"],
        ErrorTask.set_close_on_finish: ["self"],
        ErrorTask.write: ["self", "data"],
        WSGITask.get_environment: ["self"],
    }
    for function, parameters in expected.items():
        assert _parameters(function) == parameters, function.__qualname__
    for attribute in ("error_task_class", "task_class", "parser_class"):
        assert hasattr(HTTPChannel, attribute), f"HTTPChannel.{attribute}"
    assert issubclass(Channel, HTTPChannel) and issubclass(Parser, HTTPRequestParser)
    assert issubclass(JSONErrorTask, ErrorTask) and issubclass(Task, WSGITask)
    assert issubclass(ParsingError, Exception) and {"code", "reason"} <= set(vars(Error))


def test_waitress_parser_state_read_before_a_body_is_admitted():
    """`headers_finished`, `completed`, `chunked`, `content_length`, `expect_continue`,
    `error`, `headers` and `request.body_bytes_received` (the chunked spool reservation)."""
    parser = HTTPRequestParser(Adjustments())
    head = (
        b"POST /api/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n"
        b"Expect: 100-continue\r\nContent-Length: 5\r\n\r\n"
    )
    assert parser.received(head) == len(head)
    assert parser.headers_finished is True and parser.completed is False
    assert parser.chunked is False and parser.content_length == 5
    assert parser.expect_continue is True and parser.error is None
    assert parser.headers["CONTENT_LENGTH"] == "5"
    assert parser.headers["AUTHORIZATION"] == "Bearer t"

    chunked = HTTPRequestParser(Adjustments())
    chunked.received(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert chunked.chunked is True
    chunked.received(b"3\r\nabc\r\n")
    assert chunked.body_bytes_received == len(b"3\r\nabc\r\n")  # framing counted too
    chunked.received(b"0\r\n\r\n")
    assert chunked.completed is True
    chunked.close()


def test_waitress_channel_requests_lock_outbufs_and_activity(server):
    """`channel.requests_lock`, `requests`, `request`, `outbufs` (whose first buffer's
    `file` is the pumped body), `total_outbufs_len`, `will_close`, `close_when_flushed`,
    `last_activity`, `socket` and `server`."""
    ours, theirs = socket.socketpair()
    try:
        channel = HTTPChannel(server, ours, ("127.0.0.1", 1), server.adj, map={})
        with channel.requests_lock:  # a lock, taken as app/server.py takes it
            assert channel.requests == [] and channel.request is None
        assert isinstance(channel.outbufs, list) and channel.total_outbufs_len == 0
        assert channel.will_close is False and channel.close_when_flushed is False
        assert isinstance(channel.last_activity, float) and channel.socket is ours
        assert channel.server is server
        wrapper = ReadOnlyFileBasedBuffer(PumpedBody(iter([b"x"]), 1, lambda: None))
        assert hasattr(wrapper, "file")
        wrapper.file.close()
    finally:
        ours.close()
        theirs.close()


def test_waitress_server_map_accept_maintenance_and_trigger(server):
    """`server._map`, `adj.connection_limit`, `handle_accept`, `maintenance(now)`,
    `active_channels`, `channel_class`, `pull_trigger`, `add_task`, `task_dispatcher`."""
    assert isinstance(server._map, dict) and server._fileno in server._map
    assert isinstance(server.adj.connection_limit, int)
    assert _parameters(server.handle_accept) == []
    assert _parameters(server.maintenance) == ["now"]
    assert isinstance(server.active_channels, dict)
    assert server.channel_class is HTTPChannel
    assert _parameters(server.add_task) == ["task"]
    assert _parameters(server.task_dispatcher.add_task) == ["task"]
    server.pull_trigger()


def test_waitress_accepts_every_option_make_server_passes():
    """Adjustments refuses unknown names; each of these changes a limit of the service."""
    Adjustments(
        channel_timeout=60,
        max_request_body_size=1,
        connection_limit=10_000,
        asyncore_use_poll=True,
        cleanup_interval=1,
        clear_untrusted_proxy_headers=True,
        ident="file-repository",
        recv_bytes=1024 * 1024,
        outbuf_overflow=2 * 1024 * 1024,
        outbuf_high_watermark=2 * 1024 * 1024,
    )


def test_waitress_file_wrapper_reads_a_pumped_body_as_streaming_expects():
    """`ReadOnlyFileBasedBuffer.prepare`, `get` and `skip` use only the size probe, reads
    with a seek back, and forward seeks: all a `PumpedBody` can do."""
    filled = threading.Event()
    body = PumpedBody(iter([b"abcdef"]), 6, filled.set)
    try:
        assert filled.wait(10)
        wrapper = ReadOnlyFileBasedBuffer(body)
        assert wrapper.prepare() == 6
        assert wrapper.get(4) == b"abcd"
        wrapper.skip(4, True)
        assert wrapper.get(-1) == b"ef"
        wrapper.skip(2, True)
        assert wrapper.remain == 0
    finally:
        body.close()


# --- botocore: presigned reads (app/storage/s3.py) ----------------------------------------


@pytest.fixture
def s3_client():
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    try:
        yield client
    finally:
        client.close()


def test_botocore_client_endpoint_http_session_sends_a_prepared_request(s3_client):
    """`client._endpoint.http_session.send(request)`: the connection pool presigned reads
    go through; without it they fall back to `get_object` (with a warning, once)."""
    session = s3_client._endpoint.http_session
    assert _parameters(session.send) == ["request"]
    prepared = AWSRequest(method="GET", url="http://127.0.0.1:9/b/k").prepare()
    assert isinstance(prepared, AWSPreparedRequest)
    prepared.stream_output = True  # read as a stream, as s3.py asks
    assert _parameters(AWSResponse.__init__) == ["self", "url", "status_code", "headers", "raw"]


def test_botocore_before_send_event_and_first_non_none_response(s3_client):
    """`before-send.s3.GetObject` answered by a handler (moto's way), picked with
    `botocore.hooks.first_non_none_response`."""
    answer = object()
    s3_client.meta.events.register("before-send.s3.GetObject", lambda **kwargs: answer)
    responses = s3_client.meta.events.emit("before-send.s3.GetObject", request=None)
    assert hooks.first_non_none_response(responses) is answer


def test_waitress_maintenance_is_what_the_idle_check_wraps(server):
    """`_watch_clients` replaces `server.maintenance` and calls the original with `now`."""
    server.maintenance(time.time())


# --- flask-smorest: the document's hooks (app/docs/openapi.py) -------------------------------

#: The private names of flask-smorest that app/docs/openapi.py overrides or sets, and no others.
SMOREST_HOOKS = {"_register_responses", "_register_pagination_header", "_apidoc"}


def _private_names_used(path: Path) -> set[str]:
    """The private attributes a module reads or sets and the private methods its classes
    define (its own module-level helpers are not attributes and do not count)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            names |= {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def test_flask_smorest_hooks_are_the_ones_named_in_the_pin_comment():
    """At most four, each named in the comment above the pin, and no other private name of
    flask-smorest in app/docs/openapi.py."""
    library = "\n".join(p.read_text() for p in Path(flask_smorest.__file__).parent.rglob("*.py"))
    used = {
        name
        for name in _private_names_used(ROOT / "app/docs/openapi.py")
        if re.search(rf"\b{name}\b", library)
    }
    assert used == SMOREST_HOOKS and len(used) <= 4
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    pin = next(i for i, line in enumerate(lines) if line.strip().startswith('"flask-smorest'))
    comment = []
    for line in reversed(lines[:pin]):
        if not line.strip().startswith("#"):
            break
        comment.insert(0, line)
    for name in SMOREST_HOOKS:
        assert name in " ".join(comment), name


def test_flask_smorest_calls_the_overridden_hooks_when_it_builds_its_spec():
    """`Api._init_spec` calls `_register_responses()` and `_register_pagination_header()`
    (registering its error and pagination schemas); `_register_etag_headers` adds only lazy
    components, so it needs no override."""
    init_spec = inspect.getsource(flask_smorest.Api._init_spec)
    for hook in ("_register_responses", "_register_pagination_header"):
        assert callable(getattr(flask_smorest.Api, hook)), hook
        assert f"self.{hook}()" in init_spec, hook
    assert openapi._Api._register_responses is not flask_smorest.Api._register_responses


def test_flask_smorest_keeps_a_views_documentation_in_apidoc():
    """`doc` and `alt_response` put what they declare in the wrapper's `_apidoc`, and
    `route` reads the view's `_apidoc` (and its docstring)."""
    blueprint = flask_smorest.Blueprint("internals", __name__)

    def view():
        """Summary line"""

    wrapped = blueprint.alt_response(204, description="None.")(blueprint.doc(operationId="x")(view))
    assert wrapped._apidoc["manual_doc"] == {"operationId": "x"}
    assert "response" in wrapped._apidoc
    assert "_apidoc" in inspect.getsource(flask_smorest.Blueprint._store_endpoint_docs)


def test_limits_storage_is_what_the_processes_storage_implements():
    """`app/shared.py` subclasses limits' `Storage` for `processes://`: the abstract methods
    are the ones it implements, and the scheme registry finds it by its `STORAGE_SCHEME`."""
    assert Storage.__abstractmethods__ == {
        "base_exceptions",
        "incr",
        "get",
        "get_expiry",
        "check",
        "reset",
        "clear",
    }
    assert isinstance(storage_from_string("processes://"), ProcessesStorage)


def test_waitress_and_botocore_are_pinned_to_the_minor_version_checked_here():
    """The pins in pyproject.toml admit the installed version and no other minor one (and so
    do flask-smorest's)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = {
        Requirement(line).name: Requirement(line).specifier
        for line in project["project"]["dependencies"]
    }
    for name in ("waitress", "botocore", "flask-smorest", "limits"):
        installed = Version(metadata.version(name))
        assert installed in pins[name], (name, installed, pins[name])
        next_minor = Version(f"{installed.major}.{installed.minor + 1}")
        assert next_minor not in pins[name], (name, pins[name])
