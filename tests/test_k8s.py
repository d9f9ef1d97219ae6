"""deploy/k8s: both overlays rendered by kubectl's kustomize and validated against Kubernetes 1.37's
schemas (kubernetes-validate --strict, which rejects unknown fields and wrong types), then read
as YAML: every property the manifests promise (issue 59) asserted on what a cluster would get.
No cluster runs here (no container daemon): what a cluster does is rehearsed in
tests/test_class_browser.py with the same parts (replicas, nginx, PostgreSQL)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from livetest import ROOT

K8S = ROOT / "deploy" / "k8s"
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    found = shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -r requirements-dev.txt")
    return found


def render(overlay: str) -> str:
    done = subprocess.run([tool("kubectl"), "kustomize", str(K8S / overlay)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module", params=["demo", "course"])
def rendered(request, tmp_path_factory) -> tuple[str, list[dict], Path]:
    text = render(request.param)
    path = tmp_path_factory.mktemp("k8s") / f"{request.param}.yaml"
    path.write_text(text)
    return request.param, [d for d in yaml.safe_load_all(text) if d], path


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in found])
    return found[0]


def env_of(container: dict) -> dict:
    return {e["name"]: e for e in container.get("env", [])}


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tool("kubernetes-validate"), "--strict", "-k", "1.37.0", str(path)], capture_output=True, text=True
    )


def test_the_overlay_is_valid_kubernetes_and_a_wrong_field_is_not(rendered, tmp_path):
    _name, docs, path = rendered
    checked = validate(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("passed for resource") == len(docs)
    app = one(docs, "Deployment", "mha-app")
    app["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}  # a typo a reader would miss
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump_all(docs))
    assert validate(wrong).returncode != 0


def measured_peak_mib() -> float:
    """The server's peak after every page on each of the image's models (BERT, SmolLM2, Gemma 3),
    as bench/bench_models_memory.py printed it into docs/benchmarks.md."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    section = text.split("## bench_models_memory.py", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"peak so far ([\d,]+) MB", section)
    assert len(found) == 3, "docs/benchmarks.md has no bench_models_memory.py figures for the three models"
    return max(float(f.replace(",", "")) for f in found)


def mib(quantity: str) -> float:
    units = {"Mi": 1.0, "Gi": 1024.0, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    number, unit = re.fullmatch(r"([\d.]+)([A-Za-z]*)", quantity).groups()
    return float(number) * units[unit]


def test_the_app_pod(rendered):
    name, docs, _path = rendered
    app = one(docs, "Deployment", "mha-app")
    pod = app["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/tmp"} and env_of(container)["HOME"][
        "value"
    ] == "/tmp"
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    assert port == 8501
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/_stcore/health", "port": "http"}, probe
    res = container["resources"]
    assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}
    assert res["requests"]["memory"] == res["limits"]["memory"]  # a busy node evicts no pod for using its request
    limit = mib(res["limits"]["memory"])
    assert limit >= 1.1 * measured_peak_mib(), (limit, measured_peak_mib())  # sized from the bench, with margin
    for other in ("compose.yaml", "mha-explorer@.service"):  # every deployment gives a replica the same
        assert re.search(rf"(memory: |MemoryMax=){int(limit)}M\b", (ROOT / "deploy" / other).read_text()), other
    settings = one(docs, "ConfigMap")["data"]
    assert settings["STREAMLIT_CLIENT_SHOW_ERROR_DETAILS"] == "none"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == app["spec"]["selector"]["matchLabels"]
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mha-app"}
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert "replicas" not in app["spec"]  # the autoscaler owns them: an apply never scales a grown course back
    images = {
        c["image"] for d in docs if "template" in d.get("spec", {}) for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert {i for i in images if "mha-explorer" in i} == {"registry.example.org/mha-explorer:1"}, images  # Job too
    if name == "demo":  # SQLite is one server's file: one pod, on its volume, stopped before the next starts
        assert hpa["spec"]["minReplicas"] == 1 == hpa["spec"]["maxReplicas"]
        assert app["spec"]["strategy"]["type"] == "Recreate"
        assert env_of(container)["MHA_CLASS_DIR"]["value"] == "/data" and "MHA_CLASS_DB" not in env_of(container)
        assert not [d for d in docs if d["kind"] == "StatefulSet"]
    else:
        assert hpa["spec"]["minReplicas"] >= 2
        assert hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]


