"""Authentication and grants of ``omnigraph serve`` (real server processes on 127.0.0.1).

* Every endpoint x {no token, a wrong token, a token with every grant but the one it needs, a
  token with only that grant}: 401, 401, 403, success; every endpoint that writes a branch, with
  a token holding every grant but scoped to other branches: 403 ``branch_out_of_scope``; the
  refusals write nothing.
* Branch scopes and protected branches (``feature-*`` cannot write ``main``; a protected branch
  changes only by a merge with the ``merge`` grant).
* The endpoint table below is the whole API: a route added without a row here fails the test.
* The commit's actor is the token's; ``X-Omnigraph-Actor`` needs ``impersonate``.
* Start-up: no tokens file and no ``--unauthenticated`` is refused, as is ``--unauthenticated``
  on an address other than loopback (checked without binding one), and a bad tokens file; each
  open choice prints a warning line.
* ``omnigraph token create`` prints a token that the printed entry admits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from omnigraph.server.grants import Grant
from tests.support.graph_helpers import OMNIGRAPH, SCHEMA_PATH, export_text, invoke, make_example_graph, person, run_cli
from tests.support.serve_helpers import NDJSON, Server, Tokens, error_of, start_fenced, stored_state, write_tokens

ALL = list(Grant)


@dataclass(frozen=True)
class Endpoint:
    """One route: how to call it (given a fresh suffix for names it creates) and what it needs."""

    method: str
    path: str
    grant: Grant | None
    call: Callable[[httpx.Client, int], httpx.Response]
    ok: int = 200
    setup: Callable[[Server, int], None] | None = None  # run (as admin) before the four calls
    scoped: bool = False  # writes a branch: a token whose branch_scope leaves that branch out is refused


def _merge_source(server: Server, n: int) -> None:
    """A branch with one new person, ready to merge into main."""
    assert server.client.post("/branches", json={"name": f"merge-src-{n}"}).status_code == 201
    assert server.load([person(f"Merged{n}", n)], branch=f"merge-src-{n}").status_code == 200


def _doomed(server: Server, n: int) -> None:
    assert server.client.post("/branches", json={"name": f"doomed-{n}"}).status_code == 201


def _schema_with(n: int) -> str:
    """The example schema with one more optional property on Person (a change the plan and apply accept)."""
    email = "    email: String? @unique\n"
    return SCHEMA_PATH.read_text(encoding="utf-8").replace(email, f"{email}    extra{n}: String?\n")


def endpoints() -> list[Endpoint]:
    insert = "query put($name: String) { insert Person { name: $name } }"
    return [
        Endpoint("GET", "/healthz", None, lambda c, n: c.get("/healthz")),
        Endpoint("GET", "/readyz", None, lambda c, n: c.get("/readyz")),
        Endpoint("GET", "/docs", None, lambda c, n: c.get("/docs")),
        Endpoint("GET", "/openapi.json", None, lambda c, n: c.get("/openapi.json")),
        Endpoint("GET", "/docs/assets/{name}", None, lambda c, n: c.get("/docs/assets/swagger-ui.css")),
        Endpoint("GET", "/version", Grant.READ, lambda c, n: c.get("/version")),
        Endpoint("GET", "/metrics", Grant.READ, lambda c, n: c.get("/metrics")),
        Endpoint("GET", "/branches", Grant.READ, lambda c, n: c.get("/branches")),
        Endpoint("GET", "/branches/{branch}/snapshot", Grant.READ, lambda c, n: c.get("/branches/main/snapshot")),
        Endpoint("GET", "/branches/{branch}/commits", Grant.READ, lambda c, n: c.get("/branches/main/commits")),
        Endpoint("GET", "/branches/{branch}/export", Grant.EXPORT, lambda c, n: c.get("/branches/main/export")),
        # the example graph has no Blob property: a granted call reaches the handler, which refuses `age`
        Endpoint(
            "GET",
            "/branches/{branch}/blob",
            Grant.READ,
            lambda c, n: c.get("/branches/main/blob", params={"type": "Person", "id": "Alice", "property": "age"}),
            ok=400,
        ),
        Endpoint(
            "POST",
            "/branches/{branch}/query",
            Grant.READ,
            lambda c, n: c.post("/branches/main/query", json={"query": "query people() { match { $p: Person } return { $p.name } }"}),
        ),
        Endpoint(
            "POST",
            "/branches/{branch}/explain",
            Grant.READ,
            lambda c, n: c.post("/branches/main/explain", json={"query": "query people() { match { $p: Person } return { $p.name } }"}),
        ),
        Endpoint("POST", "/branches", Grant.BRANCH, lambda c, n: c.post("/branches", json={"name": f"made-{n}"}), ok=201, scoped=True),
        Endpoint("DELETE", "/branches/{name}", Grant.BRANCH, lambda c, n: c.delete(f"/branches/doomed-{n}"), setup=_doomed, scoped=True),
        Endpoint(
            "POST",
            "/branches/{branch}/load",
            Grant.WRITE,
            lambda c, n: c.post(
                "/branches/main/load", params={"mode": "append"}, content=f"{person(f'Loaded{n}', n)}\n".encode(), headers=NDJSON
            ),
            scoped=True,
        ),
        Endpoint(
            "POST",
            "/branches/{branch}/mutate",
            Grant.WRITE,
            lambda c, n: c.post("/branches/main/mutate", json={"query": insert, "params": {"name": f"Mutated{n}"}}),
            scoped=True,
        ),
        Endpoint(
            "POST",
            "/branches/{name}/merge",
            Grant.MERGE,
            lambda c, n: c.post(f"/branches/merge-src-{n}/merge", json={"into": "main"}),
            setup=_merge_source,
            scoped=True,
        ),
        Endpoint("POST", "/schema/plan", Grant.READ, lambda c, n: c.post("/schema/plan", json={"schema": _schema_with(n)})),
        Endpoint("POST", "/schema/apply", Grant.ADMIN, lambda c, n: c.post("/schema/apply", json={"schema": _schema_with(n)}), scoped=True),
    ]


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[Server, Tokens]]:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    actors: dict[str, list[Grant]] = {"admin": [g for g in ALL if g != Grant.IMPERSONATE]}
    for grant in ALL:
        actors[f"only-{grant.value}"] = [grant]
        actors[f"all-but-{grant.value}"] = [g for g in ALL if g != grant]
    actors["writer"] = [Grant.READ, Grant.WRITE]
    actors["proxy"] = [Grant.READ, Grant.WRITE, Grant.IMPERSONATE]
    actors["scoped"] = actors["admin"]
    tokens = write_tokens(tmp_path, actors, scopes={"scoped": ["elsewhere-*"]})
    server = start_fenced(uri, tokens=tokens.path, token=tokens.by_actor["admin"])
    try:
        yield server, tokens
    finally:
        server.stop()


def test_every_endpoint_by_token(guarded: tuple[Server, Tokens]) -> None:
    server, tokens = guarded
    table = endpoints()
    described = {(m.upper(), p) for p, item in server.client.get("/openapi.json").json()["paths"].items() for m in item}
    hidden = {("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/docs/assets/{name}")}
    assert described | hidden == {(e.method, e.path) for e in table}, "every route has a row in this table"
    for n, endpoint in enumerate(table):
        name = f"{endpoint.method} {endpoint.path}"
        if endpoint.setup is not None:
            endpoint.setup(server, n)
        if endpoint.grant is None:
            with server.new_client(None) as anyone:
                assert endpoint.call(anyone, n).status_code == 200, name
            continue
        before = stored_state(server.graph)
        with (
            server.new_client(None) as nobody,
            server.new_client("og_not-a-token") as stranger,
            server.new_client(tokens.by_actor[f"all-but-{endpoint.grant.value}"]) as lacking,
        ):
            for client in (nobody, stranger):
                refused = endpoint.call(client, n)
                error_of(refused, 401, "unauthorized")
                assert refused.headers["www-authenticate"] == "Bearer", name
            error = error_of(endpoint.call(lacking, n), 403, "forbidden")
            assert error["details"] == {"grant": endpoint.grant.value, "actor": f"all-but-{endpoint.grant.value}"}, name
        if endpoint.scoped:
            with server.new_client(tokens.by_actor["scoped"]) as scoped:
                error = error_of(endpoint.call(scoped, n), 403, "branch_out_of_scope")
                assert error["details"]["branch_scope"] == ["elsewhere-*"], (name, error)
        assert stored_state(server.graph) == before, f"{name}: a refused request wrote"
        with server.new_client(tokens.by_actor[f"only-{endpoint.grant.value}"]) as holder:
            done = endpoint.call(holder, n)
        assert done.status_code == endpoint.ok, (name, done.text)


def _head_actor(server: Server) -> str:
    return str(server.client.get("/branches/main/commits").json()["commits"][0]["actor"])


def test_the_commit_actor_is_the_tokens_and_impersonation_needs_its_grant(guarded: tuple[Server, Tokens]) -> None:
    server, tokens = guarded
    with server.new_client(tokens.by_actor["writer"]) as writer:
        done = writer.post("/branches/main/load", params={"mode": "append"}, content=f"{person('ByWriter')}\n".encode(), headers=NDJSON)
        assert done.status_code == 200, done.text
        assert _head_actor(server) == "writer"
        before = stored_state(server.graph)
        claimed = writer.post(
            "/branches/main/load",
            params={"mode": "append"},
            content=f"{person('Claimed')}\n".encode(),
            headers={**NDJSON, "X-Omnigraph-Actor": "root-admin"},
        )
        error = error_of(claimed, 403, "forbidden")
        assert error["details"] == {"grant": "impersonate", "actor": "writer"}
        assert stored_state(server.graph) == before
    with server.new_client(tokens.by_actor["proxy"]) as proxy:
        source = "query put($name: String) { insert Person { name: $name } }"
        acted = proxy.post(
            "/branches/main/mutate", json={"query": source, "params": {"name": "ForAlice"}}, headers={"X-Omnigraph-Actor": "alice"}
        )
        assert acted.status_code == 200, acted.text
        assert _head_actor(server) == "alice"
        error_of(
            proxy.post(
                "/branches/main/mutate",
                json={"query": source, "params": {"name": "Bad"}},
                headers={"X-Omnigraph-Actor": "no spaces allowed"},
            ),
            400,
            "bad_request",
        )
        assert proxy.post("/branches/main/mutate", json={"query": source, "params": {"name": "Itself"}}).status_code == 200
        assert _head_actor(server) == "proxy"


def _serve(*args: str, env: dict[str, str] | None = None) -> Any:
    return run_cli(OMNIGRAPH, "serve", "--port", "1", *args, env=env, timeout=60)


def test_serve_refuses_to_start_open_by_accident(tmp_path: Path) -> None:
    """Each refusal happens before anything listens (port 1 would need root anyway: nothing binds)."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    bare = _serve(uri)
    assert bare.returncode == 2, bare.describe()
    assert "--tokens FILE" in bare.stderr and "--unauthenticated" in bare.stderr and "omnigraph token create" in bare.stderr
    both = _serve("--unauthenticated", "--tokens", str(tmp_path / "t.yaml"), uri)
    assert both.returncode == 2 and "exclude each other" in both.stderr, both.describe()
    for host in ("0.0.0.0", "::", "192.0.2.1", "example.com"):
        remote = _serve("--unauthenticated", "--host", host, uri)
        assert remote.returncode == 2, remote.describe()
        assert "--allow-remote-unauthenticated" in remote.stderr and "not a loopback address" in remote.stderr
        by_env = _serve("--host", host, uri, env={"OMNIGRAPH_UNAUTHENTICATED": "1"})
        assert by_env.returncode == 2 and "--allow-remote-unauthenticated" in by_env.stderr, by_env.describe()


