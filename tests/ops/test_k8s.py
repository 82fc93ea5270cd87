"""ops/k8s (the Kubernetes manifests: a kustomize base, components and overlays), checked offline.

Every overlay is rendered with `kubectl kustomize` (kustomize built into kubectl; no cluster, no helm)
from a copy of ops/k8s whose git-ignored Secret env files are the committed *.env.example templates.
Every core manifest is validated with kubernetes-validate against Kubernetes' own JSON schemas (strict:
an unknown field is an error); the custom resources (KEDA's ScaledObject and TriggerAuthentication, the
RabbitMQ Cluster Operator's RabbitmqCluster), for which it has no schema, against ours in
ops/k8s/schemas/ with jsonschema. Then the references between manifests: every Secret and ConfigMap a
pod or a TriggerAuthentication reads exists with that key, every ScaledObject scales a Deployment of the
render, and the expert queues they watch are the experts of the shipped deployment file, under the
prefix of ddm-config. Mutated manifests show that each check fails when it should.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from ddm.runtime.redis_conn import parse_sentinel_url
from ddm.schema.messages import DEFAULT_EXPERT_LOSS_POLICY
from ddm.schema.names import Names
from tests.support.compose import (
    LATENT_DEPLOYMENT,
    PARIS_EXPERTS,
    SHIPPED_DEPLOYMENT,
    checkpoint_framework,
    deployment_frameworks,
    imported_paris,
)

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "ops" / "k8s"
SCHEMAS = K8S / "schemas"
IMAGE_ROOT = Path("/srv/ddm")  # where the images hold the checkout's checkpoints/ (ops/docker/cpu.Dockerfile)
# The Kubernetes version whose schemas the manifests are checked against: kubectl's here (v1.32), and one
# that kubernetes-validate ships (it picks its newest schemas not newer than this).
K8S_VERSION = "1.32.0"
KUBECTL = shutil.which("kubectl")
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
# Rendered too, though no shipped overlay uses it: cpu-keda plus the scale-to-zero component
SCALE_TO_ZERO = "cpu-keda+scale-to-zero"
CUSTOM = {
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "triggerauthentication.json",
    ("rabbitmq.com/v1beta1", "RabbitmqCluster"): "rabbitmqcluster.json",
}
WORKLOADS = {"Deployment", "StatefulSet"}
PARIS_OVERLAY = "gpu-paris"
PARIS_IMPORT_JOB = K8S / "jobs" / "paris-import"  # a kustomization of its own, run before the overlay
PARIS_DIR, PARIS_OUT = Path("/srv/paris"), Path("/srv/paris-deployment")  # where the Paris pods mount them
PARIS_DEPLOYMENT = PARIS_OUT / "deployment.toml"

pytestmark = pytest.mark.skipif(
    KUBECTL is None,
    reason="kubectl is not installed (it renders the kustomizations; the machine image has /usr/bin/kubectl)",
)


# ------------------------------------------------------------------------------------------ rendering


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of ops/k8s with the Secret env files made from their committed templates, and one more
    overlay that adds the scale-to-zero component to cpu-keda."""
    root = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, root, ignore=shutil.ignore_patterns("*.env"))  # never a developer's real ones
    for example in (root / "components" / "secrets").glob("*.env.example"):
        shutil.copy(example, example.with_suffix(""))
    extra = root / "overlays" / SCALE_TO_ZERO
    extra.mkdir()
    kustomization = yaml.safe_load((root / "overlays" / "cpu-keda" / "kustomization.yaml").read_text())
    kustomization["components"].append("../../components/keda-scale-to-zero")
    (extra / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return root


def render(overlay_dir: Path) -> list[dict]:
    out = subprocess.run([KUBECTL, "kustomize", str(overlay_dir)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kubectl kustomize {overlay_dir.name}: {out.stderr}"
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


@pytest.fixture(scope="module")
def rendered(tree) -> dict[str, list[dict]]:
    return {name: render(tree / "overlays" / name) for name in [*OVERLAYS, SCALE_TO_ZERO]}


def test_the_overlays_are_there():
    assert {"cpu", "cpu-keda", "cpu-latent", "cpu-latent-keda", "gpu", "neuron", PARIS_OVERLAY} <= set(
        OVERLAYS
    )


# ------------------------------------------------------------------------------------------ schemas


@functools.cache
def _custom_validator(filename: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / filename).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _k8s_problems(doc: dict) -> list[str]:
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        return [f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}: {where}: {e.message}"]
    except kubernetes_validate.SchemaNotFoundError as e:
        return [e.message]
    return []


@functools.cache
def _k8s_problems_cached(text: str) -> tuple[str, ...]:
    return tuple(_k8s_problems(json.loads(text)))  # the overlays share most manifests: check each once


def schema_problems(doc: dict) -> list[str]:
    """Every way `doc` breaks its schema: Kubernetes' own (strict), or ours for the custom resources."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key not in CUSTOM:
        return list(_k8s_problems_cached(json.dumps(doc, sort_keys=True)))
    name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
    problems = [
        f"{name}: {'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in _custom_validator(CUSTOM[key]).iter_errors(doc)
    ]
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    if doc["kind"] == "ScaledObject":
        low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if isinstance(low, int) and isinstance(high, int) and low > high:
            problems.append(f"{name}: minReplicaCount {low} > maxReplicaCount {high}")
    if doc["kind"] == "RabbitmqCluster":
        # ours types these two loosely: check them against Kubernetes' core/v1 definitions, in a Pod
        pod_spec = {"containers": [{"name": "c", "image": "i"}]}
        pod_spec |= {k: spec[k] for k in ("affinity", "tolerations") if k in spec}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": pod_spec}
        problems += [f"{name}: {p}" for p in _k8s_problems(pod)]
    return problems


def test_every_manifest_validates(rendered):
    problems = [
        f"{overlay}: {p}" for overlay, docs in rendered.items() for d in docs for p in schema_problems(d)
    ]
    assert problems == []


def test_our_schemas_say_they_are_ours():
    for filename in CUSTOM.values():
        comment = json.loads((SCHEMAS / filename).read_text())["$comment"]
        assert comment.startswith("OURS, not upstream") and "only the fields" in comment, filename


def _first(docs: list[dict], kind: str, name: str | None = None) -> dict:
    return next(d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name))


MUTATIONS = [
    # (what, kind, name, change): each must make schema_problems report something
    ("replicas of the wrong type", "Deployment", "ddm-router", lambda d: d["spec"].update(replicas="three")),
    ("an unknown field (strict)", "Deployment", "ddm-webui", lambda d: d["spec"].update(replica=2)),
    (
        "a container without a name",
        "Deployment",
        "ddm-expert-0",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),
    ),
    ("StatefulSet replicas as a list", "StatefulSet", "ddm-redis", lambda d: d["spec"].update(replicas=[3])),
    (
        "a probe without a handler field of the right type",
        "Deployment",
        "ddm-expert-1",
        lambda d: d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"].update(
            periodSeconds="10s"
        ),
    ),
    (
        "a Service without its port number",
        "Service",
        "ddm-webui",
        lambda d: d["spec"]["ports"][0].pop("port"),
    ),
    ("a ScaledObject without triggers", "ScaledObject", "ddm-expert-0", lambda d: d["spec"].pop("triggers")),
    (
        "a ScaledObject with no trigger in the list",
        "ScaledObject",
        "ddm-router",
        lambda d: d["spec"].update(triggers=[]),
    ),
    (
        "a rabbitmq trigger without mode",
        "ScaledObject",
        "ddm-expert-1",
        lambda d: d["spec"]["triggers"][0]["metadata"].pop("mode"),
    ),
    (
        "a rabbitmq trigger whose host (with its password) is in the manifest",
        "ScaledObject",
        "ddm-expert-1",
        lambda d: d["spec"]["triggers"][0]["metadata"].update(host="amqp://u:p@h:5672/%2F"),
    ),
    (
        "a numeric trigger value (KEDA wants strings)",
        "ScaledObject",
        "ddm-router",
        lambda d: d["spec"]["triggers"][0]["metadata"].update(value=32),
    ),
    ("min above max", "ScaledObject", "ddm-router", lambda d: d["spec"].update(minReplicaCount=9)),
    (
        "an unknown ScaledObject field",
        "ScaledObject",
        "ddm-router",
        lambda d: d["spec"].update(minReplicas=1),
    ),
    (
        "a TriggerAuthentication without a key",
        "TriggerAuthentication",
        "ddm-rabbitmq",
        lambda d: d["spec"]["secretTargetRef"][0].pop("key"),
    ),
    (
        "RabbitmqCluster replicas as a string",
        "RabbitmqCluster",
        None,
        lambda d: d["spec"].update(replicas="3"),
    ),
    (
        "RabbitmqCluster affinity that is no core/v1 Affinity",
        "RabbitmqCluster",
        None,
        lambda d: d["spec"]["affinity"].update(podAntiAfinity={}),
    ),
]


@pytest.mark.parametrize(("what", "kind", "name", "change"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_an_invalid_manifest_fails(rendered, what, kind, name, change):
    doc = copy.deepcopy(_first(rendered["cpu-keda"], kind, name))
    assert schema_problems(doc) == []
    change(doc)
    assert schema_problems(doc), f"{what}: still valid"


# ------------------------------------------------------------------------------------------ references


def _pod_specs(docs: list[dict]):
    for d in docs:
        if d["kind"] in WORKLOADS:
            yield f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]


def reference_problems(docs: list[dict]) -> list[str]:
    """Every Secret / ConfigMap (and key) that a pod or a TriggerAuthentication reads exists in `docs`;
    every ScaledObject scales a Deployment of `docs` and authenticates with a TriggerAuthentication of it;
    every Service selects some pod; every probe port is a port of its container."""
    data = {
        (d["kind"], d["metadata"]["name"]): {**d.get("data", {}), **d.get("stringData", {})} for d in docs
    }
    problems = []

    def need(where: str, kind: str, name: str, key: str | None = None, optional: bool = False) -> None:
        if optional:
            return
        if (kind, name) not in data:
            problems.append(f"{where}: {kind} {name} is not in the render")
        elif key is not None and key not in data[kind, name]:
            problems.append(f"{where}: {kind} {name} has no key {key}")

    for where, spec in _pod_specs(docs):
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            for src in c.get("envFrom", []):
                for field, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                    if field in src:
                        need(where, kind, src[field]["name"], optional=src[field].get("optional", False))
            for env in c.get("env", []):
                ref = env.get("valueFrom", {})
                for field, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                    if field in ref:
                        r = ref[field]
                        need(where, kind, r["name"], r["key"], r.get("optional", False))
            ports = {p.get("name") for p in c.get("ports", [])} | {
                p["containerPort"] for p in c.get("ports", [])
            }
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                port = c.get(probe, {}).get("httpGet", {}).get("port")
                if port is not None and port not in ports:
                    problems.append(f"{where}: {c['name']} {probe} port {port} is not a container port")
        for vol in spec.get("volumes", []):
            for field, kind, name in (("secret", "Secret", "secretName"), ("configMap", "ConfigMap", "name")):
                if field in vol:
                    need(where, kind, vol[field][name], optional=vol[field].get("optional", False))

    pod_labels = [
        spec_owner["spec"]["template"]["metadata"]["labels"]
        for spec_owner in docs
        if spec_owner["kind"] in WORKLOADS
    ]
    for d in docs:
        where = f"{d['kind']}/{d['metadata']['name']}"
        if d["kind"] == "TriggerAuthentication":
            for ref in d["spec"].get("secretTargetRef", []):
                need(where, "Secret", ref["name"], ref["key"])
        if d["kind"] == "ScaledObject":
            target = d["spec"]["scaleTargetRef"]
            if target.get("kind", "Deployment") != "Deployment" or ("Deployment", target["name"]) not in {
                (x["kind"], x["metadata"]["name"]) for x in docs
            }:
                problems.append(f"{where}: scaleTargetRef {target['name']} is no Deployment of the render")
            for trigger in d["spec"].get("triggers", []):
                auth = trigger.get("authenticationRef", {}).get("name")
                if auth is not None and ("TriggerAuthentication", auth) not in {
                    (x["kind"], x["metadata"]["name"]) for x in docs
                }:
                    problems.append(f"{where}: authenticationRef {auth} is not in the render")
        if d["kind"] == "Service" and d["spec"].get("selector"):
            selector = d["spec"]["selector"].items()
            if not any(selector <= labels.items() for labels in pod_labels):
                problems.append(f"{where}: its selector matches no pod template")
    return problems


def test_every_reference_resolves(rendered):
    problems = [f"{overlay}: {p}" for overlay, docs in rendered.items() for p in reference_problems(docs)]
    assert problems == []


@pytest.mark.parametrize(
    ("what", "change"),
    [
        (
            "a missing Secret",
            lambda docs: [d for d in docs if not d["metadata"]["name"].startswith("ddm-broker")],
        ),
        (
            "a missing key",
            lambda docs: [
                d | {"data": {}}
                if d["metadata"]["name"].startswith("ddm-redis") and d["kind"] == "Secret"
                else d
                for d in docs
            ],
        ),
        (
            "a ScaledObject of nothing",
            lambda docs: [
                d for d in docs if d["metadata"]["name"] != "ddm-expert-1" or d["kind"] != "Deployment"
            ],
        ),
        ("a missing ConfigMap", lambda docs: [d for d in docs if d["kind"] != "ConfigMap"]),
    ],
)
def test_a_broken_reference_fails(rendered, what, change):
    docs = change(copy.deepcopy(rendered["cpu-keda"]))
    assert reference_problems(docs), what


# ------------------------------------------------------------------------------------------ network policy

REDIS_PORTS = {6379, 26379}  # Redis and its Sentinel


def _selects(selector: dict, labels: dict) -> bool:
    """A label selector of matchLabels only (what the shipped policy uses) against a pod's labels."""
    return not selector.get("matchExpressions") and selector.get("matchLabels", {}).items() <= labels.items()


def network_policy_problems(docs: list[dict]) -> list[str]:
    """Where the redis-sentinel component is in `docs`: a NetworkPolicy selects exactly the ddm-redis pods
    and admits, on 6379 and 26379 only, pods of this namespace chosen by label (no namespace or IP block)
    that include every ddm pod of the render (router, web UI, experts and the Redis pods themselves) and
    are chosen by app.kubernetes.io/part-of=ddm-pipeline."""
    redis = [d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "ddm-redis"]
    if not redis:
        return []
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    workloads = {f"{d['kind']}/{d['metadata']['name']}": d for d in docs if d["kind"] in WORKLOADS}
    labels = {where: d["spec"]["template"]["metadata"].get("labels", {}) for where, d in workloads.items()}
    redis_pods = labels["StatefulSet/ddm-redis"]
    guarding = [p for p in policies if _selects(p["spec"]["podSelector"], redis_pods)]
    if not guarding:
        return ["no NetworkPolicy selects the ddm-redis pods"]
    problems = []
    for policy in guarding:
        name, spec = policy["metadata"]["name"], policy["spec"]
        if not spec["podSelector"].get("matchLabels"):
            problems.append(f"NetworkPolicy/{name}: an empty podSelector selects every pod of the namespace")
        for where, pod in labels.items():
            if where != "StatefulSet/ddm-redis" and _selects(spec["podSelector"], pod):
                problems.append(f"NetworkPolicy/{name}: its podSelector also selects {where}")
        if "Ingress" not in spec.get("policyTypes", ["Ingress"]):
            problems.append(f"NetworkPolicy/{name}: not an Ingress policy")
        selectors = []
        for rule in spec.get("ingress", []):
            ports = {p.get("port") for p in rule.get("ports", [])}
            if not rule.get("ports") or not ports <= REDIS_PORTS:
                problems.append(
                    f"NetworkPolicy/{name}: a rule for ports {sorted(ports, key=str)}, not 6379/26379"
                )
            if not rule.get("from"):
                problems.append(f"NetworkPolicy/{name}: a rule with no `from` admits every source")
            for peer in rule.get("from", []):
                if set(peer) != {"podSelector"}:
                    problems.append(f"NetworkPolicy/{name}: a peer other than pods of this namespace: {peer}")
                else:
                    selectors.append(peer["podSelector"])
        for selector in selectors:
            if selector.get("matchLabels") != {"app.kubernetes.io/part-of": "ddm-pipeline"}:
                problems.append(f"NetworkPolicy/{name}: admits {selector}, not part-of=ddm-pipeline")
        for where, pod in labels.items():
            if not any(_selects(sel, pod) for sel in selectors):
                problems.append(f"NetworkPolicy/{name}: {where}'s pods ({pod}) may not reach Redis")
    return problems


def test_only_ddm_pods_reach_redis_and_the_sentinels(rendered):
    for overlay, docs in rendered.items():
        assert any(d["kind"] == "NetworkPolicy" for d in docs), overlay  # every overlay has redis-sentinel
    problems = [
        f"{overlay}: {p}" for overlay, docs in rendered.items() for p in network_policy_problems(docs)
    ]
    assert problems == []


def _policy(docs: list[dict]) -> dict:
    return _first(docs, "NetworkPolicy", "ddm-redis")["spec"]


@pytest.mark.parametrize(
    ("what", "change"),
    [
        ("no policy", lambda docs: docs.remove(_first(docs, "NetworkPolicy", "ddm-redis"))),
        (
            "a ddm pod without the label",
            lambda docs: _first(docs, "Deployment", "ddm-router")["spec"]["template"]["metadata"][
                "labels"
            ].pop("app.kubernetes.io/part-of"),
        ),
        (
            "a Redis pod without the label (replication and the Sentinels among themselves)",
            lambda docs: _first(docs, "StatefulSet", "ddm-redis")["spec"]["template"]["metadata"][
                "labels"
            ].pop("app.kubernetes.io/part-of"),
        ),
        ("every pod guarded", lambda docs: _policy(docs).update(podSelector={})),
        (
            "the policy selects other pods",
            lambda docs: _policy(docs).update(
                podSelector={"matchLabels": {"app.kubernetes.io/name": "ddm-pipeline"}}
            ),
        ),
        ("any source", lambda docs: _policy(docs)["ingress"][0].pop("from")),
        ("any namespace", lambda docs: _policy(docs)["ingress"][0]["from"].append({"namespaceSelector": {}})),
        ("another port", lambda docs: _policy(docs)["ingress"][0]["ports"].append({"port": 6380})),
        (
            "another label",
            lambda docs: _policy(docs)["ingress"][0]["from"][0].update(
                podSelector={"matchLabels": {"app.kubernetes.io/name": "ddm-pipeline"}}
            ),
        ),
    ],
)
def test_a_weaker_network_policy_fails(rendered, what, change):
    docs = copy.deepcopy(rendered["cpu"])
    change(docs)
    assert network_policy_problems(docs), what


def test_the_network_policy_validates_and_a_broken_one_fails(rendered):
    policy = _first(rendered["cpu"], "NetworkPolicy", "ddm-redis")
    assert schema_problems(policy) == []
    broken = copy.deepcopy(policy)
    broken["spec"]["ingress"][0]["ports"][0]["port"] = [6379]
    assert schema_problems(broken)


def _secret_name(docs: list[dict], stem: str) -> str:
    """The generated name (stem plus kustomize's hash) of a Secret of the render."""
    return next(
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "Secret" and d["metadata"]["name"].startswith(stem + "-")
    )


def _config(docs: list[dict]) -> dict:
    return next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("ddm-config-")
    )["data"]


def _expert_of(doc: dict) -> int:
    return int(doc["metadata"]["labels"]["ddm-pipeline/expert"])


def served_deployment(docs: list[dict], paris: Path | None = None) -> Path:
    """The deployment file the render serves: ddm-config's DDM_DEPLOYMENT (a path in the images, where
    the Dockerfiles copy checkpoints/) in this checkout; for the Paris overlay (its deployment on the Paris
    volume), `paris`: a deployment `ddm import paris` wrote."""
    path = Path(_config(docs)["DDM_DEPLOYMENT"])
    if path == PARIS_DEPLOYMENT:
        assert paris is not None, "the render serves Paris: give the imported deployment"
        return paris
    return REPO / path.relative_to(IMAGE_ROOT)


def queue_problems(docs: list[dict], deployment_file: Path | None = None) -> list[str]:
    """The expert Deployments are the experts of the deployment file (default: the one the render
    serves), each running its own expert; the ScaledObjects (when there are any) watch <prefix>ddm.jobs
    for the router, <prefix>ddm.expert.<k> for expert k's Deployment, and the decoder's and the text
    encoder's queues for theirs, with the prefix of ddm-config."""
    names = Names(_config(docs).get("DDM_PREFIX", ""))
    deployment_file = deployment_file or served_deployment(docs)
    experts = {e["id"] for e in tomllib.loads(deployment_file.read_text())["experts"]}
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    expert_deployments = {
        n: d
        for n, d in deployments.items()
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == "expert"
    }
    problems = []
    served = sorted(_expert_of(d) for d in expert_deployments.values())
    if served != sorted(experts):
        problems.append(f"expert Deployments serve {served}, the deployment file has {sorted(experts)}")
    for name, d in expert_deployments.items():
        command = d["spec"]["template"]["spec"]["containers"][0]["command"]
        if command[command.index("--expert") + 1] != str(_expert_of(d)):
            problems.append(f"{name}: runs {command}, labelled expert {_expert_of(d)}")
    scaled = [d for d in docs if d["kind"] == "ScaledObject"]
    if not scaled:
        return problems
    stage_queues = {"router": names.jobs, "decoder": names.decoder_queue, "text-encoder": names.text_queue}
    watched, stages_scaled = set(), set()
    for so in scaled:
        target = deployments.get(so["spec"]["scaleTargetRef"]["name"])
        queues = [t["metadata"].get("queueName") for t in so["spec"]["triggers"] if t["type"] == "rabbitmq"]
        if target is None:
            continue  # reference_problems says so
        component = target["metadata"]["labels"].get("app.kubernetes.io/component")
        if component in stage_queues:
            want = stage_queues[component]
            stages_scaled.add(component)
        elif target["metadata"]["name"] in expert_deployments:
            want = names.expert_queue(_expert_of(target))
            watched.add(_expert_of(target))
        else:
            problems.append(f"ScaledObject {so['metadata']['name']} scales {target['metadata']['name']}")
            continue
        if queues != [want]:
            problems.append(f"ScaledObject {so['metadata']['name']} watches {queues}, not [{want!r}]")
    if watched != experts:
        problems.append(
            f"ScaledObjects watch experts {sorted(watched)}, the deployment file has {sorted(experts)}"
        )
    if "router" not in stages_scaled:
        problems.append("no ScaledObject for the router's jobs queue")
    present = {
        d["metadata"].get("labels", {}).get("app.kubernetes.io/component") for d in deployments.values()
    }
    for stage in sorted(present & {"decoder", "text-encoder"} - stages_scaled):
        problems.append(f"no ScaledObject for the {stage}'s queue")
    return problems


def test_the_queues_are_the_deployments(rendered, paris_import):
    problems = [
        f"{overlay}: {p}"
        for overlay, docs in rendered.items()
        for p in queue_problems(docs, served_deployment(docs, paris_import[1]))
    ]
    assert problems == []
    assert sum(d["kind"] == "ScaledObject" for d in rendered["cpu-keda"]) == 3  # router + 2 experts
    assert sum(d["kind"] == "ScaledObject" for d in rendered["cpu-latent-keda"]) == 6  # + 4 experts, decoder
    # router, 8 experts, text encoder, decoder
    assert sum(d["kind"] == "ScaledObject" for d in rendered[PARIS_OVERLAY]) == 3 + PARIS_EXPERTS


def test_a_wrong_queue_fails(rendered, tmp_path):
    docs = copy.deepcopy(rendered["cpu-keda"])
    _first(docs, "ScaledObject", "ddm-expert-1")["spec"]["triggers"][0]["metadata"]["queueName"] = (
        "ddm.expert.7"
    )
    assert queue_problems(docs)
    # a prefix in ddm-config that the queue names lack
    docs = copy.deepcopy(rendered["cpu-keda"])
    _config(docs)["DDM_PREFIX"] = "prod."
    assert len(queue_problems(docs)) == 3  # each of the three queue names
    # an expert in the deployment file that has no Deployment
    more = tmp_path / "deployment.toml"
    more.write_text(SHIPPED_DEPLOYMENT.read_text() + '\n[[experts]]\nid = 2\ncheckpoint = "x"\n')
    assert queue_problems(rendered["cpu-keda"], more)
    # the decoder's ScaledObject watching another queue, or missing
    docs = copy.deepcopy(rendered["cpu-latent-keda"])
    _first(docs, "ScaledObject", "ddm-decoder")["spec"]["triggers"][0]["metadata"]["queueName"] = "ddm.jobs"
    assert queue_problems(docs) == ["ScaledObject ddm-decoder watches ['ddm.jobs'], not ['ddm.decoder']"]
    docs = [
        d
        for d in rendered["cpu-latent-keda"]
        if d["metadata"]["name"] != "ddm-decoder" or d["kind"] != "ScaledObject"
    ]
    assert queue_problems(docs) == ["no ScaledObject for the decoder's queue"]


# ---------------------------------------------------------------------------------- what each overlay is


def _container(docs: list[dict], deployment: str) -> dict:
    return _first(docs, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]


def _device(docs: list[dict], deployment: str) -> str:
    command = _container(docs, deployment)["command"]
    return command[command.index("--device") + 1]


def test_the_latent_overlays_serve_the_latent_deployment_and_its_decoder(rendered):
    """Their experts 0 and 1 are the base's: only because their frameworks are the shipped deployment's 0
    and 1. Every expert's image carries its framework; the decoder runs in the PyTorch image (its
    autoencoder is a PyTorch net); the MNIST overlays have no decoder."""
    latent, shipped = deployment_frameworks(LATENT_DEPLOYMENT), deployment_frameworks(SHIPPED_DEPLOYMENT)
    assert {k: latent[k] for k in shipped} == shipped
    card = tomllib.loads(LATENT_DEPLOYMENT.read_text())["decoder"]["checkpoint"]
    for overlay, docs in rendered.items():
        if overlay == PARIS_OVERLAY:
            continue  # its own deployment, on the Paris volume: the Paris tests below
        if not overlay.startswith("cpu-latent"):
            assert served_deployment(docs) == SHIPPED_DEPLOYMENT, overlay
            assert not any(d["metadata"]["name"] == "ddm-decoder" for d in docs), overlay
            continue
        assert served_deployment(docs) == LATENT_DEPLOYMENT, overlay
        for k, framework in latent.items():
            assert _container(docs, f"ddm-expert-{k}")["image"] == f"ddm-pipeline:expert-{framework}", k
        decoder = _container(docs, "ddm-decoder")
        assert decoder["command"][:3] == ["ddm", "worker", "decoder"]
        assert decoder["image"] == f"ddm-pipeline:expert-{checkpoint_framework(LATENT_DEPLOYMENT, card)}"
    assert {"cpu-latent", "cpu-latent-keda"} <= set(rendered)


def test_accelerators(rendered):
    cpu, gpu, neuron = rendered["cpu"], rendered["gpu"], rendered["neuron"]
    assert (_device(cpu, "ddm-expert-0"), _device(cpu, "ddm-expert-1")) == ("cpu", "cpu")
    assert (_device(gpu, "ddm-expert-0"), _device(gpu, "ddm-expert-1")) == ("cuda", "gpu")
    assert (_device(neuron, "ddm-expert-0"), _device(neuron, "ddm-expert-1")) == ("neuron", "gpu")
    for docs, deployment, resource in [
        (gpu, "ddm-expert-0", "nvidia.com/gpu"),
        (gpu, "ddm-expert-1", "nvidia.com/gpu"),
        (neuron, "ddm-expert-0", "aws.amazon.com/neuroncore"),
    ]:
        limits = _container(docs, deployment)["resources"]["limits"]
        assert limits[resource] == 1, (deployment, limits)
        assert not {"nvidia.com/gpu", "aws.amazon.com/neuroncore"} - {resource} & limits.keys()
        pod = _first(docs, "Deployment", deployment)["spec"]["template"]["spec"]
        assert pod.get("nodeSelector") or pod.get("affinity", {}).get("nodeAffinity"), deployment
        assert pod.get("tolerations"), deployment
    for docs in (cpu, gpu, neuron):
        for d in docs:
            if d["kind"] in WORKLOADS:
                for c in d["spec"]["template"]["spec"]["containers"]:
                    image = c["image"]
                    assert ":" in image or "@" in image, f"{d['metadata']['name']}: image {image} not set"
    assert _container(cpu, "ddm-webui")["image"] == "ddm-pipeline:webui"
    assert _container(cpu, "ddm-router")["image"] == "ddm-pipeline:router-learned"
    assert _container(cpu, "ddm-expert-0")["image"] == "ddm-pipeline:expert-torch"
    assert _container(cpu, "ddm-expert-1")["image"] == "ddm-pipeline:expert-jax"


# ------------------------------------------------------------------------------------------ Paris

GPU_RESOURCES = {"nvidia.com/gpu", "aws.amazon.com/neuroncore"}
PARIS_STAGES = {  # the CPU roles beside the router, and the router: torch-import image, no GPU
    "ddm-router": ["ddm", "worker", "router"],
    "ddm-text-encoder": ["ddm", "worker", "text-encoder"],
    "ddm-decoder": ["ddm", "worker", "decoder", "--device", "cpu"],
}
PARIS_MOUNTS = {(str(PARIS_DIR), "paris"), (str(PARIS_OUT), "deployment")}  # (mountPath, subPath)


@pytest.fixture(scope="module")
def paris_import(tmp_path_factory) -> tuple[Path, Path]:
    """(a Paris folder in Paris's layout with 8 experts, the deployment file `ddm import paris` wrote)."""
    for module in ("torch", "transformers", "diffusers"):
        pytest.importorskip(module)
    return imported_paris(tmp_path_factory.mktemp("paris-import"))


@pytest.fixture(scope="module")
def paris_job(tree) -> list[dict]:
    return render(tree / PARIS_IMPORT_JOB.relative_to(K8S))


def _accelerators(spec: dict) -> dict[str, dict]:
    """What a pod asks of accelerators, by container: {container: {resource: count}} (limits, requests)."""
    asked = {}
    for c in [*spec.get("initContainers", []), *spec["containers"]]:
        resources = c.get("resources", {})
        found = {k: v for part in ("requests", "limits") for k, v in resources.get(part, {}).items()}
        if found := {k: v for k, v in found.items() if k in GPU_RESOURCES}:
            asked[c["name"]] = found
    return asked


def _paris_mounts(container: dict) -> set[tuple[str, str, bool]]:
    """(mountPath, subPath, readOnly) of each mount of the `paris` volume in a container."""
    return {
        (m["mountPath"], m.get("subPath"), m.get("readOnly", False))
        for m in container.get("volumeMounts", [])
        if m["name"] == "paris"
    }


def _on_gpu_nodes(spec: dict) -> bool:
    tolerated = any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", []))
    return tolerated or "nvidia.com/gpu.present" in spec.get("nodeSelector", {})


def paris_problems(docs: list[dict], claim: str = "ddm-paris") -> list[str]:
    """The Paris overlay's placement: 8 expert Deployments with distinct expert ids 0..7, each running its
    own expert with --device cuda in the CUDA image, one nvidia.com/gpu each (and nothing else), on GPU
    nodes; the router, text encoder and decoder in the torch-import image on CPU, asking no accelerator
    and tolerating no GPU taint; every one of them reading ddm-config's one deployment file, and mounting
    the claim read-only at the folders the import Job writes; the web UI not at all."""
    problems = []
    if Path(_config(docs)["DDM_DEPLOYMENT"]) != PARIS_DEPLOYMENT:
        problems.append(f"ddm-config serves {_config(docs)['DDM_DEPLOYMENT']}, not {PARIS_DEPLOYMENT}")
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    experts = {
        n: d
        for n, d in deployments.items()
        if d["metadata"]["labels"].get("app.kubernetes.io/component") == "expert"
    }
    ids = sorted(_expert_of(d) for d in experts.values())
    if ids != list(range(PARIS_EXPERTS)):
        problems.append(f"expert Deployments serve {ids}, not each of 0..{PARIS_EXPERTS - 1} once")
    for name in sorted(set(PARIS_STAGES) - set(deployments)):
        problems.append(f"no Deployment {name}")
    for name, d in deployments.items():
        spec = d["spec"]["template"]["spec"]
        containers = spec["containers"]
        if name in experts:
            command = containers[0]["command"]
            if command[command.index("--expert") + 1] != str(_expert_of(d)) or command[-2:] != [
                "--device",
                "cuda",
            ]:
                problems.append(f"{name}: runs {command}")
            if _accelerators(spec) != {"expert": {"nvidia.com/gpu": 1}}:
                problems.append(f"{name}: asks {_accelerators(spec)}, not one nvidia.com/gpu")
            if not _on_gpu_nodes(spec) or containers[0]["image"] != "ddm-pipeline:cuda":
                problems.append(f"{name}: not the CUDA image on GPU nodes")
        elif name in PARIS_STAGES:
            if (
                containers[0]["command"] != PARIS_STAGES[name]
                or containers[0]["image"] != "ddm-pipeline:torch-import"
            ):
                problems.append(f"{name}: runs {containers[0]['command']} in {containers[0]['image']}")
            if _accelerators(spec) or _on_gpu_nodes(spec):
                problems.append(f"{name}: asks for a GPU ({_accelerators(spec)}) or goes to GPU nodes")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        if name not in experts and name not in PARIS_STAGES:
            if "paris" in volumes or _accelerators(spec):
                problems.append(f"{name}: mounts the Paris volume or asks for a GPU")
            continue
        if volumes.get("paris", {}).get("persistentVolumeClaim") != {"claimName": claim, "readOnly": True}:
            problems.append(
                f"{name}: its paris volume is {volumes.get('paris')}, not claim {claim} read-only"
            )
        for c in containers:
            if _paris_mounts(c) != {(path, sub, True) for path, sub in PARIS_MOUNTS}:
                problems.append(f"{name}: {c['name']} mounts {sorted(_paris_mounts(c))}")
            if any(e["name"] == "DDM_DEPLOYMENT" for e in c.get("env", [])):
                problems.append(f"{name}: {c['name']} serves a DDM_DEPLOYMENT of its own")
    return problems


def test_paris_places_each_expert_on_a_gpu_and_the_stages_beside_the_router(rendered):
    assert paris_problems(rendered[PARIS_OVERLAY]) == []


def _paris_volume(spec: dict) -> dict:
    (volume,) = [v for v in spec["volumes"] if v["name"] == "paris"]
    return volume


def _deployment_mount(docs: list[dict], deployment: str) -> dict:
    """The mount of the import's folder (the claim's deployment/) in a Deployment's container."""
    mounts = _container(docs, deployment)["volumeMounts"]
    (mount,) = [m for m in mounts if m["name"] == "paris" and m.get("subPath") == "deployment"]
    return mount


def _set_env(docs: list[dict], name: str, value: str) -> None:
    _container(docs, "ddm-expert-3").setdefault("env", []).append({"name": name, "value": value})


PARIS_MUTATIONS = [
    (
        "an expert with two GPUs",
        lambda d: _container(d, "ddm-expert-5")["resources"]["limits"].update({"nvidia.com/gpu": 2}),
    ),
    (
        "two experts serving one id",
        lambda d: _first(d, "Deployment", "ddm-expert-6")["metadata"]["labels"].update(
            {"ddm-pipeline/expert": "7"}
        ),
    ),
    ("an expert on CPU", lambda d: _container(d, "ddm-expert-2")["command"].__setitem__(-1, "cpu")),
    (
        "the router asks for a GPU",
        lambda d: _container(d, "ddm-router")["resources"]["limits"].update({"nvidia.com/gpu": 1}),
    ),
    (
        "the text encoder on GPU nodes",
        lambda d: _first(d, "Deployment", "ddm-text-encoder")["spec"]["template"]["spec"].update(
            nodeSelector={"nvidia.com/gpu.present": "true"}
        ),
    ),
    ("no decoder", lambda d: d.remove(_first(d, "Deployment", "ddm-decoder"))),
    ("an expert serving another deployment", lambda d: _set_env(d, "DDM_DEPLOYMENT", "/srv/other.toml")),
    ("a writable mount", lambda d: _deployment_mount(d, "ddm-decoder").pop("readOnly")),
    (
        "another claim",
        lambda d: _paris_volume(_pod(d, "ddm-expert-0"))["persistentVolumeClaim"].update(claimName="x"),
    ),
    (
        "the import's folder elsewhere",
        lambda d: _deployment_mount(d, "ddm-router").update(mountPath="/srv/out"),
    ),
]


def _pod(docs: list[dict], deployment: str) -> dict:
    return _first(docs, "Deployment", deployment)["spec"]["template"]["spec"]


@pytest.mark.parametrize(("what", "change"), PARIS_MUTATIONS, ids=[m[0] for m in PARIS_MUTATIONS])
def test_a_misplaced_paris_fails(rendered, what, change):
    docs = copy.deepcopy(rendered[PARIS_OVERLAY])
    change(docs)
    assert paris_problems(docs), f"{what}: still fine"


def test_the_paris_claim_is_a_parameter(tree, tmp_path):
    """One literal in the overlay (and the Job's kustomization) names the claim of every Paris pod; the
    ConfigMap that holds it is local-config, not applied."""
    copied = tmp_path / "k8s"
    shutil.copytree(tree, copied)
    for kustomization in (copied / "overlays" / PARIS_OVERLAY, copied / PARIS_IMPORT_JOB.relative_to(K8S)):
        path = kustomization / "kustomization.yaml"
        assert path.read_text().count("claimName=ddm-paris\n") == 1, path
        path.write_text(path.read_text().replace("claimName=ddm-paris\n", "claimName=team-paris\n"))
    docs = render(copied / "overlays" / PARIS_OVERLAY)
    assert paris_problems(docs, claim="team-paris") == []
    job = render(copied / PARIS_IMPORT_JOB.relative_to(K8S))
    claim = _paris_volume(job[0]["spec"]["template"]["spec"])["persistentVolumeClaim"]["claimName"]
    assert claim == "team-paris"
    for rendering in (docs, job):
        assert not [d for d in rendering if d["metadata"]["name"] == "ddm-paris-volume"]


def test_the_import_job_writes_where_the_paris_pods_read(rendered, paris_job):
    """`ddm import paris DIR --out OUT` in the Job: DIR and OUT are the folders of the claim that every
    Paris pod mounts at the same paths (the meta.json files it writes name Paris's weights by absolute
    path), OUT's deployment.toml is ddm-config's, and only the Job may write OUT."""
    from ddm.ops.cli import build_parser

    (job,) = paris_job
    assert job["kind"] == "Job" and schema_problems(job) == []
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["automountServiceAccountToken"] is False
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
    assert not _accelerators(spec) and container["image"] == "ddm-pipeline:torch-import"
    argv = container["command"][1:]
    args = build_parser(argv).parse_args(argv)
    assert (args.format, Path(args.dir), Path(args.out)) == ("paris", PARIS_DIR, PARIS_OUT)
    assert _paris_mounts(container) == {
        (str(PARIS_DIR), "paris", True),
        (str(PARIS_OUT), "deployment", False),
    }
    docs = rendered[PARIS_OVERLAY]
    assert Path(_config(docs)["DDM_DEPLOYMENT"]) == Path(args.out) / "deployment.toml"
    claim = _paris_volume(spec)["persistentVolumeClaim"]["claimName"]
    assert claim == _paris_volume(_pod(docs, "ddm-router"))["persistentVolumeClaim"]["claimName"]


def test_the_documented_flax_overlay_moves_one_expert_to_jax(tree, tmp_path):
    """docs/DEPLOY.md's overlay for a Paris expert imported with --jax, as written there (beside a
    checkout's ops/k8s): that expert in the JAX CUDA image with --device gpu, labelled jax, still one GPU
    and the Paris volume; every other Paris pod unchanged."""
    text = (REPO / "docs" / "DEPLOY.md").read_text()
    block = re.search(r"<!-- paris-jax-k8s -->\n```yaml\n(.*?)\n```", text, re.S)
    assert block, "docs/DEPLOY.md has no block after <!-- paris-jax-k8s -->"
    shutil.copytree(tree, tmp_path / "ops" / "k8s")
    (tmp_path / "my-paris").mkdir()
    (tmp_path / "my-paris" / "kustomization.yaml").write_text(block.group(1))
    docs = render(tmp_path / "my-paris")
    assert [p for d in docs for p in schema_problems(d)] == []
    jax = _first(docs, "Deployment", "ddm-expert-5")
    assert jax["metadata"]["labels"]["ddm-pipeline/framework"] == "jax"
    container = _container(docs, "ddm-expert-5")
    assert container["image"] == "ddm-pipeline:jax-cuda"
    assert container["command"] == ["ddm", "worker", "expert", "--expert", "5", "--device", "gpu"]
    # the rest of what paris_problems checks holds for it: only its image and device differ
    problems = paris_problems(docs)
    assert problems == [
        "ddm-expert-5: runs " + str(container["command"]),
        "ddm-expert-5: not the CUDA image on GPU nodes",
    ]
    assert _accelerators(jax["spec"]["template"]["spec"]) == {"expert": {"nvidia.com/gpu": 1}}


def test_paris_scales_every_queue_of_the_imported_deployment(rendered, paris_import):
    """The experts of a real `ddm import paris` are the overlay's, and KEDA watches each one's queue, the
    text encoder's and the decoder's; each expert may take at most 2 GPUs."""
    docs = rendered[PARIS_OVERLAY]
    deployment = tomllib.loads(paris_import[1].read_text())
    assert {"decoder", "text_encoder"} <= set(deployment)
    assert queue_problems(docs, paris_import[1]) == []
    scaled = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "ScaledObject"}
    assert {scaled[f"ddm-expert-{k}"]["maxReplicaCount"] for k in range(PARIS_EXPERTS)} == {2}


def test_the_dockerfiles_and_targets_named_exist():
    """The images' build lines (base/kustomization.yaml, docs/KUBERNETES.md) name a Dockerfile that
    exists, and targets that are its stages; every base image tag is a target of cpu.Dockerfile."""
    texts = [K8S / "base" / "kustomization.yaml", REPO / "docs" / "KUBERNETES.md"]
    for path in texts:
        text = path.read_text()
        named = set(re.findall(r"ops/docker/[\w.-]*Dockerfile\b", text))
        assert named, path
        for dockerfile in named:
            assert (REPO / dockerfile).is_file(), f"{path.name} names {dockerfile}"
        for dockerfile, target in re.findall(r"-f (ops/docker/\S+) --target (\S+)", text):
            stages = re.findall(r"^FROM \S+ AS (\S+)", (REPO / dockerfile).read_text(), re.MULTILINE)
            assert target in stages, f"{path.name}: {dockerfile} has no target {target}"
    stages = re.findall(r"^FROM \S+ AS (\S+)", (REPO / "ops/docker/cpu.Dockerfile").read_text(), re.MULTILINE)
    tags = {i["newTag"] for i in yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())["images"]}
    assert tags <= set(stages), tags - set(stages)