def test_a_browser_keeps_its_pod_for_a_lesson_over_tls(rendered):
    _name, docs, _path = rendered
    ingress = one(docs, "Ingress")
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600  # seconds: a lesson's WebSocket
    assert int(notes["nginx.ingress.kubernetes.io/proxy-send-timeout"]) >= 3600
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"][0]["secretName"] == "mha-tls"
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    service = one(docs, "Service", backend["name"])
    assert service["spec"]["selector"] == one(docs, "Deployment", "mha-app")["spec"]["selector"]["matchLabels"]


def test_no_secret_in_a_manifest_and_only_the_app_reaches_the_database(rendered):
    name, docs, _path = rendered
    assert not [d for d in docs if d["kind"] == "Secret"]  # made by hand in the cluster (docs/school-server.md)
    text = yaml.safe_dump_all(docs)
    assert not re.search(r"postgresql\+psycopg://[^:]+:(?!\$\(MHA_DB_PASSWORD\))", text)  # a password typed in
    assert "change-me" not in text
    policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    app_in = policies["mha-app-from-ingress"]["ingress"][0]["from"][0]
    assert app_in["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "ingress-nginx"}
    if name == "demo":
        return
    db = one(docs, "StatefulSet", "mha-db")
    assert db["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    (pg,) = db["spec"]["template"]["spec"]["containers"]
    assert env_of(pg)["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "mha-db", "key": "password"}
    db_in = policies["mha-db-from-app"]
    assert db_in["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "mha-db"}
    (rule,) = db_in["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mha-explorer"}}}]
    reaching = [  # every pod the policy lets in is the app's or the migration's
        d
        for d in docs
        if d["kind"] in ("Deployment", "Job", "StatefulSet")
        and d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/name") == "mha-explorer"
    ]
    assert sorted(d["metadata"]["name"] for d in reaching) == ["mha-app", "mha-migrate"]
    for d in reaching:
        (c,) = d["spec"]["template"]["spec"]["containers"]
        assert env_of(c)["MHA_DB_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "mha-db"


def test_migrations_run_once(rendered):
    name, docs, _path = rendered
    jobs = [d for d in docs if d["kind"] == "Job"]
    app = one(docs, "Deployment", "mha-app")["spec"]["template"]["spec"]
    assert not app.get("initContainers")
    if name == "demo":  # one pod: it migrates its own SQLite file at its first class
        assert jobs == [] and "MHA_CLASS_MIGRATE" not in env_of(app["containers"][0])
        return
    (job,) = jobs
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "-m", "classroom.migrate"]
    assert env_of(app["containers"][0])["MHA_CLASS_MIGRATE"]["value"] == "0"  # the pods only check


def test_a_pod_that_must_not_migrate_refuses_an_old_schema_and_the_job_migrates(tmp_path):
    """MHA_CLASS_MIGRATE=0 (the course's pods) on an empty database: NotMigrated, and nothing is
    made; `python -m classroom.migrate` (the Job) migrates; then the same check passes."""
    url = f"sqlite:///{tmp_path / 'classes.sqlite'}"
    check = (
        "from classroom import db\n"
        "try:\n    db.engine()\nexcept db.NotMigrated as e:\n    print('refused:', e)\nelse:\n    print('ok')\n"
    )
    env = {"PATH": str(BIN), "MHA_CLASS_DB": url, "MHA_CLASS_MIGRATE": "0", "HOME": str(tmp_path)}

    def py(*args: str) -> str:
        done = subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert py("-c", check).startswith("refused: the class database is at migration None")
    import sqlalchemy as sa

    assert sa.inspect(sa.create_engine(url)).get_table_names() == []  # the check made nothing
    assert py("-m", "classroom.migrate") == "class database migrated (sqlite)"
    assert py("-c", check) == "ok"