@pytest.mark.parametrize(
    "document, problem",
    [
        ("tokens:\n  - {actor: a, token: og_secret, grants: [read]}\n", "tokens.0.sha256: Field required"),
        ("tokens:\n  - {actor: a, sha256: " + "'" + "0" * 64 + "', grants: [root]}\n", "tokens.0.grants.0"),
        ("tokens:\n  - {actor: a, sha256: " + "'" + "0" * 64 + "', grants: []}\n", "tokens.0.grants"),
        (
            "tokens:\n  - {actor: a, sha256: "
            + "'"
            + "0" * 64
            + "', grants: [read]}\n  - {actor: b, sha256: '"
            + "0" * 64
            + "', grants: [read]}\n",
            "a sha256 is listed twice",
        ),
        ("tokens: []\n", "tokens"),
        ("{not yaml: [", "is not YAML or JSON"),
        ("[" * 100_000, "is not YAML or JSON"),
    ],
)
def test_a_bad_tokens_file_is_refused_naming_it(tmp_path: Path, document: str, problem: str) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    path = tmp_path / "tokens.yaml"
    path.write_text(document, encoding="utf-8")
    refused = _serve("--tokens", str(path), uri)
    assert refused.returncode == 1, refused.describe()
    assert "[bad_request]" in refused.stderr and str(path) in refused.stderr and problem in refused.stderr, refused.stderr
    missing = _serve("--tokens", str(tmp_path / "absent.yaml"), uri)
    assert missing.returncode == 1 and "cannot read the tokens file" in missing.stderr, missing.describe()


