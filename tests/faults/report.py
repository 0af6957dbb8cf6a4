"""Write the fault campaign's table into ``docs/reference/faults.md``.

``python -m tests.faults.report RESULTS_DIR DOC``: reads the outcomes the campaign's tests
appended to ``RESULTS_DIR/*.jsonl`` and replaces the region of ``DOC`` between
:data:`BEGIN` and :data:`END` with the tables: per story, each faulted call of the step with the
hooks the charm took to converge after a cut and after a kill there; then the faults of a whole
step. ``tox -e faults`` runs it after the campaign passed.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.faults.stories import STORIES

BEGIN = "<!-- faults-table:begin (written by tox -e faults) -->"
END = "<!-- faults-table:end -->"
WHOLE_STEP = {"late": "GARM answers every call 1 s late", "pod": "pod replaced"}


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
        cases = by_story.get(story.key)
        per_call = {k: v for k, v in (cases or {}).items() if k[0] in ("cut", "kill")}
        if not per_call:
            continue
        ref = next(iter(per_call.values()))["reference"]
        calls = sorted({call for _, call in per_call if call is not None})
        out += [
            f"### ({story.key}) {story.title}",
            "",
            f"Unfaulted: {len(ref['calls'])} calls in the step, then {ref['hooks']} hook(s) "
            f"to converge. Faulted: calls {_ranges(calls)}.",
            "",
            "| call | what the charm asked GARM | cut: hooks | kill: hooks |",
            "|---:|---|---:|---:|",
        ]
        for call in calls:
            out.append(
                f"| {call} | `{ref['calls'][call - 1]}` | {_hooks(per_call.get(('cut', call)))} "
                f"| {_hooks(per_call.get(('kill', call)))} |"
            )
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


def _ranges(numbers: list[int]) -> str:
    spans: list[str] = []
    for number in numbers:
        if spans and number == int(spans[-1].split("-")[-1]) + 1:
            spans[-1] = f"{spans[-1].split('-')[0]}-{number}"
        else:
            spans.append(str(number))
    return ", ".join(spans)


def rewrite(doc: Path, table: str) -> None:
    """Replace the marked region of ``doc`` with ``table``."""
    text = doc.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n\n{table}\n{END}{tail}", encoding="utf-8")


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
        print(f"no outcomes in {results}", file=sys.stderr)
        return 1
    rewrite(doc, tables(rows))
    print(f"{doc}: {len(rows)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
