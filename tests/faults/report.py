"""Write the fault campaign's table into ``docs/reference/faults.md``.

``python -m tests.faults.report RESULTS_DIR DOC``: reads the outcomes the campaign's tests
appended to ``RESULTS_DIR/*.jsonl`` and replaces the region of ``DOC`` between
:data:`BEGIN` and :data:`END` with the tables: per story, each faulted call of the step with the
hooks the charm took to converge after a cut and after a kill there; per story run on
PostgreSQL, each call at which the server was restarted, with what GARM answered it and the
hooks; then the faults of a whole step. ``tox -e faults`` runs it after the campaign passed.

The columns that do not depend on GARM's own clock (the calls, their shapes, GARM's answer with
its database down, the faults of a whole step) are compared with the committed document before
it is rewritten: when they differ the document was stale, and the command says so and fails
(the rewritten document is left to commit). The hook counts are not compared: after a kill,
GARM's restarted workers race the charm, so a count can differ from one run to the next.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.faults.stories import STORIES
from tests.local_parts import GARM

BEGIN = "<!-- faults-table:begin (written by tox -e faults) -->"
END = "<!-- faults-table:end -->"
WHOLE_STEP = {"late": "GARM answers every call 1 s late", "pod": "pod replaced"}
PER_CALL = ("cut", "kill")
DB_RESTART = "db-restart"
_HOOKS_HEADER = re.compile(r"hooks")
_UNFAULTED_HOOKS = re.compile(r"then \d+ hook")


def _hooks(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not run"
    return "no convergence" if row["hooks"] is None else str(row["hooks"])


def tables(rows: list[dict[str, Any]]) -> str:
    """The Markdown of the tables, from the outcome rows."""
    by_story: dict[str, dict[tuple[str, int | None], dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        by_story[row["story"]][(row["fault"], row["call"])] = row
    out: list[str] = []
    for story in STORIES:
        cases = by_story.get(story.key) or {}
        per_call = {k: v for k, v in cases.items() if k[0] in PER_CALL}
        if per_call:
            out += _head(f"({story.key}) {story.title}", per_call)
            out += [
                "| call | what the charm asked GARM | cut: hooks | kill: hooks |",
                "|---:|---|---:|---:|",
            ]
            for call, shape in _calls(per_call):
                out.append(
                    f"| {call} | `{shape}` | {_hooks(per_call.get(('cut', call)))} "
                    f"| {_hooks(per_call.get(('kill', call)))} |"
                )
            out.append("")
    for story in STORIES:
        restarts = {k: v for k, v in (by_story.get(story.key) or {}).items() if k[0] == DB_RESTART}
        if restarts:
            out += _head(
                f"({story.key}) {story.title}, GARM on PostgreSQL: the server restarted", restarts
            )
            out += [
                "| call | what the charm asked GARM | GARM's answer, its database down | hooks |",
                "|---:|---|---|---:|",
            ]
            for call, shape in _calls(restarts):
                row = restarts[(DB_RESTART, call)]
                out.append(f"| {call} | `{shape}` | {row['answer']} | {_hooks(row)} |")
            out.append("")
    whole = [row for row in rows if row["fault"] in WHOLE_STEP]
    if whole:
        out += [
            "### Faults of a whole step",
            "",
            "| fault | story | hooks to converge |",
            "|---|---|---:|",
        ]
        titles = {s.key: f"({s.key}) {s.title}" for s in STORIES}
        for row in sorted(whole, key=lambda r: (r["fault"], r["story"])):
            out.append(f"| {WHOLE_STEP[row['fault']]} | {titles[row['story']]} | {_hooks(row)} |")
        out.append("")
    return "\n".join(out)


def _head(title: str, cases: dict[tuple[str, int | None], dict[str, Any]]) -> list[str]:
    """A table's heading and the unfaulted step it faulted."""
    ref = next(iter(cases.values()))["reference"]
    calls = sorted({call for _, call in cases if call is not None})
    return [
        f"### {title}",
        "",
        f"Unfaulted: {len(ref['calls'])} calls in the step, then {ref['hooks']} hook(s) "
        f"to converge. Faulted: calls {_ranges(calls)}.",
        "",
    ]


def _calls(cases: dict[tuple[str, int | None], dict[str, Any]]) -> list[tuple[int, str]]:
    """The faulted calls of a table, each with its shape in the unfaulted step."""
    ref = next(iter(cases.values()))["reference"]
    calls = sorted({call for _, call in cases if call is not None})
    return [(call, ref["calls"][call - 1]) for call in calls]


def stable(region: str) -> list[str]:
    """The lines of the tables without what depends on timing: hook counts and call order.

    GARM's clock decides the hook counts; a concurrent pass interleaves its objects' calls, so
    a call's number in the step may differ from run to run while the calls and their answers do
    not. The lines come back sorted, each row without its call number.
    """
    kept: list[str] = []
    hooks: set[int] = set()
    for line in region.splitlines():
        if not line.startswith("|"):
            if line.strip():
                kept.append(_UNFAULTED_HOOKS.sub("then N hook", line))
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(line) <= set("|-: "):
            continue
        if any(_HOOKS_HEADER.search(c) for c in cells) and not cells[0].isdigit():
            hooks = {i for i, c in enumerate(cells) if _HOOKS_HEADER.search(c)}
        shown = [c for i, c in enumerate(cells) if i not in hooks]
        kept.append(" | ".join(shown[1:] if shown and shown[0].isdigit() else shown))
    return sorted(kept)


def _ranges(numbers: list[int]) -> str:
    spans: list[str] = []
    for number in numbers:
        if spans and number == int(spans[-1].split("-")[-1]) + 1:
            spans[-1] = f"{spans[-1].split('-')[0]}-{number}"
        else:
            spans.append(str(number))
    return ", ".join(spans)


def rewrite(doc: Path, table: str) -> str:
    """Replace the marked region of ``doc`` with ``table``; return the region it replaced."""
    text = doc.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    committed, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n\n{table}\n{END}{tail}", encoding="utf-8")
    return committed


def main(argv: list[str]) -> int:
    """Read the results directory, rewrite the document."""
    results, doc = Path(argv[0]), Path(argv[1])
    rows = [
        json.loads(line)
        for path in sorted(results.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line
    ]
    if not rows:
        if GARM.find() is None:
            print(f"{doc} left as it is: the campaign did not run ({GARM.skip_reason()})")
            return 0
        print(f"no outcomes in {results}", file=sys.stderr)
        return 1
    table = tables(rows)
    committed = rewrite(doc, table)
    print(f"{doc}: {len(rows)} cases")
    before, now = stable(committed), stable(table)
    if before != now:
        changed = list(difflib.unified_diff(before, now, lineterm="", n=0))
        print(
            f"{doc} was stale: its calls, answers or cases differ from this run's (hook counts "
            "aside); it is rewritten, commit it:\n" + "\n".join(changed[2:]),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
