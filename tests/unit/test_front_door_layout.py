"""The front door's layers (docs/design.md, "The front door's layers"): every module's imports, read with `ast`
(TYPE_CHECKING ones too), point down or across a layer, never up and never in a circle; every API module
registers its API and the server serves exactly what was registered."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from front_door.api_keys import ApiKey
from front_door.apis import registry

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "front_door"

# Bottom up; a module's layer is its longest prefix here. A module imports only from its own layer or below.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("front_door.api_keys", "front_door.stopping", "front_door.producer_id_manager", "front_door.features"),
    ("front_door.cluster",),
    ("front_door.groups", "front_door.transactions", "front_door.metrics", "front_door.ingress_bridge"),
    ("front_door.network",),
    ("front_door.security",),
    ("front_door.context", "front_door.access", "front_door.door_membership", "front_door.settings"),
    ("front_door.apis",),
    ("front_door.processor", "front_door.transaction_startup", "front_door.server"),
)


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    best = (-1, -1)
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), rank)
    return best[1]


def _imports() -> dict[str, set[str]]:
    """front_door module -> the front_door modules it imports (a package's submodule when one is named)."""
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module(path)
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {t for t in targets if t.split(".")[0] == "front_door" and t in modules and t != name}
    return graph


def test_every_front_door_module_has_a_layer() -> None:
    assert [m for m in _imports() if m != "front_door" and _layer(m) < 0] == []


def test_no_front_door_module_imports_a_higher_layer() -> None:
    assert sorted((m, t) for m, targets in _imports().items() for t in targets if _layer(t) > _layer(m)) == []


def test_front_door_has_no_import_cycle() -> None:
    graph = _imports()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target):], target] if target in path else [module, target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_front_door_imports_nothing_above_it() -> None:
    above = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                   for node in ast.walk(ast.parse(p.read_text()))
                   if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "streaming")
    assert above == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "apis").glob("*.py")), ids=lambda p: p.name)
def test_a_module_declaring_an_api_registered_it(path: Path) -> None:
    from importlib import import_module

    module = import_module(_module(path))
    declared = [v for v in vars(module).values() if isinstance(v, registry.Api)]
    declared += [a for v in vars(module).values() if isinstance(v, tuple) for a in v if isinstance(a, registry.Api)]
    assert all(registry.APIS[api.key] is api for api in declared)


def test_every_api_key_the_door_names_is_registered_and_served() -> None:
    from front_door.processor import HANDLERS, READABLE

    assert set(ApiKey) <= set(registry.APIS)
    assert HANDLERS == {key: api.handler for key, api in registry.APIS.items()}
    assert READABLE == {**registry.ADVERTISED, **{key: registry.APIS[key].versions for key in registry.REFUSED_APIS}}
    assert registry.before_authentication() == {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


_CHECKS = {"authorize": 3, "authorized_names": 3, "authorize_by_resource_type": 3, "denied": 3}


def _asked(path: Path) -> set[tuple[str, str | None]]:
    """(operation, resource type or None where it is not spelled out) of each ACL check in a module's source."""
    asked: set[tuple[str, str | None]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in {*_CHECKS, "authorize_cluster"} or len(node.args) < 3:
            continue
        operation = node.args[2]
        if not (isinstance(operation, ast.Attribute) and getattr(operation.value, "id", "") == "AclOperation"):
            continue
        resource: str | None = "CLUSTER" if name == "authorize_cluster" else None
        if name in _CHECKS and len(node.args) > _CHECKS[name] and isinstance(node.args[3], ast.Attribute):
            resource = node.args[3].attr
        asked.add((operation.attr, resource))
    return asked


@pytest.mark.parametrize("key", sorted(k for k, api in registry.APIS.items() if not api.refused))
def test_an_api_declares_every_acl_its_module_asks_for(key: int) -> None:
    import sys

    api = registry.APIS[key]
    module = sys.modules[api.handler.__module__]
    assert module.__file__ is not None
    declared = {(acl.operation.name, acl.resource.name) for acl in api.acls}
    for operation, resource in _asked(Path(module.__file__)):
        if resource is None:  # the resource type is a variable: the operation is declared with some type
            assert operation in {op for op, _ in declared}, (api.name, operation)
        else:
            assert (operation, resource) in declared, (api.name, operation, resource)