def test_token_create_prints_a_token_its_entry_admits(tmp_path: Path) -> None:
    human = invoke(OMNIGRAPH, "token", "create", "--actor", "ci-loader", "--grant", "write", "--grant", "read").ok()
    lines = human.stdout.splitlines()
    token = lines[0].removeprefix("token: ")
    entry = json.loads(lines[2].strip().removeprefix("- "))
    assert entry == {"actor": "ci-loader", "sha256": hashlib.sha256(token.encode()).hexdigest(), "grants": ["read", "write"]}
    assert "only this once" in human.stderr and token not in human.stderr
    document = invoke(OMNIGRAPH, "token", "create", "--actor", "reader", "--grant", "read", "--json").ok().json()
    assert set(document) == {"token", "entry"} and document["entry"]["sha256"] == hashlib.sha256(document["token"].encode()).hexdigest()
    assert document["token"] != token
    assert invoke(OMNIGRAPH, "token", "create", "--actor", "x", "--grant", "root").returncode == 2
    assert invoke(OMNIGRAPH, "token", "create", "--actor", "two words", "--grant", "read").returncode == 2

    uri = str(tmp_path / "g")
    make_example_graph(uri)
    tokens = tmp_path / "tokens.json"  # JSON is read as well as YAML
    tokens.write_text(json.dumps({"tokens": [entry, document["entry"]]}), encoding="utf-8")
    server = start_fenced(uri, tokens=tokens, token=token)
    try:
        assert server.load([person("FromCi")]).status_code == 200
        assert server.client.get("/branches/main/commits").json()["commits"][0]["actor"] == "ci-loader"
        with server.new_client(document["token"]) as reader:
            assert reader.get("/branches").status_code == 200
            error_of(reader.post("/branches", json={"name": "no"}), 403, "forbidden")
    finally:
        server.stop()