def test_pods_run_as_non_root_with_limits_and_probes(rendered):
    for overlay, docs in rendered.items():
        for where, spec in _pod_specs(docs):
            assert spec["securityContext"]["runAsNonRoot"] is True, (overlay, where)
            assert spec.get("automountServiceAccountToken") is False, (overlay, where)
            for c in [*spec.get("initContainers", []), *spec["containers"]]:
                assert c["securityContext"]["allowPrivilegeEscalation"] is False, (overlay, where, c["name"])
                assert {"cpu", "memory"} <= c["resources"]["limits"].keys(), (overlay, where, c["name"])
                assert {"cpu", "memory"} <= c["resources"]["requests"].keys(), (overlay, where, c["name"])
            for c in spec["containers"]:
                assert "readinessProbe" in c and "livenessProbe" in c, (overlay, where, c["name"])


def test_scaling(rendered):
    keda = {d["metadata"]["name"]: d["spec"] for d in rendered["cpu-keda"] if d["kind"] == "ScaledObject"}
    zero = {d["metadata"]["name"]: d["spec"] for d in rendered[SCALE_TO_ZERO] if d["kind"] == "ScaledObject"}
    for spec in keda.values():
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "rabbitmq" and trigger["metadata"]["mode"] == "QueueLength"
        assert float(trigger["metadata"]["activationValue"]) < float(trigger["metadata"]["value"])
        assert trigger["authenticationRef"]["name"] == "ddm-rabbitmq"
    assert keda["ddm-router"]["minReplicaCount"] == zero["ddm-router"]["minReplicaCount"] == 1
    assert {zero[n]["minReplicaCount"] for n in zero if n.startswith("ddm-expert-")} == {0}
    # what wakes a sleeping expert (requests only) and when none comes (degrade): said where it is added
    said = " ".join(
        line.lstrip("# ").strip()
        for line in (K8S / "components" / "keda-scale-to-zero" / "kustomization.yaml")
        .read_text()
        .splitlines()
        if line.startswith("#")
    )
    assert DEFAULT_EXPERT_LOSS_POLICY == "wait" and 'on_expert_loss "wait", the default' in said
    assert "woken only by requests" in said and "do NOT wait" not in said
    assert 'on_expert_loss "degrade"' in said and "must keep minReplicaCount 1" in said
    # the router waits for an expert waking from zero instead of failing its jobs after 30 s
    assert int(_config(rendered[SCALE_TO_ZERO])["DDM_EXPERT_GRACE_S"]) >= 300
    assert "DDM_EXPERT_GRACE_S" not in _config(rendered["cpu-keda"])
    # KEDA owns the replicas of what it scales: a `replicas:` left in would be reset by every apply
    for overlay, docs in rendered.items():
        for so in (d for d in docs if d["kind"] == "ScaledObject"):
            target = _first(docs, "Deployment", so["spec"]["scaleTargetRef"]["name"])
            assert "replicas" not in target["spec"], (overlay, target["metadata"]["name"])


