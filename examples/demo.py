"""The omnigraph-fence demo: a format-4 graph, its duplicate race, the upgrade, one winner.

Run it with ``make demo`` (or ``.venv/bin/python -m examples.demo [--workdir DIR]``). It drives
only the real console scripts (``omnigraph-v4``, ``omnigraph-migrate``, ``omnigraph``, found next
to ``sys.executable``) as subprocesses, in a fresh work directory (default ``./demo-out``):

1. builds a format-4 graph from ``examples/`` with ``omnigraph-v4``: ``main``, a branch
   ``feature`` with its own write, and a lazy branch ``lazy`` created before more rows land on main;
2. races N ``omnigraph-v4`` processes strict-inserting the same new Person on a scratch branch and
   counts the rows with that id (format 4 lets duplicates in); when every round happens to
   serialize, it makes the interleaving on purpose: one writer held after arming its intent
   (failpoint ``write.after_arm:stop``) while another inserts the same id;
3. shows that the duplicate would stop the migration (``omnigraph-migrate duplicates``, exit 4),
   then deletes the scratch branch, which is the only place the duplicate lives;
4. prints what ``main`` and ``lazy`` pin before the upgrade (``omnigraph snapshot --json``,
   read-only, works at format 4);
5. runs the upgrade playbook non-interactively, with a JSON report and JUnit XML and the answer
   check (``--queries examples/social.gq``: every read query answered on every branch before the
   first primary key and again before the stamp), and checks that a traversal and an aggregate
   (``omnigraph query``) answer the same before and after it;
6. races N ``omnigraph`` processes strict-inserting one new id on ``main`` and on ``lazy``: one
   winner each, the others get ``key_conflict``, one row each;
7. prints the snapshots after the upgrade and checks the old binary now refuses the graph;
8. inserts a Person on a new branch ``review`` with a ``.gq`` mutation (``omnigraph mutate``) and
   merges ``review`` into ``main`` (``omnigraph branch merge``);
9. ends with ``omnigraph check`` over every branch.

Racing processes import everything first, report ready on a shared pipe, and block on a second
pipe; the demo releases them all at once when every one is ready (the idea of
``tests/process_race.py``, with a readiness barrier instead of a start time). Each one then runs
the console script file itself.

Exit status: 0 if every expectation held, 1 otherwise (each failed expectation is listed), 2 for
a work directory the demo refuses to wipe.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnigraph.engine.failpoints import run_held

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
UPGRADE_PLAYBOOK = REPO / "playbooks" / "upgrade.yaml"
BIN = Path(sys.executable).parent
MARKER = ".omnigraph-demo"
WRITERS = 8
V4_ROUNDS = 3

# Runs a console script file after a readiness barrier. argv: script ready_fd go_fd args...
# The script's own import lines run first (so every writer has paid its start-up cost), then the
# process reports ready and blocks until the demo releases everyone with one write.
LAUNCHER = r"""
import os, runpy, sys
script, ready_fd, go_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(script, encoding="utf-8") as source:
    for line in source:
        if line.startswith(("import ", "from ")):
            exec(line)
