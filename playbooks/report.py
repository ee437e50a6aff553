"""The JSON report and JUnit XML of a playbook run (one test case per step)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from omnigraph.engine.errors import OmnigraphError
from omnigraph.playbooks.runner import RunReport


def write_json(report: RunReport, path: Path) -> None:
    """Write the run's JSON report to ``path`` (sorted keys, indented, final newline)."""
    path.write_text(json.dumps(report.to_json(), sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _answer_cases(step_data: dict[str, object]) -> list[dict[str, object]]:
    """The answer check's cases a step reported (``answer_check``: one per query and branch)."""
    cases = step_data.get("answer_check")
    return cases if isinstance(cases, list) else []


def junit_xml(report: RunReport, planned_steps: list[tuple[str, str]]) -> bytes:
    """The run as JUnit XML: one test case per planned step and per answer an answer check took.

    Steps never reached are skipped; an answer's case is named by its query and branch. The suite's
    ``outage_seconds`` property is how long the migration's barrier held writers off.
    """
    reached = {step.id: step for step in report.steps}
    answer_cases = [(step.id, case) for step in report.steps for case in _answer_cases(step.data)]
    suite = ET.Element(
        "testsuite",
        name=f"playbook {report.playbook}",
        tests=str(len(planned_steps) + len(answer_cases)),
        failures=str(sum(1 for s in report.steps if s.status == "failed") + sum(1 for _, c in answer_cases if not c["ok"])),
        skipped=str(len(planned_steps) - sum(1 for s in report.steps if s.status != "skipped")),
        time=f"{report.finished_at - report.started_at:.3f}",
    )
    if report.outage_seconds is not None:
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="outage_seconds", value=f"{report.outage_seconds:.3f}")
    for step_id, title in planned_steps:
        step = reached.get(step_id)
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"playbook.{report.playbook}",
            name=f"{step_id}: {title}",
            time=f"{step.duration_seconds:.3f}" if step else "0.000",
        )
        if step is None:
            ET.SubElement(case, "skipped", message="not reached: an earlier step failed")
        elif step.status == "failed":
            failure = ET.SubElement(case, "failure", message=step.summary)
            failure.text = f"next: {step.next_command}"
        elif step.status == "skipped":
            ET.SubElement(case, "skipped", message=step.summary)
        else:
            ET.SubElement(case, "system-out").text = step.summary
    for step_id, answer in answer_cases:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"playbook.{report.playbook}.answers",
            name=f"{step_id}: query {answer['query']} on {answer['graph_branch']}",
            time="0.000",
        )
        if answer["ok"]:
            ET.SubElement(case, "system-out").text = str(answer["message"])
        else:
            ET.SubElement(case, "failure", message=str(answer["message"]))
    document: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return document


def write_junit(report: RunReport, planned_steps: list[tuple[str, str]], path: Path) -> None:
    """Write the run's JUnit XML (:func:`junit_xml`) to ``path``."""
    path.write_bytes(junit_xml(report, planned_steps))


def refusal_documents(playbook: str, uri: str, error: OmnigraphError) -> tuple[dict[str, object], bytes]:
    """Report and JUnit XML for a playbook refused before any step ran (invalid file or --var)."""
    report = {
        "playbook": playbook,
        "graph": uri,
        "ok": False,
        "exit_code": error.exit_code,
        "steps": [],
        "error": error.to_json()["error"],
    }
    suite = ET.Element("testsuite", name=f"playbook {playbook}", tests="1", failures="1", skipped="0", time="0.000")
    case = ET.SubElement(
        suite, "testcase", classname=f"playbook.{Path(playbook).stem}", name="load: Read and check the playbook", time="0.000"
    )
    ET.SubElement(case, "failure", message=error.message).text = f"[{error.code}] {error.message}"
    return report, ET.tostring(suite, encoding="utf-8", xml_declaration=True)