def test_broker_and_redis(rendered):
    docs = rendered["cpu"]
    cluster = _first(docs, "RabbitmqCluster")
    assert cluster["spec"]["replicas"] == 3
    assert "consumer_timeout = 86400000" in cluster["spec"]["rabbitmq"]["additionalConfig"]
    assert _config(docs)["DDM_QUEUE_TYPE"] == "quorum"
    redis = _first(docs, "StatefulSet", "ddm-redis")
    assert redis["spec"]["replicas"] == 3
    assert {c["name"] for c in redis["spec"]["template"]["spec"]["containers"]} == {"redis", "sentinel"}
    example = (K8S / "components" / "secrets" / "redis.env.example").read_text()
    assert "DDM_REDIS_URL=redis+sentinel://" in example
    # the Sentinels have a password of their own: set in init.sh, given by the clients' URL
    env = dict(line.split("=", 1) for line in example.splitlines() if line and not line.startswith("#"))
    assert parse_sentinel_url(env["DDM_REDIS_URL"]).sentinel_password == env["SENTINEL_PASSWORD"]
    init = (K8S / "components" / "redis-sentinel" / "init.sh").read_text()
    assert 'echo "requirepass ${SENTINEL_PASSWORD}"' in init
    assert 'REDISCLI_AUTH="${SENTINEL_PASSWORD}" timeout 3 redis-cli' in init  # it asks the other Sentinels
    sentinel = next(c for c in redis["spec"]["template"]["spec"]["containers"] if c["name"] == "sentinel")
    assert {
        "name": "REDISCLI_AUTH",
        "valueFrom": {"secretKeyRef": {"name": _secret_name(docs, "ddm-redis"), "key": "SENTINEL_PASSWORD"}},
    } in sentinel["env"]


def test_no_password_is_committed():
    """The Secrets come from git-ignored env files; only the templates, with placeholders, are in git."""
    secrets = K8S / "components" / "secrets"
    assert "*.env" in (secrets / ".gitignore").read_text().split()
    tracked = subprocess.run(
        ["git", "ls-files", str(K8S)], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [p for p in tracked if p.endswith(".env")], tracked
    for example in secrets.glob("*.env.example"):
        for line in example.read_text().splitlines():
            if line and not line.startswith("#"):
                value = line.partition("=")[2]
                assert "PASSWORD" in value, f"{example.name}: {line} holds no placeholder"


def test_the_redis_start_script_parses():
    """init.sh runs under the redis image's /bin/sh (dash): at least it parses there. (It was run once by
    hand against three local redis-servers and Sentinels: docs/KUBERNETES.md.)"""
    shell = shutil.which("dash") or shutil.which("sh")
    script = K8S / "components" / "redis-sentinel" / "init.sh"
    out = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
