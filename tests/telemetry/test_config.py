"""Telemetry from the standard OTEL_* variables, and nothing at all without them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from pitrio import telemetry
from pitrio.telemetry.config import TelemetryConfigError, build, exporters, wanted


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),  # names the service, asks for no export
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_METRICS_EXPORTER": "otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "TRUE"}, False),
    ],
)
def test_wanted_reads_only_the_standard_variables(environ: dict[str, str], expected: bool) -> None:
    assert wanted(environ) is expected


def test_exporter_lists_and_their_errors() -> None:
    assert exporters({}, "TRACES") == ("otlp",)
    assert exporters({"OTEL_TRACES_EXPORTER": "console, none"}, "TRACES") == ("console",)
    assert exporters({"OTEL_METRICS_EXPORTER": "none"}, "METRICS") == ()
    with pytest.raises(TelemetryConfigError, match=r"OTEL_TRACES_EXPORTER=jaeger: 'jaeger'"):
        exporters({"OTEL_TRACES_EXPORTER": "jaeger"}, "TRACES")


def test_only_http_protobuf_is_accepted() -> None:
    with pytest.raises(TelemetryConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL=grpc"):
        build(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        )


def test_build_names_the_service_pitrio_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    providers = build({"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"})
    try:
        assert isinstance(providers.tracer_provider, TracerProvider)
        assert providers.meter_provider is None
        assert providers.tracer_provider.resource.attributes["service.name"] == "pitrio"
    finally:
        providers.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agents-eu")
    providers = build({"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"})
    try:
        assert providers.tracer_provider.resource.attributes["service.name"] == "agents-eu"
    finally:
        providers.shutdown()


def test_from_environment_without_variables_activates_nothing() -> None:
    with telemetry.from_environment({}):
        assert telemetry.active() is None


def test_off_a_whole_run_imports_no_opentelemetry(tmp_path: Path) -> None:
    """Free when unconfigured: a print-mode run never even imports the API."""
    script = (
        "import sys\n"
        "from pitrio.transports.cli import main\n"
        "code = main(['-p', 'hello', '--no-session'])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "print('LOADED', loaded, code)\n"
    )
    env = {"HOME": str(tmp_path), "PITRIO_AGENT_DIR": str(tmp_path / "agent"), "PATH": "/usr/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED [] 0"


def test_a_missing_sdk_is_an_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)  # import fails
    with pytest.raises(TelemetryConfigError, match=r"pip install 'pitrio\[otel\]'"):
        build({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
