"""deploy/: the Kubernetes manifests validate against the API's schemas (offline), and say what matters."""

import copy
import json
import re
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from corral.server.metrics import Metrics, ops_routes

DEPLOY = Path(__file__).resolve().parent.parent / 'deploy'
#: The Kubernetes version the manifests are validated against: the first release with user
#: namespaces (`hostUsers: false`) on by default.
KUBERNETES = '1.33.0'


def manifests() -> dict[str, dict]:
    """Every object `kubectl apply -f deploy/kubernetes/` applies, by kind, and the Secret's
    template beside that folder."""
    objects = {}
    for path in [*sorted((DEPLOY / 'kubernetes').glob('*.yaml')), DEPLOY / 'secret.template.yaml']:
        for document in yaml.safe_load_all(path.read_text()):
            assert document['kind'] not in objects, f'two {document["kind"]} objects'
            objects[document['kind']] = document
    return objects


def test_the_manifests_are_every_object_a_deployment_needs():
    assert sorted(manifests()) == ['Deployment', 'PodDisruptionBudget', 'Secret', 'Service']


def test_applying_the_folder_never_replaces_the_real_secret_with_placeholders():
    applied = [path.name for path in sorted((DEPLOY / 'kubernetes').iterdir())]
    assert applied == ['deployment.yaml', 'poddisruptionbudget.yaml', 'service.yaml']
    kinds = [document['kind'] for name in applied for document in yaml.safe_load_all((DEPLOY / 'kubernetes' / name).read_text())]
    assert 'Secret' not in kinds
    assert all('REPLACE-ME' not in (DEPLOY / 'kubernetes' / name).read_text() for name in applied)
    assert manifests()['Secret']['stringData'] == {
        'store-url': 'postgresql://corral:REPLACE-ME@postgres:5432/corral', 'state-key': 'REPLACE-ME-WITH-64-HEX-DIGITS'
    }


@pytest.mark.parametrize('kind', ['Deployment', 'PodDisruptionBudget', 'Secret', 'Service'])
def test_each_manifest_validates_against_the_kubernetes_schema(kind):
    kubernetes_validate.validate(manifests()[kind], KUBERNETES, strict=True)


def test_the_validation_refuses_a_misspelled_field():
    deployment = copy.deepcopy(manifests()['Deployment'])
    deployment['spec']['template']['spec']['hostUser'] = False
    with pytest.raises(kubernetes_validate.ValidationError) as info:
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)
    assert info.value.message == "Additional properties are not allowed ('hostUser' was unexpected)"


def pod_and_container() -> tuple[dict, dict]:
    pod = manifests()['Deployment']['spec']['template']['spec']
    (container,) = pod['containers']
    return pod, container


async def always_ready() -> bool:
    return True


def test_the_probes_ask_the_routes_the_server_serves():
    pod, container = pod_and_container()
    paths = {route.path for route in ops_routes(Metrics(), ready=always_ready)}
    probes = {name: container[name]['httpGet'] for name in ('startupProbe', 'livenessProbe', 'readinessProbe')}
    assert {name: probe['path'] for name, probe in probes.items()} == {
        'startupProbe': '/healthz',
        'livenessProbe': '/healthz',
        'readinessProbe': '/readyz',
    }
    assert {probe['path'] for probe in probes.values()} <= paths
    assert {probe['port'] for probe in probes.values()} == {'http'}
    assert container['ports'] == [{'name': 'http', 'containerPort': 8765, 'protocol': 'TCP'}]
    annotations = manifests()['Deployment']['spec']['template']['metadata']['annotations']
    assert (annotations['prometheus.io/port'], annotations['prometheus.io/path']) == ('8765', '/metrics')
    assert '/metrics' in paths


def test_the_pod_gives_the_process_layer_what_it_needs_and_nothing_more():
    pod, container = pod_and_container()
    assert pod['hostUsers'] is False
    assert pod['securityContext'] == {
        'runAsNonRoot': True,
        'runAsUser': 10001,
        'runAsGroup': 10001,
        'seccompProfile': {'type': 'Unconfined'},  # unshare(2) and mount(2): corral's own filter confines the workers
        'appArmorProfile': {'type': 'Unconfined'},  # mount(2) of the empty root
    }
    assert container['securityContext'] == {
        'capabilities': {'drop': ['ALL']},
        'allowPrivilegeEscalation': False,
        'privileged': False,
        'readOnlyRootFilesystem': True,
        'procMount': 'Default',
    }
    assert pod['automountServiceAccountToken'] is False
    assert {mount['mountPath'] for mount in container['volumeMounts']} == {'/tmp'}  # ty's stubs folder


def test_a_terminating_pod_drains_within_its_grace_period():
    pod, container = pod_and_container()
    assert container['lifecycle']['preStop'] == {'sleep': {'seconds': 5}}
    assert pod['terminationGracePeriodSeconds'] == 60


