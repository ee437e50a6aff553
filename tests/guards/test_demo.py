"""The demo (``make demo``) runs end to end and tells the story it promises."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "examples.demo", *args],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_demo_runs_and_shows_one_winner_after_the_upgrade(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    done = _demo("--workdir", str(workdir))
    output = done.stdout
    assert done.returncode == 0, output + done.stderr

    # Format 4: the race (or, if every round serialized, the interleaving it needs, made on
    # purpose) lets the same id in more than once.
    rounds = re.findall(r"format 4: (8 writers|2 writers, A held), (\d) succeeded, (\d) rows with id (\w+)", output)
    assert rounds, output
    assert int(rounds[-1][2]) > 1 and all(int(rows) == 1 for _, _, rows, _ in rounds[:-1]), output
    assert "[ok] format 4 let the same id in more than once" in output

    # The upgrade playbook ran all six steps, with a report and JUnit XML.
    assert "ok: migrated 24 unit(s) over 10 image(s); stamp 5" in output
    report = json.loads((workdir / "upgrade-report.json").read_text())
    assert report["ok"] is True and len(report["steps"]) == 6
    assert 'failures="0"' in (workdir / "upgrade-junit.xml").read_text()
    assert "[ok] a traversal and an aggregate (examples/social.gq) answer the same after the upgrade" in output
    assert 'circle: [{"f.name": "Bob", "employer": "Acme"}' in output  # keys in column order

    # Format 5: one winner on main and on the lazy branch.
    for branch in ("main", "lazy"):
        assert f"format 5 on {branch}: 8 writers, 1 succeeded, 7 key_conflict, 1 row(s) with id Peggy" in output
        assert f"[ok] {branch}: exactly one winner, 7 key_conflict, one row" in output
    assert '[ok] format 5, every table of both branches has primary key ["id"]' in output
    assert "[ok] mutate on review: one node inserted (Victor), one commit" in output
    assert "[ok] branch merge review -> main: a fast-forward commit that brings exactly Victor" in output
    assert "[ok] `omnigraph check`: every branch clean" in output
    assert "FAILED" not in output
    assert re.search(r"all \d+ expectations held", output), output


def test_demo_refuses_to_wipe_a_directory_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me\n")
    done = _demo("--workdir", str(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refusing to wipe" in done.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me\n"
