"""The deployment files in ``deploy/`` agree with each other and with the service.

No Docker engine or cluster is needed: every YAML is parsed with PyYAML, the Dockerfile and
``nginx.conf`` are read as text, and the values that must match (ports, paths, service names,
body limit, extras, pins, settings names) are compared with their source of truth
(``pyproject.toml``, ``scripts/install``, ``judgefuse.service.settings``, the health routes).
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
SECRET_RE = re.compile(r"sk-[A-Za-z0-9]{20,}")


# ---------------------------------------------------------------- loading helpers


def _yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))


def _k8s_docs() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d is not None)
    return docs


def _k8s(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in _k8s_docs() if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''} in deploy/k8s, found {len(found)}"
    return found[0]


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comment lines dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            keyword, _, rest = full.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def _instructions(keyword: str, stage: str | None = None) -> list[str]:
    current = None
    found = []
    for kw, rest in _dockerfile():
        if kw == "FROM":
            current = rest.split()[-1] if " AS " in rest.upper() else None
        elif kw == keyword and stage in (None, current):
            found.append(rest)
    return found


def _nginx() -> str:
    return re.sub(r"#[^\n]*", "", (DEPLOY / "nginx.conf").read_text())


def _nginx_seconds(directive: str) -> float:
    match = re.search(rf"\b{directive}\s+(\d+)(s|m)?\s*;", _nginx())
    assert match, f"nginx.conf sets no {directive}"
    return float(match.group(1)) * (60 if match.group(2) == "m" else 1)


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    containers = doc["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container.get("env", [])}


def _panel_deadlines() -> list[float]:
    from judgefuse.judges.config import load_panel_config

    return [load_panel_config(p).deadline_s or 0.0 for p in sorted((DEPLOY / "panels").glob("*.yaml"))]


def _container_port() -> int:
    (expose,) = _instructions("EXPOSE", "runtime")
    return int(expose.split("/")[0])


# ---------------------------------------------------------------- every file


def test_every_yaml_in_deploy_parses() -> None:
    files = _yaml_files()
    assert {p.name for p in files} >= {
        "compose.yaml",
        "deployment.yaml",
        "service.yaml",
        "hpa.yaml",
        "redis.yaml",
        "configmap.yaml",
        "secret.example.yaml",
        "panel.yaml",
    }
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs, f"{path} holds no YAML document"
        assert all(isinstance(d, dict) for d in docs), path


def test_every_k8s_manifest_has_api_version_kind_and_name() -> None:
    docs = _k8s_docs()
    kinds = {d["kind"] for d in docs}
    assert kinds >= {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "StatefulSet",
        "Secret",
        "ConfigMap",
    }
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), doc


def test_kustomization_lists_every_manifest_but_the_secret_example() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk - {"secret.example.yaml"}


def test_no_file_contains_something_that_looks_like_a_real_secret() -> None:
    paths = [p for p in DEPLOY.rglob("*") if p.is_file()] + [REPO / ".dockerignore"]
    for path in paths:
        text = path.read_text()
        assert not SECRET_RE.search(text), f"{path} contains what looks like a provider key"
        assert "BEGIN PRIVATE KEY" not in text and "BEGIN RSA PRIVATE KEY" not in text, path


def test_example_secrets_hold_placeholders_the_service_refuses() -> None:
    from judgefuse.service.settings import SettingsError, load_settings

    secret = _k8s("Secret", "judgefuse-secrets")
    keys = secret["stringData"]["JUDGEFUSE_WEB__API_KEYS"]
    with pytest.raises(SettingsError, match="SHA-256"):
        load_settings(api_keys=json.loads(keys))
    for name, value in secret["stringData"].items():
        if name != "JUDGEFUSE_WEB__API_KEYS":
            assert value.startswith("REPLACE_WITH_"), name
    env_example = (DEPLOY / "judgefuse.env.example").read_text()
    line = next(x for x in env_example.splitlines() if x.startswith("JUDGEFUSE_WEB__API_KEYS="))
    with pytest.raises(SettingsError, match="SHA-256"):
        load_settings(api_keys=json.loads(line.partition("=")[2]))


def test_every_judgefuse_variable_set_in_deploy_is_a_setting() -> None:
    from judgefuse.service.settings import env_names

    fields = env_names()
    named: set[str] = set()
    for service in _compose()["services"].values():
        named |= set(service.get("environment", {}))
    for doc in _k8s_docs():
        if doc["kind"] in ("Deployment", "StatefulSet"):
            named |= set(_env(_container(doc)))
        if doc["kind"] == "Secret":
            named |= set(doc.get("stringData", {}))
    for line in (DEPLOY / "judgefuse.env.example").read_text().splitlines():
        if line and not line.startswith("#"):
            named.add(line.partition("=")[0])
    for env in _instructions("ENV"):
        named |= set(re.findall(r"([A-Z_][A-Z0-9_]*)=", env))
    ours = {n for n in named if n.startswith("JUDGEFUSE_")}
    assert ours >= {"JUDGEFUSE_STORAGE__STORAGE_URL", "JUDGEFUSE_JUDGING__PANELS", "JUDGEFUSE_WEB__API_KEYS"}
    assert ours <= fields, f"not settings: {sorted(ours - fields)}"


def test_deploy_panels_load_and_the_configmap_ships_the_same_panel(tmp_path: Path) -> None:
    from judgefuse.judges.config import load_panel_config

    source = DEPLOY / "panels" / "panel.yaml"
    configmap = _k8s("ConfigMap", "judgefuse-panels")
    shipped = tmp_path / "panel.yaml"
    shipped.write_text(configmap["data"]["panel.yaml"])
    assert load_panel_config(shipped) == load_panel_config(source)
    assert yaml.safe_load(shipped.read_text()) == yaml.safe_load(source.read_text())


# ---------------------------------------------------------------- Kubernetes


def test_deployment_probes_point_at_readyz_and_healthz_on_the_container_port() -> None:
    container = _container(_k8s("Deployment"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert list(ports.values()) == [_container_port()]

    def target(probe: str) -> tuple[str, int]:
        get = container[probe]["httpGet"]
        port = get["port"]
        return get["path"], ports[port] if isinstance(port, str) else port

    assert target("readinessProbe") == ("/readyz", _container_port())
    assert target("livenessProbe") == ("/healthz", _container_port())
    assert target("startupProbe") == ("/healthz", _container_port())


def test_probe_paths_are_routes_of_the_service() -> None:
    from judgefuse.service.ops.health_routes import router

    paths = {route.path for route in router.routes}
    assert {"/healthz", "/readyz"} <= paths


def test_deployment_runs_non_root_with_a_read_only_root_and_an_emptydir_tmp() -> None:
    deployment = _k8s("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = _container(deployment)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    (user,) = _instructions("USER", "runtime")
    assert pod["securityContext"]["runAsUser"] == int(user.split(":")[0]) != 0
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_deployment_has_two_replicas_and_resources() -> None:
    deployment = _k8s("Deployment")
    assert deployment["spec"]["replicas"] == 2
    resources = _container(deployment)["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]


def test_deployment_reads_secrets_and_the_panel_configmap() -> None:
    deployment = _k8s("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = _container(deployment)
    secret_names = {d["metadata"]["name"] for d in _k8s_docs() if d["kind"] == "Secret"}
    env_from = {e["secretRef"]["name"] for e in container["envFrom"]}
    assert env_from and env_from <= secret_names
    assert "JUDGEFUSE_WEB__API_KEYS" in _k8s("Secret", "judgefuse-secrets")["stringData"]
    panels = json.loads(_env(container)["JUDGEFUSE_JUDGING__PANELS"]["value"])
    configmap = _k8s("ConfigMap", "judgefuse-panels")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volume = next(v for v in pod["volumes"] if v.get("configMap", {}).get("name") == "judgefuse-panels")
    for path in panels:
        directory, _, filename = path.rpartition("/")
        assert directory == mounts[volume["name"]]
        assert filename in configmap["data"]


def test_deployment_grace_period_exceeds_the_panel_deadline() -> None:
    pod = _k8s("Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > max(_panel_deadlines())


def test_service_selects_the_deployment_pods_on_the_container_port() -> None:
    deployment = _k8s("Deployment")
    service = _k8s("Service", "judgefuse")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    port_names = {p["name"] for p in _container(deployment)["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names


def test_hpa_targets_the_deployment_on_cpu() -> None:
    hpa = _k8s("HorizontalPodAutoscaler")
    deployment = _k8s("Deployment")
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        deployment["apiVersion"],
        "Deployment",
        deployment["metadata"]["name"],
    )
    assert hpa["spec"]["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]


def test_k8s_storage_url_points_at_the_redis_service() -> None:
    url = _env(_container(_k8s("Deployment")))["JUDGEFUSE_STORAGE__STORAGE_URL"]["value"]
    parts = urlsplit(url)
    redis_service = _k8s("Service", "redis")
    assert parts.scheme == "redis"
    assert parts.hostname == redis_service["metadata"]["name"]
    assert parts.port == redis_service["spec"]["ports"][0]["port"]
    assert redis_service["spec"]["selector"].items() <= (
        _k8s("StatefulSet", "redis")["spec"]["template"]["metadata"]["labels"].items()
    )


def test_redis_statefulset_keeps_an_aof_on_a_persistent_volume() -> None:
    statefulset = _k8s("StatefulSet", "redis")
    container = _container(statefulset)
    args = " ".join(container.get("command", []) + container.get("args", []))
    assert "--appendonly yes" in args
    assert "--appendfsync everysec" in args
    assert "--maxmemory-policy noeviction" in args
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/data"
    assert statefulset["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def _postgres_overlay() -> dict[str, Any]:
    return yaml.safe_load((K8S / "postgres" / "kustomization.yaml").read_text())


def test_postgres_overlay_adds_a_statefulset_and_reads_the_url_from_a_secret() -> None:
    overlay = _postgres_overlay()
    assert overlay["resources"][0] == "../"
    for name in overlay["resources"][1:] + [p["path"] for p in overlay["patches"]]:
        assert (K8S / "postgres" / name).is_file(), name
    docs = [d for d in yaml.safe_load_all((K8S / "postgres" / "postgres.yaml").read_text()) if d]
    (statefulset,) = [d for d in docs if d["kind"] == "StatefulSet"]
    service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "postgres")
    container = _container(statefulset)
    assert "fsync=off" not in " ".join(container.get("args", []))
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/var/lib/postgresql/data"
    assert service["spec"]["selector"].items() <= statefulset["spec"]["template"]["metadata"]["labels"].items()
    password = _env(container)["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    patch = yaml.safe_load((K8S / "postgres" / "gateway-storage.yaml").read_text())
    assert patch["metadata"]["name"] == _k8s("Deployment")["metadata"]["name"]
    env = _env(_container(patch))
    url_ref = env["JUDGEFUSE_STORAGE__STORAGE_URL"]["valueFrom"]["secretKeyRef"]
    assert env["JUDGEFUSE_STORAGE__STORAGE_URL"]["value"] is None  # the base's redis:// value removed
    assert url_ref["name"] == password["name"] == "judgefuse-postgres"
    example = _k8s("Secret", "judgefuse-postgres")["stringData"]
    assert set(example) == {url_ref["key"], password["key"]}
    url = urlsplit(example["JUDGEFUSE_STORAGE__STORAGE_URL"])
    assert url.scheme == "postgresql" and url.hostname == service["metadata"]["name"]
    assert url.port == service["spec"]["ports"][0]["port"]
    assert url.password == example["POSTGRES_PASSWORD"] and url.password.startswith("REPLACE_WITH_")
    assert urlsplit(env["JUDGEFUSE_JUDGING__RESPONSE_CACHE_URL"]["value"]).hostname == "redis"


def test_compose_postgres_overlay_stores_in_postgres_and_caches_in_redis() -> None:
    from judgefuse.service.settings import env_names

    overlay = yaml.safe_load((DEPLOY / "compose.postgres.yaml").read_text())
    services = overlay["services"]
    gateway = services["gateway"]
    assert set(gateway["environment"]) <= env_names()
    password = services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert password.startswith("${JUDGEFUSE_PG_PASSWORD:?")  # compose refuses to start without it
    template = gateway["environment"]["JUDGEFUSE_STORAGE__STORAGE_URL"]
    url = urlsplit(template.replace(password, "pw"))  # as compose interpolates it
    assert url.scheme == "postgresql" and url.hostname == "postgres" and url.port == 5432
    assert url.password == "pw" and password in template
    assert gateway["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["postgres"]["healthcheck"]["test"]
    volume = services["postgres"]["volumes"][0].split(":")
    assert volume[1] == "/var/lib/postgresql/data" and volume[0] in overlay["volumes"]
    assert urlsplit(gateway["environment"]["JUDGEFUSE_JUDGING__RESPONSE_CACHE_URL"]).hostname == "redis"
    assert ".env" in (DEPLOY / ".gitignore").read_text().split()


# ---------------------------------------------------------------- compose


def test_compose_redis_runs_with_appendonly_on_a_volume() -> None:
    compose = _compose()
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"]) if isinstance(redis["command"], list) else redis["command"]
    assert "--appendonly yes" in command
    assert "--appendfsync everysec" in command
    volume = redis["volumes"][0].split(":")
    assert volume[1] == "/data" and volume[0] in compose["volumes"]
    assert redis["healthcheck"]["test"]


def test_compose_gateway_storage_url_points_at_the_redis_service() -> None:
    services = _compose()["services"]
    url = services["gateway"]["environment"]["JUDGEFUSE_STORAGE__STORAGE_URL"]
    parts = urlsplit(url)
    assert parts.scheme == "redis"
    assert parts.hostname in services and "redis-server" in " ".join(services[parts.hostname]["command"])
    assert parts.port == 6379


def test_compose_gateway_runs_several_replicas_built_from_the_repo_root() -> None:
    gateway = _compose()["services"]["gateway"]
    assert gateway["deploy"]["replicas"] >= 2
    assert "ports" not in gateway  # only the load balancer is published
    context = (DEPLOY / gateway["build"]["context"]).resolve()
    assert context == REPO
    assert (context / gateway["build"]["dockerfile"]) == DEPLOY / "Dockerfile"
    ignore = (REPO / ".dockerignore").read_text().split()
    assert "*" in ignore and {"!pyproject.toml", "!README.md", "!judgefuse/"} <= set(ignore)


def test_compose_services_start_after_their_dependencies_are_healthy() -> None:
    services = _compose()["services"]
    assert services["gateway"]["depends_on"] == {"redis": {"condition": "service_healthy"}}
    assert services["nginx"]["depends_on"] == {"gateway": {"condition": "service_healthy"}}
    for name in ("redis", "gateway", "nginx"):
        assert services[name]["healthcheck"]["test"], name


def test_compose_gateway_healthcheck_hits_a_health_route_on_the_container_port() -> None:
    test = " ".join(_compose()["services"]["gateway"]["healthcheck"]["test"])
    match = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", test)
    assert match and int(match.group(1)) == _container_port()
    assert match.group(2) in ("/readyz", "/healthz")


def test_compose_gateway_mounts_the_panels_it_names() -> None:
    gateway = _compose()["services"]["gateway"]
    panels = json.loads(gateway["environment"]["JUDGEFUSE_JUDGING__PANELS"])
    mounts = dict(v.split(":")[1::-1] for v in gateway["volumes"])  # container path -> host path
    for path in panels:
        directory, _, filename = path.rpartition("/")
        assert (DEPLOY / mounts[directory] / filename).is_file()


def test_compose_env_file_template_exists_and_real_env_file_is_ignored() -> None:
    gateway = _compose()["services"]["gateway"]
    (env_file,) = gateway["env_file"]
    assert (DEPLOY / f"{env_file}.example").is_file()
    assert env_file in (DEPLOY / ".gitignore").read_text().split()


def test_compose_stop_grace_period_exceeds_the_panel_deadline() -> None:
    grace = _compose()["services"]["gateway"]["stop_grace_period"]
    assert float(grace.removesuffix("s")) > max(_panel_deadlines())


# ---------------------------------------------------------------- nginx


def test_nginx_upstream_is_the_compose_gateway_service_with_least_conn() -> None:
    conf = _nginx()
    upstream = re.search(r"upstream\s+(\S+)\s*\{(.*?)\}", conf, re.S)
    assert upstream
    name, body = upstream.groups()
    assert "least_conn;" in body
    servers = re.findall(r"\bserver\s+([^\s:;]+):(\d+)", body)
    assert servers == [("gateway", str(_container_port()))]
    assert "gateway" in _compose()["services"]
    assert re.search(rf"proxy_pass\s+http://{re.escape(name)}\s*;", conf)


def test_nginx_body_limit_matches_the_service_limit() -> None:
    from judgefuse.service.settings import WebSettings

    match = re.search(r"client_max_body_size\s+(\d+)([kKmM]?)\s*;", _nginx())
    assert match
    size = int(match.group(1)) * {"": 1, "k": 1024, "m": 1 << 20}[match.group(2).lower()]
    assert size == WebSettings.model_fields["max_body_bytes"].default == 1 << 20


def test_nginx_proxy_timeouts_exceed_every_panel_deadline() -> None:
    deadline = max(_panel_deadlines())
    assert _nginx_seconds("proxy_read_timeout") > deadline
    assert _nginx_seconds("proxy_send_timeout") > deadline


def test_nginx_health_location_serves_the_compose_healthcheck() -> None:
    test = " ".join(_compose()["services"]["nginx"]["healthcheck"]["test"])
    path = re.search(r"http://127\.0\.0\.1(/[\w-]+)", test).group(1)
    assert re.search(rf"location\s+=\s+{re.escape(path)}\s*\{{[^}}]*return 200", _nginx())


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_is_multi_stage_on_python_311_slim() -> None:
    (base,) = _instructions("ARG", None)[:1]
    assert base.startswith("PYTHON_IMAGE=python:3.11-slim")
    stages = [rest.split()[-1] for kw, rest in _dockerfile() if kw == "FROM"]
    assert stages == ["build", "runtime"]


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = _instructions("USER", "runtime")
    assert users, "the runtime stage has no USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_dockerfile_healthcheck_hits_healthz_with_urllib() -> None:
    (check,) = _instructions("HEALTHCHECK", "runtime")
    assert "urllib.request.urlopen" in check
    assert f"http://127.0.0.1:{_container_port()}/healthz" in check


def test_dockerfile_serves_on_the_exposed_port() -> None:
    (cmd,) = _instructions("CMD", "runtime")
    argv = json.loads(cmd)
    assert argv[:2] == ["judgefuse", "serve"]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert int(argv[argv.index("--port") + 1]) == _container_port()
    k8s_args = _container(_k8s("Deployment")).get("args")
    assert k8s_args in (None, argv)


def test_dockerfile_sets_the_litellm_local_cost_map() -> None:
    env = " ".join(_instructions("ENV", "runtime"))
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in env


def test_dockerfile_installs_extras_that_pyproject_defines() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras_defined = set(pyproject["project"]["optional-dependencies"])
    groups_defined = set(pyproject["dependency-groups"])
    text = " ".join(_instructions("RUN"))
    named = set(re.findall(r"--extra (\w+)", text))
    assert named == {"service", "judges", "postgres", "local"}
    assert named <= extras_defined
    assert set(re.findall(r"--group ([\w-]+)", text)) == {"local-model"} <= groups_defined


def test_dockerfile_installs_the_versions_of_the_lock() -> None:
    """The image's versions are uv.lock's, exported with hashes by the uv scripts/install pins."""
    install = (REPO / "scripts" / "install").read_text()
    uv_version = re.search(r"^UV_VERSION=(\S+)$", install, re.M).group(1)
    build = " ".join(_instructions("RUN", "build"))
    assert f'"uv=={uv_version}"' in build
    assert "uv export --frozen --no-dev --no-emit-project" in build
    assert "--require-hashes" in build and "-r requirements.txt" in build
    copies = " ".join(_instructions("COPY", "build"))
    assert "uv.lock" in copies
    runtime = " ".join(_instructions("RUN", "runtime"))
    assert "--no-index --no-deps /wheels/*.whl" in runtime  # nothing resolved at install time


def test_dockerfile_shell_steps_are_well_formed() -> None:
    for rest in _instructions("RUN"):
        script = re.sub(r"^--mount=\S+\s+", "", rest)
        shlex.split(script)  # balanced quotes
        opened = len(re.findall(r"\bif\b", script))
        assert opened == len(re.findall(r"\bfi\b", script)), script
