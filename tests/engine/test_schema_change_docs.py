"""The schema-change sections of the docs run as written: ``docs/schema.md`` section 14 (the
worked example) and ``docs/operations.md`` section 14 (the crash rehearsal).

Every ```console block of a section is a session a reader can type, in order, in one empty
directory. ``$ cat FILE`` followed by lines is a file the reader writes (the test writes it);
``$ omnigraph ...`` runs in this process, through the same click command as the console script,
its stdout and stderr interleaved as a terminal shows them; any other command runs in ``bash``
(so does ``OMNIGRAPH_FAILPOINTS=... omnigraph ...``: a failpoint ends its process). The lines
after a command are what it must print now, exactly, but for what differs from run to run:
commit ids (ULIDs, mapped from the page's to the real ones, so that a later ``--at 01M...``
reads the real commit), commit times, and text the page shortens with ``...``. The graph the page names (``/tmp/people``,
``/tmp/scratch/people``) lives in the test's temporary directory. ``; echo "exit $?"`` adds the
exit line; without it the command must succeed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from omnigraph.cli.omnigraph import cli as omnigraph_cli

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PAGE = ROOT / "docs" / "schema.md"
SCHEMA_HEADING = "## 14. Changing the schema"
OPERATIONS_PAGE = ROOT / "docs" / "operations.md"
OPERATIONS_HEADING = "## 14. Schema changes"
ACTOR = "alice"
CONSOLE = re.compile(r"^```console\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
COMMIT_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ")
VARIABLE = re.compile(f"(?P<ulid>{ULID.pattern})|(?P<time>{COMMIT_TIME.pattern})|(?P<elided>\\.\\.\\.)")
ECHO_EXIT = '; echo "exit $?"'


@dataclass(frozen=True)
class Step:
    """One ``$ command`` of a console block and the lines shown after it."""

    command: str
    shown: tuple[str, ...]


def section(text: str, heading: str) -> str:
    """The text of the section whose heading starts with ``heading``, up to the next section."""
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def console_steps(text: str) -> list[Step]:
    """Every command of every ```console block of ``text``, in order, with its shown output."""
    steps: list[Step] = []
    for block in CONSOLE.findall(text):
        command: str | None = None
        shown: list[str] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                if command is not None:
                    steps.append(Step(command, tuple(shown)))
                command, shown = line[2:], []
            else:
                assert command is not None, f"output before any command in a console block: {line!r}"
                shown.append(line)
        if command is not None:
            steps.append(Step(command, tuple(shown)))
    return steps


def line_pattern(page_line: str) -> str:
    """A regex matching what ``page_line`` shows: any commit id there (captured), any commit time, and
    any text where the page shortens it with ``...``."""
    parts, end = [], 0
    for found in VARIABLE.finditer(page_line):
        parts.append(re.escape(page_line[end : found.start()]))
        parts.append(f"({ULID.pattern})" if found.group("ulid") else COMMIT_TIME.pattern if found.group("time") else ".*")
        end = found.end()
    return "".join([*parts, re.escape(page_line[end:])])


class Session:
    """Runs a page's commands in ``workdir``, with the graph the page calls ``page_graph`` in it."""

    def __init__(self, workdir: Path, page_graph: str) -> None:
        self.workdir = workdir
        self.page_graph = page_graph
        self.graph = str(workdir / Path(page_graph).name)
        self.commits: dict[str, str] = {}  # the page's commit id -> this run's

    def run(self, step: Step) -> None:
        command = step.command
        if command.startswith("cat "):
            (self.workdir / command.removeprefix("cat ")).write_text("".join(line + "\n" for line in step.shown), encoding="utf-8")
            return
        expect_exit = command.endswith(ECHO_EXIT)
        command = ULID.sub(lambda match: self.commits.get(match.group(0), match.group(0)), command.removesuffix(ECHO_EXIT))
        if command.startswith("omnigraph "):
            code, output = self._omnigraph(command)
        else:
            code, output = self._bash(command)
        lines = output.replace(self.graph, self.page_graph).splitlines()
        if expect_exit:
            lines.append(f"exit {code}")
        else:
            assert code == 0, f"`{step.command}` exited {code}:\n{output}"
        self._compare(step, lines)

    def _omnigraph(self, command: str) -> tuple[int, str]:
        argv = [self.graph if arg == self.page_graph else arg for arg in shlex.split(command)[1:]]
        result = CliRunner().invoke(
            omnigraph_cli,
            argv,
            env={"OMNIGRAPH_ACTOR": ACTOR, "OMNIGRAPH_FAILPOINTS": None},
            catch_exceptions=False,
            prog_name="omnigraph",
        )
        return result.exit_code, result.output

    def _bash(self, command: str) -> tuple[int, str]:
        env = {**os.environ, "OMNIGRAPH_ACTOR": ACTOR, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        completed = subprocess.run(
            ["bash", "-c", command.replace(self.page_graph, self.graph)],
            cwd=self.workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return completed.returncode, completed.stdout + completed.stderr

    def _compare(self, step: Step, lines: list[str]) -> None:
        shown = list(step.shown)
        printed = "\n".join(lines)
        assert len(lines) == len(shown), f"`{step.command}` printed {len(lines)} line(s), the page shows {len(shown)}:\n{printed}"
        for page_line, line in zip(shown, lines, strict=True):
            match = re.fullmatch(line_pattern(page_line), line)
            assert match is not None, f"`{step.command}` printed\n  {line}\nwhere the page shows\n  {page_line}\n(whole output:\n{printed})"
            for page_id, real_id in zip(ULID.findall(page_line), match.groups(), strict=True):
                assert self.commits.setdefault(page_id, real_id) == real_id, f"the page's commit {page_id} stands for two commits"


def run_page(steps: list[Step], workdir: Path, page_graph: str) -> Session:
    session = Session(workdir, page_graph)
    for step in steps:
        session.run(step)
    return session


def test_the_schema_change_section_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = console_steps(section(SCHEMA_PAGE.read_text(encoding="utf-8"), SCHEMA_HEADING))
    commands = [step.command for step in steps]
    # The walk-through the section promises: a plan, a refused and an accepted apply, a no-op
    # apply, a constraint refused by existing rows, a refused change, and time travel.
    for expected in ("omnigraph schema plan ", "omnigraph schema apply ", "--allow-data-loss", "omnigraph query ", "omnigraph export --at"):
        assert any(expected in command for command in commands), expected
    assert sum(command.startswith("omnigraph") for command in commands) >= 15
    monkeypatch.chdir(tmp_path)
    session = run_page(steps, tmp_path, "/tmp/people")
    assert session.commits, "the page's commit ids were never matched"


def test_the_schema_change_crash_rehearsal_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = console_steps(section(OPERATIONS_PAGE.read_text(encoding="utf-8"), OPERATIONS_HEADING))
    commands = [step.command for step in steps]
    assert any(command.startswith("OMNIGRAPH_FAILPOINTS=schema.") for command in commands)
    assert "omnigraph recover /tmp/scratch/people" in commands
    monkeypatch.chdir(tmp_path)
    run_page(steps, tmp_path, "/tmp/scratch/people")


def test_the_sections_are_listed() -> None:
    text = SCHEMA_PAGE.read_text(encoding="utf-8")
    assert "14. [Changing the schema](#14-changing-the-schema)" in text
    assert "15. [Grammar](#15-grammar)" in text and "## 15. Grammar" in text
    assert "`@default(value)`" in text
    operations = OPERATIONS_PAGE.read_text(encoding="utf-8")
    assert "14. schema changes" in operations
    failpoints = section(operations, "## 9. Failpoints")
    for name in ("schema.before_accept", "schema.after_accept", "schema.after_branch", "write.after_evolve_step"):
        assert f"`{name}`" in failpoints, name
    findings = section(operations, "## 11. Integrity check")
    for kind in ("table_schema_mismatch", "schema_behind", "schema_change_pending"):
        assert f"| `{kind}` |" in findings, kind