def test_unauthenticated_is_explicit_and_warned(tmp_path: Path) -> None:
    """``OMNIGRAPH_UNAUTHENTICATED=1`` (or the flag) serves everyone with every grant, after a
    warning line; the actor header is honoured there, and the default actor is ``http``."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri)
    try:
        assert "warning: serving without authentication" in server.output()
        assert server.load([person("Anyone")]).status_code == 200
        assert _head_actor(server) == "http"
        named = server.client.post(
            "/branches/main/load",
            params={"mode": "append"},
            content=f"{person('Named')}\n".encode(),
            headers={**NDJSON, "X-Omnigraph-Actor": "ops"},
        )
        assert named.status_code == 200 and _head_actor(server) == "ops", named.text
    finally:
        server.stop()
    tokens = write_tokens(tmp_path, {"env-reader": [Grant.READ]})
    by_env = run_cli(OMNIGRAPH, "serve", "--port", "1", "--unauthenticated", uri, env={"OMNIGRAPH_TOKENS_FILE": str(tokens.path)})
    assert by_env.returncode == 2 and "exclude each other" in by_env.stderr, by_env.describe()


def test_tokens_on_a_plain_http_remote_bind_warn(tmp_path: Path) -> None:
    """The warning is printed before binding; the bind itself (to a documentation address that is
    on no interface here) then fails, so nothing ever listens beyond loopback."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    tokens = write_tokens(tmp_path, {"a": [Grant.READ]})
    result = _serve("--tokens", str(tokens.path), "--host", "192.0.2.1", uri)
    assert "warning: plain HTTP on 192.0.2.1" in result.stderr and "reverse proxy" in result.stderr, result.describe()
    assert result.returncode != 0