os.write(ready_fd, b"r")
os.close(ready_fd)
os.read(go_fd, 1)
os.close(go_fd)
sys.argv = [script, *sys.argv[4:]]
runpy.run_path(script, run_name="__main__")
"""


class Abort(Exception):
    """A step failed in a way that makes the rest of the demo meaningless."""


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str

    def document(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None

    @property
    def error_code(self) -> str | None:
        doc = self.document()
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            return doc["error"].get("code")
        return None


@dataclass
class Demo:
    workdir: Path
    writers: int
    checks: list[tuple[bool, str]] = field(default_factory=list)

    # --- output -----------------------------------------------------------------------------

    @staticmethod
    def show(path: Path | str) -> str:
        """A path as the reader would type it: relative to the current directory when inside it."""
        text = str(path)
        try:
            relative = os.path.relpath(text)
        except ValueError:
            return text
        return text if relative.startswith("..") else relative

    @staticmethod
    def heading(title: str) -> None:
        print(f"\n== {title} ==", flush=True)

    @staticmethod
    def note(text: str) -> None:
        print(f"   {text}", flush=True)

    def expect(self, ok: bool, what: str) -> bool:
        self.checks.append((ok, what))
        print(f"   [{'ok' if ok else 'FAILED'}] {what}", flush=True)
        return ok

    # --- running the console scripts ---------------------------------------------------------

    @staticmethod
    def env() -> dict[str, str]:
        env = dict(os.environ)
        env.pop("OMNIGRAPH_FAILPOINTS", None)
        env["OMNIGRAPH_ACTOR"] = "demo"
        return env

    def command_line(self, program: str, args: list[str]) -> str:
        return " ".join([program, *(self.show(a) if os.path.isabs(a) else a for a in args)])

    def run(self, program: str, *args: str, expect: int | None = 0, quiet: bool = False) -> Outcome:
        """Run one console script; print the command and its last human line; check its exit code.

        An exit code other than ``expect`` stops the demo; ``expect=None`` leaves the check to the caller.
        """
        argv = [str(BIN / program), *args]
        print(f"   $ {self.command_line(program, list(args))}", flush=True)
        done = subprocess.run(argv, check=False, capture_output=True, text=True, env=self.env(), timeout=300)
        outcome = Outcome(done.returncode, done.stdout, done.stderr)
        shown = done.stdout if done.returncode == 0 and not done.stdout.lstrip().startswith("{") else done.stderr
        lines = [line for line in shown.splitlines() if line.strip()]
        if lines and not quiet:
            print(f"     {lines[-1]}", flush=True)
        if expect is not None and done.returncode != expect:
            tail = "\n".join(lines[-15:])
            raise Abort(f"`{program} {' '.join(args)}` exited {done.returncode}, expected {expect}:\n{tail}")
        return outcome

    def race(self, program: str, argv_list: list[list[str]]) -> list[Outcome]:
        """Start one process per argv, wait until all are ready, release them together."""
        script = str(BIN / program)
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, script, str(ready_w), str(go_r), *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env(),
                pass_fds=(ready_w, go_r),
            )
            for argv in argv_list
        ]
        os.close(ready_w)
        os.close(go_r)
        try:
            ready = 0
            deadline = time.monotonic() + 120
            while ready < len(procs):
                readable, _, _ = select.select([ready_r], [], [], max(0.0, deadline - time.monotonic()))
                chunk = os.read(ready_r, 64) if readable else b""
                if not chunk:
                    break  # timeout, or every launcher exited: release whoever is waiting
                ready += len(chunk)
            os.write(go_w, b"g" * len(procs))
        finally:
            os.close(go_w)
            os.close(ready_r)
        outcomes = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            outcomes.append(Outcome(proc.returncode, out, err))
        if ready < len(procs):
            raise Abort(f"only {ready} of {len(procs)} racing processes became ready")
        return outcomes

    def forced_v4_interleaving(self, graph: Path, name: str) -> str | None:
        """The interleaving a format-4 race needs, made on purpose: writer A passes the pin check
        and arms its intent, then is held (failpoint ``write.after_arm:stop``, a stalled process);
        writer B strict-inserts the same id and publishes; A goes on. The id if it landed twice."""
        self.note(f"the writers serialized {V4_ROUNDS} times; making the interleaving a race needs, on purpose:")
        self.note("writer A passes the pin check and arms its intent, then stalls (held at failpoint")
        self.note("write.after_arm); writer B inserts the same id and publishes; then A goes on.")
        args = ["load", "--mode", "append", "--data", str(self.person_file(name, 35)), "--branch", "race-v4", str(graph)]
        print(f"   $ A: {self.command_line('omnigraph-v4', args)}   (held after arming)", flush=True)
        try:
            held, other = run_held(
                [str(BIN / "omnigraph-v4"), *args], "write.after_arm", lambda: self.run("omnigraph-v4", *args, expect=None), env=self.env()
            )
        except ChildProcessError as error:
            raise Abort(f"writer A did not reach its hold: {error}") from None
        succeeded = (other.returncode == 0) + (held.returncode == 0)
        rows = self.count_ids("omnigraph-v4", graph, "race-v4", "Person", name)
        print(f"   format 4: 2 writers, A held, {succeeded} succeeded, {rows} rows with id {name}", flush=True)
        if held.returncode != 0:
            self.note(f"writer A exited {held.returncode}: " + (held.stderr.strip().splitlines() or [""])[-1])
        self.expect(rows == succeeded, f"every writer that succeeded landed a row ({rows} rows, {succeeded} successes)")
        return name if rows > 1 else None

    # --- reading the graph ------------------------------------------------------------------

    def count_ids(self, program: str, graph: Path, branch: str, type_name: str, entity_id: str) -> int:
        out = subprocess.run(
            [str(BIN / program), "export", "--branch", branch, "--type", type_name, str(graph)],
            check=False,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=300,
        )
        if out.returncode != 0:
            raise Abort(f"{program} export --branch {branch} failed ({out.returncode}): {out.stderr.strip()}")
        return sum(1 for line in out.stdout.splitlines() if json.loads(line)["data"].get("id") == entity_id)

    def snapshot(self, program: str, graph: Path, branch: str) -> dict[str, Any]:
        outcome = self.run(program, "snapshot", "--branch", branch, "--json", str(graph), quiet=True)
        return outcome.document()

    def print_snapshot(self, doc: dict[str, Any]) -> None:
        print(f"   branch {doc['branch']}: format {doc['format']}, manifest v{doc['manifest_version']}", flush=True)
        print(f"     {'table':<18} {'pinned image':<16} {'rows':>4}  pk", flush=True)
        for table in doc["tables"]:
            pinned = f"{table['table_branch'] or 'main'}@v{table['version']}"
            print(f"     {table['table_key']:<18} {pinned:<16} {table['rows']:>4}  {json.dumps(table['pk'])}", flush=True)

    # --- the story --------------------------------------------------------------------------

    def answers(self, graph: Path) -> dict[str, Any]:
        """The rows of two read queries of ``examples/social.gq`` on ``main``: a traversal up to
        three hops and a grouped aggregate (``omnigraph query --json``, read-only at any stamp)."""
        found = {}
        for name, params in (("circle", ["--params", '{"name": "Alice"}']), ("employers", [])):
            outcome = self.run(
                "omnigraph", "query", "--query", str(EXAMPLES / "social.gq"), "--name", name, *params, "--json", str(graph), quiet=True
            )
            found[name] = outcome.document()["rows"]
            self.note(f"{name}: {json.dumps(found[name], ensure_ascii=False)}")
        return found

    def person_file(self, name: str, age: int) -> Path:
        path = self.workdir / f"person-{name.lower()}.jsonl"
        path.write_text(json.dumps({"type": "Person", "data": {"name": name, "age": age}}) + "\n", encoding="utf-8")
        return path

    def main(self) -> None:
        graph = self.workdir / "graph"
        n = self.writers

        self.heading("1. A format-4 graph with branches, written by the old binary (omnigraph-v4)")
        self.run("omnigraph-v4", "init", "--schema", str(EXAMPLES / "social.pg"), str(graph))
        self.run("omnigraph-v4", "load", "--mode", "append", "--data", str(EXAMPLES / "social.jsonl"), str(graph))
        self.run("omnigraph-v4", "branch", "create", "feature", str(graph))
        self.run("omnigraph-v4", "load", "--mode", "append", "--data", str(self.person_file("Ivan", 40)), "--branch", "feature", str(graph))
        self.run("omnigraph-v4", "branch", "create", "lazy", str(graph))
        self.run("omnigraph-v4", "load", "--mode", "append", "--data", str(self.person_file("Judy", 22)), str(graph))
        self.note("feature owns its Person table (its own write); lazy still pins main's images from")
        self.note("before Judy landed: nothing of lazy has been copied or forked yet.")

        self.heading(f"2. Format 4 lets a duplicate in: {n} writers strict-insert one new Person")
        self.run("omnigraph-v4", "branch", "create", "race-v4", str(graph))
        duplicated = None
        for round_number, name in enumerate(["Mallory", "Niaj", "Olivia"][:V4_ROUNDS], start=1):
            data = self.person_file(name, 30 + round_number)
            args = ["load", "--mode", "append", "--data", str(data), "--branch", "race-v4", "--json", str(graph)]
            print(f"   $ {n} x {self.command_line('omnigraph-v4', args)}   (released together)", flush=True)
            outcomes = self.race("omnigraph-v4", [args] * n)
            succeeded = sum(1 for o in outcomes if o.returncode == 0)
            unexpected = [o for o in outcomes if o.returncode != 0 and o.error_code != "key_conflict"]
            rows = self.count_ids("omnigraph-v4", graph, "race-v4", "Person", name)
            print(f"   format 4: {n} writers, {succeeded} succeeded, {rows} rows with id {name}", flush=True)
            for outcome in unexpected[:1]:
                # Not part of the story, but not hidden either; deleting the branch below is a
                # read-write open, which resolves any interrupted write first.
                self.note(
                    f"{len(unexpected)} writer(s) failed otherwise, e.g. exit {outcome.returncode}: "
                    + (outcome.stderr.strip().splitlines() or [""])[-1]
                )
            if not self.expect(rows == succeeded, f"every writer that succeeded landed a row ({rows} rows, {succeeded} successes)"):
                break
            if rows > 1:
                duplicated = name
                break
            self.note(f"round {round_number}: the writers happened to serialize; racing again with a new id")
        if duplicated is None and all(ok for ok, _ in self.checks):
            duplicated = self.forced_v4_interleaving(graph, "Oscar")
        if not self.expect(duplicated is not None, "format 4 let the same id in more than once"):
            raise Abort(f"no duplicate after {V4_ROUNDS} rounds of format-4 writers")

        self.note("That duplicate would stop the migration: it validates every image before any primary key.")
        dup = self.run("omnigraph-migrate", "duplicates", str(graph), expect=4)
        for line in dup.stdout.splitlines():
            fields = line.split("\t")
            if len(fields) >= 6:
                print(f"     {fields[0]} {fields[1]} {fields[2]!r}: {fields[3]}, {fields[4]} rows, on branch {fields[5]}", flush=True)
        self.expect(f"\t{duplicated}\tduplicate\t" in dup.stdout, f"the migrator inventories {duplicated} as a duplicate (exit 4)")
        self.note("Here the duplicate lives only on the throwaway branch race-v4, so deleting that branch")
        self.note("removes it. A duplicate on a branch you keep is repaired behind the migration barrier")
        self.note("instead (duplicate-repair playbook, see docs/operations.md).")
        self.run("omnigraph-v4", "branch", "delete", "race-v4", str(graph))

        self.heading("3. Before the upgrade: what main and lazy pin (omnigraph snapshot, read-only)")
        before = {branch: self.snapshot("omnigraph", graph, branch) for branch in ("main", "lazy")}
        for doc in before.values():
            self.print_snapshot(doc)
        self.expect(
            all(doc["format"] == "4" and all(t["pk"] == [] for t in doc["tables"]) for doc in before.values()),
            "format 4, no table has a primary key",
        )
        main_person = next(t for t in before["main"]["tables"] if t["table_key"] == "node:Person")
        lazy_person = next(t for t in before["lazy"]["tables"] if t["table_key"] == "node:Person")
        self.expect(
            all(t["table_branch"] is None for t in before["lazy"]["tables"]) and lazy_person["version"] < main_person["version"],
            "lazy inherits main's tables at older versions (no table branch of its own)",
        )

        answers_before = self.answers(graph)

        self.heading("4. The upgrade: the upgrade playbook, non-interactively")
        report, junit = self.workdir / "upgrade-report.json", self.workdir / "upgrade-junit.xml"
        upgrade = self.run(
            "omnigraph-migrate",
            "playbook",
            "run",
            str(UPGRADE_PLAYBOOK),
            str(graph),
            "--yes",
            "--queries",
            str(EXAMPLES / "social.gq"),
            "--query-params",
            str(EXAMPLES / "social.params.json"),
            "--report",
            str(report),
            "--junit",
            str(junit),
            quiet=True,
        )
        for line in upgrade.stderr.splitlines():
            if line.startswith("[") or line.lstrip().startswith(("ok:", "FAILED", "skipped")):
                print(f"     {line.strip()}", flush=True)
        document = json.loads(report.read_text(encoding="utf-8"))
        self.expect(
            document["ok"] and [s["status"] for s in document["steps"]] == ["ok"] * 6, f"report {self.show(report)}: 6 steps, all ok"
        )
        self.expect('failures="0"' in junit.read_text(encoding="utf-8"), f"JUnit {self.show(junit)}: no failures")
        checked = next(s for s in document["steps"] if s["id"] == "migrate")["data"]["answer_check"]
        self.expect(
            checked and all(case["ok"] for case in checked),
            f"the answer check: {len(checked)} answers (every read query of examples/social.gq on every "
            "branch) recorded before the first primary key and unchanged before the stamp",
        )
        self.expect(
            self.answers(graph) == answers_before, "a traversal and an aggregate (examples/social.gq) answer the same after the upgrade"
        )

        self.heading(f"5. Format 5: {n} writers strict-insert one new id on main and on lazy, at once")
        data = self.person_file("Peggy", 27)
        per_branch = {
            branch: ["load", "--mode", "append", "--data", str(data), "--branch", branch, "--json", str(graph)]
            for branch in ("main", "lazy")
        }
        for args in per_branch.values():
            print(f"   $ {n} x {self.command_line('omnigraph', args)}", flush=True)
        outcomes = self.race("omnigraph", [args for args in per_branch.values() for _ in range(n)])
        for index, branch in enumerate(per_branch):
            mine = outcomes[index * n : (index + 1) * n]
            winners = sum(1 for o in mine if o.returncode == 0)
            conflicts = sum(1 for o in mine if o.returncode == 1 and o.error_code == "key_conflict")
            rows = self.count_ids("omnigraph", graph, branch, "Person", "Peggy")
            print(
                f"   format 5 on {branch}: {n} writers, {winners} succeeded, {conflicts} key_conflict, {rows} row(s) with id Peggy",
                flush=True,
            )
            self.expect(winners == 1 and conflicts == n - 1 and rows == 1, f"{branch}: exactly one winner, {n - 1} key_conflict, one row")
            others = [o for o in mine if o.returncode != 0 and o.error_code != "key_conflict"]
            if others:
                self.note(f"unexpected failure on {branch}: {others[0].stderr.strip()}")
        self.note("This race shows the fence: two inserts of one id can no longer both commit. It does not")
        self.note("make many writer processes a supported setup: crash recovery is safe only with one")
        self.note("writer process per graph (RFC-023 section 10; see docs/operations.md).")

        self.heading("6. After the upgrade: what main and lazy pin")
        after = {branch: self.snapshot("omnigraph", graph, branch) for branch in ("main", "lazy")}
        for doc in after.values():
            self.print_snapshot(doc)
        self.expect(
            all(doc["format"] == "5" and all(t["pk"] == ["id"] for t in doc["tables"]) for doc in after.values()),
            'format 5, every table of both branches has primary key ["id"]',
        )
        self.expect(
            all(t["table_branch"] == "lazy" for t in after["lazy"]["tables"]),
            "every table of lazy is now on its own table branch (forked at the pinned version)",
        )
        refused = self.run("omnigraph-v4", "snapshot", "--json", str(graph), expect=None)
        self.expect(
            refused.returncode == 6 and refused.error_code == "format_refused",
            f"the old binary refuses the upgraded graph (exit {refused.returncode}, {refused.error_code})",
        )

        self.heading("7. Writing after the upgrade: a mutation on a branch, merged into main")
        self.run("omnigraph", "branch", "create", "review", str(graph))
        query = self.workdir / "hire.gq"
        query.write_text("query hire($name: String, $age: I32) {\n  insert Person { name: $name, age: $age }\n}\n", encoding="utf-8")
        mutated = self.run(
            "omnigraph",
            "mutate",
            "--query",
            str(query),
            "--params",
            '{"name": "Victor", "age": 45}',
            "--branch",
            "review",
            "--json",
            str(graph),
        ).document()
        print(
            f"     affected_nodes {mutated['affected_nodes']}, affected_edges {mutated['affected_edges']}, commit {mutated['commit']}",
            flush=True,
        )
        self.expect(
            mutated["affected_nodes"] == 1
            and mutated["affected_edges"] == 0
            and mutated["commit"] is not None
            and self.count_ids("omnigraph", graph, "review", "Person", "Victor") == 1,
            "mutate on review: one node inserted (Victor), one commit",
        )
        merged = self.run("omnigraph", "branch", "merge", "review", "--into", "main", "--json", str(graph)).document()
        print(f"     outcome {merged['outcome']}, commit {merged['commit']}, changes {json.dumps(merged['changes'])}", flush=True)
        self.expect(
            merged["outcome"] == "fast_forward"
            and merged["changes"] == {"node:Person": {"deleted": 0, "inserted": 1, "updated": 0}}
            and self.count_ids("omnigraph", graph, "main", "Person", "Victor") == 1,
            "branch merge review -> main: a fast-forward commit that brings exactly Victor",
        )
        checked = self.run("omnigraph", "check", str(graph), expect=None)
        self.expect(checked.returncode == 0, "`omnigraph check`: every branch clean (pins, heads, intents, stamp, ids, edges)")


def prepare_workdir(path: Path) -> None:
    """Wipe ``path`` if it is empty or a previous demo's output; refuse anything else."""
    if path.exists():
        if not path.is_dir():
            raise SystemExit(f"demo: {path} exists and is not a directory")
        if any(path.iterdir()) and not (path / MARKER).exists():
            print(f"demo: refusing to wipe {path}: it is not empty and was not made by the demo", file=sys.stderr)
            raise SystemExit(2)
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / MARKER).write_text("made by `python -m examples.demo`; wiped by the next run\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workdir", type=Path, default=Path("demo-out"), help="fresh work directory, wiped at the start (default: ./demo-out)"
    )
    parser.add_argument("--writers", type=int, default=WRITERS, help="racing processes per race (default: 8)")
    options = parser.parse_args(argv)
    if options.writers < 2:
        parser.error("--writers must be at least 2")
    for program in ("omnigraph", "omnigraph-v4", "omnigraph-migrate"):
        if not (BIN / program).exists():
            print(f"demo: {BIN / program} not found; install the project (`make demo` does)", file=sys.stderr)
            return 1
    workdir = options.workdir.absolute()
    prepare_workdir(workdir)
    started = time.monotonic()
    demo = Demo(workdir, options.writers)
    print(f"omnigraph-fence demo: format 4 -> key-conflict fencing (format 5); work directory {Demo.show(workdir)}")
    aborted = None
    try:
        demo.main()
    except Abort as error:
        aborted = str(error)
    failed = [what for ok, what in demo.checks if not ok]
    elapsed = time.monotonic() - started
    Demo.heading("Result")
    if aborted:
        print(f"   demo stopped: {aborted}")
    if failed or aborted:
        for what in failed:
            print(f"   FAILED: {what}")
        print(f"   demo FAILED ({len(failed)} of {len(demo.checks)} expectation(s) failed) in {elapsed:.1f}s")
        return 1
    print(f"   all {len(demo.checks)} expectations held in {elapsed:.1f}s; graph, report and JUnit XML in {Demo.show(workdir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
