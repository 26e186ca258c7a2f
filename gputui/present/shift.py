"""A traffic shift plan as Rich renderables: the versions table and the plan's own findings (errors,
blockers, warnings). The shift dialog draws them; nothing here knows about keys or screens."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from gputui.ops.traffic.vocabulary import ShiftPlan, fmt_pct


def shift_table(plan: ShiftPlan, chosen: str | None, typed: str) -> Table:
    """Each version's share now and its target. `chosen`: the version being edited (marked); `typed`: the
    digits typed for it so far, shown in place of its target."""
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False, expand=False)
    table.add_column("", width=1, no_wrap=True)
    table.add_column("Version", no_wrap=True, max_width=22, overflow="ellipsis", style="bold")
    table.add_column("Now", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("Target", justify="right", no_wrap=True)
    if plan.scale != 100:  # weights that are not percentages are shown as they will be written
        table.add_column("Weight", justify="right", no_wrap=True)
    table.add_column("Ready", justify="right", no_wrap=True)
    table.add_column("Sessions", justify="right", no_wrap=True)
    for v in plan.versions:
        marked = v.name == chosen
        target = Text(fmt_pct(v.target_pct))
        if v.changes:
            target.stylize("bold")
        if marked and typed:
            target = Text(f"{typed}_", style="bold underline")
        cells: list[Text] = [
            Text("▸" if marked else " ", style="bold"),
            Text(v.name, style="reverse bold" if marked else "bold"),
            Text(fmt_pct(v.current_pct)),
            Text("→" if v.changes else " ", style="dim"),
            target,
        ]
        if plan.scale != 100:
            cells.append(Text("–" if v.target_weight is None else f"{v.target_weight:,}"))
        cells.append(Text(f"{v.ready}/{v.desired}", style="" if v.ready else "bold yellow"))
        cells.append(Text("–" if v.sessions is None else str(v.sessions)))
        table.add_row(*cells)
    return table


def plan_findings(plan: ShiftPlan, first: bool = True) -> Text:
    """One line per error (✗), blocker (!) and warning (⚠), in that order; `first`: no line break before
    the first line."""
    out = Text()
    for prefix, lines, style in (("✗ ", plan.errors, "bold red"), ("! ", plan.blockers, "bold yellow"),
                                 ("⚠ ", plan.warnings, "yellow")):
        for line in lines:
            if out or not first:
                out.append("\n")
            out.append(prefix, style=style)
            out.append(line)  # cluster text: appended as data, never parsed as markup
    return out


def key_hints(keys: list[tuple[str, str]]) -> Text:
    """`key what  key what…`, the keys in bold."""
    out = Text()
    for i, (key, what) in enumerate(keys):
        if i:
            out.append("  ")
        out.append(key, style="bold")
        out.append(" " + what)
    return out


def plan_text(plan: ShiftPlan, simulated: bool) -> str:
    """The plan in plain lines: the object, each version's share now and after, what blocks or warns, and the
    exact patches. `gputui shift --dry-run` prints it; the service screen's confirmations show it."""
    out: list[str] = ["# demo cluster (simulated)"] if simulated else []
    out.append(f"{plan.kind} {plan.service.namespace}/{plan.object_name}  ({plan.group}/{plan.api_version} {plan.plural})")
    if plan.action != "shift":
        out.append(f"action: {plan.action}")
    rows = [("VERSION", "NOW", "TARGET", "WEIGHT", "READY", "SESSIONS")]
    for v in plan.versions:
        weight = "–" if v.target_weight is None else (
            f"{v.current_weight} → {v.target_weight}" if v.changes else str(v.target_weight))
        rows.append((v.name, fmt_pct(v.current_pct), fmt_pct(v.target_pct), weight,
                     f"{v.ready}/{v.desired}", "–" if v.sessions is None else str(v.sessions)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if plan.scale != 100:
        out.append(f"weights out of {plan.scale:,}")
    for label, items in (("error", plan.errors), ("blocked", plan.blockers), ("warning", plan.warnings),
                         ("note", plan.notes)):
        out += [f"{label}: {item}" for item in items]
    out += [patch.render() for patch in (plan.patch, plan.then) if patch is not None]
    if plan.patch is None and plan.ok and not plan.changes:
        out.append("no change: nothing would be sent")
    return "\n".join(out) + "\n"