def test_yaml_written_by_hand_is_read(tmp_path: Path) -> None:
    token = "og_hand-made-token"
    path = tmp_path / "tokens.yaml"
    path.write_text(
        yaml.safe_dump({"tokens": [{"actor": "hand", "sha256": hashlib.sha256(token.encode()).hexdigest(), "grants": ["read", "export"]}]}),
        encoding="utf-8",
    )
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri, tokens=path, token=token)
    try:
        assert server.client.get("/branches/main/export").status_code == 200
        error_of(server.load([person("Nope")]), 403, "forbidden")
    finally:
        server.stop()


def test_branch_scopes_and_protected_branches(tmp_path: Path) -> None:
    """``feature-*`` cannot write ``main``; a protected branch takes no load, mutate or delete and
    changes only by a merge (``merge`` grant); creating a protected name needs ``merge`` too."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    tokens = write_tokens(
        tmp_path,
        {
            "feature-bot": [Grant.READ, Grant.WRITE, Grant.BRANCH],
            "writer": [Grant.READ, Grant.WRITE, Grant.BRANCH],
            "integrator": [Grant.READ, Grant.BRANCH, Grant.MERGE],
            "scoped-admin": [Grant.ADMIN],
        },
        scopes={"feature-bot": ["feature-*"], "scoped-admin": "unprotected"},
        protected_branches=["main", "release-*"],
    )
    server = start_fenced(uri, tokens=tokens.path, token=tokens.by_actor["writer"])
    bot, writer = server.new_client(tokens.by_actor["feature-bot"]), server.client
    integrator, admin = server.new_client(tokens.by_actor["integrator"]), server.new_client(tokens.by_actor["scoped-admin"])
    mutate = {"query": 'query q() { insert Person { name: "Direct" } }'}
    try:
        assert bot.post("/branches", json={"name": "feature-a"}).status_code == 201
        assert (
            bot.post(
                "/branches/feature-a/load", params={"mode": "append"}, content=f"{person('Feat')}\n".encode(), headers=NDJSON
            ).status_code
            == 200
        )
        assert writer.post("/branches", json={"name": "staging"}).status_code == 201
        before = stored_state(uri)
        out = error_of(
            bot.post("/branches/main/load", params={"mode": "append"}, content=f"{person('Sneak')}\n".encode(), headers=NDJSON),
            403,
            "branch_out_of_scope",
        )
        assert out["details"] == {"actor": "feature-bot", "branch": "main", "branch_scope": ["feature-*"]}, out
        assert "branch_scope" in out["message"] and "'main'" in out["message"]
        error_of(bot.post("/branches/main/mutate", json=mutate), 403, "branch_out_of_scope")
        error_of(bot.post("/branches", json={"name": "hotfix-1"}), 403, "branch_out_of_scope")
        error_of(bot.delete("/branches/staging"), 403, "branch_out_of_scope")
        for refused in (
            writer.post("/branches/main/load", params={"mode": "append"}, content=f"{person('Direct')}\n".encode(), headers=NDJSON),
            writer.post("/branches/main/mutate", json=mutate),
            writer.post("/branches", json={"name": "release-1"}),
        ):
            error = error_of(refused, 403, "branch_protected")
            assert error["details"]["protected_branches"] == ["main", "release-*"], error
        assert "merge" in error["message"]
        error_of(admin.post("/schema/apply", json={"schema": SCHEMA_PATH.read_text(encoding="utf-8")}), 403, "branch_out_of_scope")
        assert stored_state(uri) == before, "a refused write wrote"
        merged = integrator.post("/branches/feature-a/merge", json={"into": "main"})
        assert merged.status_code == 200, merged.text
        assert '"Feat"' in export_text(uri, types=["Person"])
        assert integrator.post("/branches", json={"name": "release-1"}).status_code == 201
        error_of(writer.delete("/branches/release-1"), 403, "branch_protected")
        assert writer.delete("/branches/staging").status_code == 200
    finally:
        for client in (bot, integrator, admin):
            client.close()
        server.stop()


@pytest.mark.parametrize(
    "document, problem",
    [
        ({"branch_scope": ["feature/*"]}, "branch names have no '/': write 'feature-*'"),
        ({"branch_scope": []}, "an empty branch_scope lets the token write no branch"),
        ({"branch_scope": "protected"}, "add protected_branches: [PATTERN, ...] at the top of the file"),
        ({"branch_scope": "everything"}, "tokens.0.branch_scope"),
    ],
)
def test_a_bad_scope_in_the_tokens_file_is_refused_naming_the_fix(tmp_path: Path, document: dict[str, Any], problem: str) -> None:
    from omnigraph.errors import BadRequest
    from omnigraph.server.tokens import read_tokens_file

    path = tmp_path / "tokens.yaml"
    entry = {"actor": "a", "sha256": "0" * 64, "grants": ["write"], **document}
    path.write_text(yaml.safe_dump({"tokens": [entry]}), encoding="utf-8")
    with pytest.raises(BadRequest) as refused:
        read_tokens_file(path)
    assert problem in str(refused.value) and str(path) in str(refused.value), str(refused.value)
    path.write_text(yaml.safe_dump({"protected_branches": ["main/x"], "tokens": [{**entry, "branch_scope": "any"}]}), encoding="utf-8")
    with pytest.raises(BadRequest, match=r"protected_branches\.0"):
        read_tokens_file(path)


def test_token_create_takes_a_branch_scope() -> None:
    scoped = invoke(OMNIGRAPH, "token", "create", "--actor", "bot", "--grant", "write", "--branch-scope", "feature-*", "--json").ok().json()
    assert scoped["entry"]["branch_scope"] == ["feature-*"]
    kind = invoke(OMNIGRAPH, "token", "create", "--actor", "bot", "--grant", "write", "--branch-scope", "unprotected", "--json").ok().json()
    assert kind["entry"]["branch_scope"] == "unprotected"
    refused = invoke(OMNIGRAPH, "token", "create", "--actor", "bot", "--grant", "write", "--branch-scope", "feature/*")
    assert refused.returncode == 2 and "write 'feature-*'" in refused.stderr, refused.stderr
