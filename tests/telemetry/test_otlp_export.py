"""A real ``pitrio`` process, configured only by ``OTEL_*`` variables, exports its run over
OTLP/HTTP to a loopback receiver that decodes the protobuf with opentelemetry-proto."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import h11
import trio
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.loopback_tcp import serving

PITRIO = [sys.executable, "-m", "pitrio.transports.cli"]


class Receiver:
    """Collects the bodies POSTed to each path; answers 200 with an empty body."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str, bytes]] = []

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        target, content_type, body = "", "", b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                target = event.target.decode()
                content_type = dict(event.headers).get(b"content-type", b"").decode()
                body = b""
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.posts.append((target, content_type, body))
                headers = [("content-type", "application/x-protobuf"), ("content-length", "0")]
                await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)))
                await stream.send_all(conn.send(h11.EndOfMessage()))
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return


def _environment(tmp_path: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        HOME=str(tmp_path),
        PITRIO_AGENT_DIR=str(tmp_path / "agent"),
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_SERVICE_NAME="pitrio-under-test",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test",
    )
    return env


async def test_a_print_mode_run_is_exported_over_otlp_http(tmp_path: Path) -> None:
    receiver = Receiver()
    async with serving(receiver.handle) as port:
        done = await trio.run_process(
            [*PITRIO, "-p", "hello telemetry", "--no-session"],
            env=_environment(tmp_path, port),
            cwd=str(tmp_path),
            capture_stdout=True,
            capture_stderr=True,
            stdin=b"",
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "hello telemetry"
    traces = [body for path, _, body in receiver.posts if path == "/v1/traces"]
    types = {kind for path, kind, _ in receiver.posts}
    assert traces, [path for path, _, _ in receiver.posts]
    assert types == {"application/x-protobuf"}
    spans = []
    for body in traces:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert resource["service.name"] == "pitrio-under-test"
            assert resource["deployment.environment"] == "test"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "pitrio"
                spans.extend(scope_spans.spans)
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"invoke_agent pitrio", "turn", "chat echo"}
    run, turn, chat = by_name["invoke_agent pitrio"], by_name["turn"], by_name["chat echo"]
    assert run.parent_span_id == b""
    assert turn.parent_span_id == run.span_id and chat.parent_span_id == turn.span_id
    assert len({span.trace_id for span in spans}) == 1
    chat_attributes = {a.key: a.value for a in chat.attributes}
    assert chat_attributes["gen_ai.request.model"].string_value == "echo"
    assert chat_attributes["gen_ai.usage.output_tokens"].int_value > 0
    # The metrics' last export on the way out carries the run's counters.
    metrics = [body for path, _, body in receiver.posts if path == "/v1/metrics"]
    assert metrics
    names = set()
    for body in metrics:
        for resource_metrics in ExportMetricsServiceRequest.FromString(body).resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                names.update(metric.name for metric in scope_metrics.metrics)
    assert {"pitrio.runs", "pitrio.turns", "pitrio.llm.requests", "pitrio.llm.tokens"} <= names


async def test_a_bad_otel_variable_is_a_start_up_error_naming_it(tmp_path: Path) -> None:
    env = _environment(tmp_path, 9)
    env["OTEL_TRACES_EXPORTER"] = "zipkin"
    done = await trio.run_process(
        [*PITRIO, "-p", "hi", "--no-session"],
        env=env,
        cwd=str(tmp_path),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        stdin=b"",
    )
    assert done.returncode == 1
    assert "OTEL_TRACES_EXPORTER=zipkin" in done.stderr.decode()
    assert done.stdout == b""


async def test_the_console_exporter_keeps_stdout_for_the_answer(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        HOME=str(tmp_path),
        PITRIO_AGENT_DIR=str(tmp_path / "agent"),
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
    )
    done = await trio.run_process(
        [*PITRIO, "-p", "just this", "--no-session"],
        env=env,
        cwd=str(tmp_path),
        capture_stdout=True,
        capture_stderr=True,
        stdin=b"",
    )
    assert done.stdout == b"just this\n"
    assert b'"name": "invoke_agent pitrio"' in done.stderr