def test_the_store_url_and_the_state_key_come_from_the_secret():
    _, container = pod_and_container()
    secret = manifests()['Secret']
    references = {variable['name']: variable['valueFrom']['secretKeyRef'] for variable in container['env'] if 'valueFrom' in variable}
    assert references == {
        'CORRAL_STORE': {'name': 'corral', 'key': 'store-url'},
        'CORRAL_STATE_KEY': {'name': 'corral', 'key': 'state-key'},
    }
    assert secret['metadata']['name'] == 'corral'
    assert sorted(secret['stringData']) == ['state-key', 'store-url']
    assert secret['stringData']['store-url'].startswith('postgresql://')
    assert not any('corral' in argument and '://' in argument for argument in container['args'])  # no secret on the command line


def test_the_service_reaches_the_pods():
    deployment, service = manifests()['Deployment'], manifests()['Service']
    labels = deployment['spec']['template']['metadata']['labels']
    assert service['spec']['selector'].items() <= labels.items()
    assert deployment['spec']['selector']['matchLabels'] == service['spec']['selector']
    assert manifests()['PodDisruptionBudget']['spec']['selector']['matchLabels'] == service['spec']['selector']
    assert service['spec']['ports'] == [{'name': 'http', 'port': 80, 'targetPort': 'http', 'protocol': 'TCP'}]


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / 'Dockerfile').read_text().replace('\\\n', ' ')
    return [tuple(line.split(None, 1)) for line in text.splitlines() if line.strip() and not line.lstrip().startswith('#')]


def test_the_image_installs_the_server_and_postgres_extras_and_runs_corral_serve():
    instructions = dockerfile_instructions()
    assert instructions[0] == ('FROM', 'python:3.11-slim-bookworm')
    (install,) = [argument for op, argument in instructions if op == 'RUN' and 'pip install' in argument]
    assert install.startswith('pip install --constraint constraints.txt ')
    assert ('COPY', 'pyproject.toml README.md deploy/constraints.txt ./') in instructions
    extras = re.search(r"'\.\[([a-z,-]+)\]'", install).group(1).split(',')
    assert extras == ['server', 'postgres']
    declared = tomllib.loads((DEPLOY.parent / 'pyproject.toml').read_text())['project']['optional-dependencies']
    assert set(extras) <= set(declared)
    command = [json.loads(argument) for op, argument in instructions if op in ('ENTRYPOINT', 'CMD')]
    assert command == [['corral', 'serve'], ['--host', '0.0.0.0', '--port', '8765']]
    _, container = pod_and_container()
    assert container['args'] == command[1]
    assert ('USER', '10001:10001') in instructions


def pins() -> dict[str, str]:
    lines = (DEPLOY / 'constraints.txt').read_text().splitlines()
    return dict(line.split('==') for line in lines if line and not line.startswith('#'))


def test_every_package_the_image_installs_is_pinned():
    """The closure of corral[server,postgres]'s requirements on the image's Python 3.11 on Linux,
    corral's own read from pyproject.toml (an installed corral's metadata may be older than the
    source), the others' from the installed packages' metadata: each is pinned, to the version the
    suite runs with."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    environment = {'python_version': '3.11', 'python_full_version': '3.11.0', 'sys_platform': 'linux', 'platform_system': 'Linux'}

    def applies(requirement: Requirement, extras: set[str]) -> bool:
        return requirement.marker is None or any(requirement.marker.evaluate({**environment, 'extra': extra}) for extra in {''} | extras)

    project = tomllib.loads((DEPLOY.parent / 'pyproject.toml').read_text())['project']
    own = project['dependencies'] + project['optional-dependencies']['server'] + project['optional-dependencies']['postgres']
    waiting = [r for r in map(Requirement, own) if applies(r, set())]
    needed: set[str] = set()
    while waiting:
        requirement = waiting.pop()
        name = canonicalize_name(requirement.name)
        if name != 'corral' and name not in needed:
            needed.add(name)
            waiting += [r for r in map(Requirement, importlib.metadata.requires(name) or []) if applies(r, set(requirement.extras))]
    pinned = {canonicalize_name(name): version for name, version in pins().items()}
    assert sorted(needed) == sorted(pinned)
    assert {name: importlib.metadata.version(name) for name in needed} == pinned


def test_a_key_is_made_in_the_cluster_with_the_store_the_pod_reads():
    """deploy/README.md's `kubectl exec ... corral keys create` reads the pod's CORRAL_STORE, the
    variable the Deployment sets and `corral keys` reads without --store."""
    readme = (DEPLOY / 'README.md').read_text()
    assert 'kubectl exec deploy/corral -- corral keys create --tenant acme' in readme
    deployment = manifests()['Deployment']
    assert deployment['metadata']['name'] == 'corral'
    _, container = pod_and_container()
    assert 'CORRAL_STORE' in {variable['name'] for variable in container['env']}
    from corral.store.url import STORE_ENV

    assert STORE_ENV == 'CORRAL_STORE'
