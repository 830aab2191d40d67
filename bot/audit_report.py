"""The audit report: one self-contained HTML file (inline CSS and SVG, no script, no
font or image fetched) that people would rather look at than read.

The entity graph is laid out here, deterministically (networkx spring layout with a
fixed seed), drawn as inline SVG: one node per entity, coloured by community, anchors
drawn as hollow diamonds, current facts as lines, superseded ones dashed. Below it: every current fact with the
messages behind it and the facts it superseded, the deletion log (ids and counts only)
and usage by day. Everything shown comes from ``memory.overview`` (pure rendering).
"""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import datetime
from typing import Any

import networkx as nx

WIDTH, HEIGHT, MARGIN = 960, 620, 40
SEED = 7
LABELLED = 40  # names drawn on the graph (the most mentioned); every node has a tooltip
ISOLATED_GAP = 22  # spacing of the entities that are in no fact
CELL_PAD = 16  # around each connected part's box
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
NO_COMMUNITY = "#8a8f98"

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1f2328}
header{background:#1f2d3d;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}header p{margin:4px 0 0;opacity:.8}
main{max-width:1100px;margin:0 auto;padding:16px 32px}section{background:#fff;border:1px solid #dde1e6;border-radius:8px;
padding:16px 20px;margin:16px 0}h2{margin:0 0 10px;font-size:17px}.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #dde1e6;border-radius:6px;padding:8px 12px;min-width:110px}.card b{display:block;font-size:20px}
.card span{color:#57606a;font-size:12px}svg{width:100%;height:auto;background:#fbfcfd;border:1px solid #eef0f3;border-radius:6px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;
border-radius:50%;margin-right:4px;vertical-align:middle}.fact{border-top:1px solid #eef0f3;padding:8px 0}
.fact .what{font-weight:600}.fact .ends{color:#57606a;font-size:12px}.msg{color:#3d444d;font-size:13px;margin:2px 0 0 14px}
.msg b{color:#1f2328}.history{margin:4px 0 0 14px;padding-left:10px;border-left:3px solid #e15759}.history .what{
font-weight:400;text-decoration:line-through;color:#57606a}table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eef0f3}th{color:#57606a;font-weight:600}
.bar{display:inline-block;height:10px;background:#4e79a7;border-radius:2px;vertical-align:middle;margin-right:6px}
.muted{color:#57606a}
"""


Box = tuple[float, float, float, float]  # left, top, right, bottom


def _scaled(raw: dict[int, Any], box: Box) -> dict[int, tuple[float, float]]:
    left, top, right, bottom = box
    xs, ys = [p[0] for p in raw.values()], [p[1] for p in raw.values()]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    return {
        n: (left + (p[0] - min(xs)) / span_x * (right - left), top + (p[1] - min(ys)) / span_y * (bottom - top))
        for n, p in raw.items()
    }


def shelves(sizes: list[int], box: Box) -> list[Box]:
    """Boxes for groups of ``sizes`` nodes (largest first), in rows, each as wide as the
    square root of its size allows: a spring layout of a disconnected graph puts its
    parts far apart and squeezes each, so each part gets a box of its own. Pure."""
    left, top, right, bottom = box
    weights = [max(1, size) ** 0.5 for size in sizes]
    rows: list[list[int]] = [[]]
    target = sum(weights) / max(1, round(len(sizes) ** 0.5))
    for index, weight in enumerate(weights):
        if rows[-1] and sum(weights[i] for i in rows[-1]) + weight / 2 > target:
            rows.append([])
        rows[-1].append(index)
    height = (bottom - top) / len(rows)
    boxes: list[Box] = [box] * len(sizes)
    for r, row in enumerate(rows):
        x, width = left, sum(weights[i] for i in row)
        for i in row:
            step = weights[i] / width * (right - left)
            boxes[i] = (x + CELL_PAD, top + r * height + CELL_PAD, x + step - CELL_PAD, top + (r + 1) * height - CELL_PAD)
            x += step
    return boxes


def layout(nodes: list[int], edges: list[tuple[int, int]]) -> dict[int, tuple[float, float]]:
    """Node positions in the SVG's coordinates, the same for the same graph. Pure.

    Each connected part of the graph gets a spring layout in a box of its own
    (``shelves``); entities in no fact (mentioned, but related to nothing) line up in
    rows along the bottom, so they neither crowd the graph nor push it into a corner."""
    graph = nx.Graph()
    graph.add_nodes_from(sorted(nodes))
    graph.add_edges_from(sorted((a, b) for a, b in edges if a != b and a in graph and b in graph))
    alone = [n for n in sorted(nodes) if graph.degree(n) == 0]
    per_row = int((WIDTH - 2 * MARGIN) // ISOLATED_GAP)
    bottom = HEIGHT - MARGIN - -(-len(alone) // per_row) * ISOLATED_GAP
    positions: dict[int, tuple[float, float]] = {
        n: (MARGIN + (i % per_row) * ISOLATED_GAP, bottom + ISOLATED_GAP * (1 + i // per_row)) for i, n in enumerate(alone)
    }
    parts = sorted((sorted(c) for c in nx.connected_components(graph) if len(c) > 1), key=lambda c: (-len(c), c[0]))
    boxes = shelves([len(part) for part in parts], (MARGIN, MARGIN, WIDTH - MARGIN, bottom))
    for part, box in zip(parts, boxes, strict=True):
        spread = 2.0 / len(part) ** 0.5
        positions.update(_scaled(nx.spring_layout(graph.subgraph(part), seed=SEED, k=spread, iterations=100), box))
    return positions


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _colour(community: int | None, communities: list[int]) -> str:
    return NO_COMMUNITY if community is None else PALETTE[communities.index(community) % len(PALETTE)]


def _label(name: str, x: float, y: float, r: float) -> str:
    """A node's name beside it; near the right edge it runs leftwards, not off the picture."""
    if x > WIDTH - 160:
        return f'<text x="{x - r - 2:.1f}" y="{y + 4:.1f}" font-size="11" fill="#1f2328" text-anchor="end">{_e(name)}</text>'
    return f'<text x="{x + r + 2:.1f}" y="{y + 4:.1f}" font-size="11" fill="#1f2328">{_e(name)}</text>'


def graph_svg(entities: list[dict[str, Any]], facts: list[dict[str, Any]], communities: list[int]) -> str:
    current = [(f["subject_id"], f["object_id"]) for f in facts if f["status"] == "active"]
    history = [(f["subject_id"], f["object_id"]) for f in facts if f["status"] != "active"]
    positions = layout([e["id"] for e in entities], current)
    in_facts = {n for edge in current + history for n in edge}  # the rest sit in rows, named by their tooltips
    labelled = set([e["id"] for e in sorted(entities, key=lambda e: -e["mentions"]) if e["id"] in in_facts][:LABELLED])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="entity graph">']
    for edges, style in ((history, 'stroke="#e8a3a4" stroke-dasharray="4 3"'), (current, 'stroke="#b6bec8"')):
        parts += [
            f'<line x1="{positions[a][0]:.1f}" y1="{positions[a][1]:.1f}" x2="{positions[b][0]:.1f}" y2="{positions[b][1]:.1f}" '
            f'{style} stroke-width="1"/>'
            for a, b in edges
            if a in positions and b in positions
        ]
    for e in entities:
        x, y = positions[e["id"]]
        colour, r = _colour(e["community"], communities), 4 + min(8, e["mentions"] ** 0.5)
        shape = (
            f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" '
            f'transform="rotate(45 {x:.1f} {y:.1f})" '
            f'fill="#fff" stroke="{colour}" stroke-width="2"/>'
            if e["is_anchor"]
            else f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}" stroke="#fff" stroke-width="1"/>'
        )
        kind = "anchor" if e["is_anchor"] else "entity"
        label = _label(e["name"], x, y, r) if e["id"] in labelled else ""
        parts.append(
            f'<g class="node {kind}" data-entity-id="{e["id"]}"><title>{_e(e["name"])} ({_e(e["type"])}, '
            f"{e['mentions']} mentions)</title>{shape}{label}</g>"
        )
    return "".join(parts) + "</svg>"


def _messages(messages: list[dict[str, Any]], more: int) -> str:
    rows = "".join(
        f'<div class="msg"><b>{_e(m["speaker"])}</b> <span class="muted">{_e(m["time"][:16].replace("T", " "))} · '
        f"#{_e(m['platform_message_id'])}</span> {_e(m['text'])}"
        + (f' <a href="{_e(m["permalink"])}">link</a>' if m["permalink"] else "")
        + "</div>"
        for m in messages
    )
    return rows + (f'<div class="msg muted">… and {more} more messages</div>' if more > 0 else "")


def _fact(fact: dict[str, Any], history: dict[int, list[dict[str, Any]]]) -> str:
    older = "".join(
        f'<div class="history"><div class="what">{_e(old["fact"])}</div><div class="ends">superseded '
        f"{_e((old['superseded_at'] or '')[:10])} by this fact</div>"
        f"{_messages(old['messages'], old['message_count'] - len(old['messages']))}</div>"
        for old in history.get(fact["id"], [])
    )
    return (
        f'<div class="fact"><div class="what">{_e(fact["fact"])}</div><div class="ends">{_e(fact["subject"])} — '
        f"{_e(fact['predicate'])} → {_e(fact['object'])}"
        + (f" · since {_e(fact['valid_from'][:10])}" if fact["valid_from"] else "")
        + f"</div>{_messages(fact['messages'], fact['message_count'] - len(fact['messages']))}{older}</div>"
    )


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f"<table><tr>{head}</tr>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</table>"


def _deletions(deletions: list[dict[str, Any]]) -> str:
    if not deletions:
        return '<p class="muted">Nothing has been forgotten.</p>'
    keys = ("relations_removed", "relations_kept", "entities_anchored", "relations_restored", "answers_withdrawn")
    rows = [
        [
            _e(d["at"][:16].replace("T", " ")),
            _e(d["action"]),
            _e(d["message"]),
            _e(d["status"]),
            _e(d["requested_by"]),
            *(str(d["counts"].get(k, 0)) for k in keys),
        ]
        for d in deletions
    ]
    return _table(
        ["when", "action", "what", "status", "requested by", "removed", "kept", "anchored", "restored", "answers withdrawn"],
        rows,
    )


def _usage(usage: list[dict[str, Any]]) -> str:
    if not usage:
        return '<p class="muted">No model calls recorded.</p>'
    top = max(u["tokens"] for u in usage) or 1
    rows = [
        [
            _e(u["day"]),
            _e(u["phase"]),
            str(u["calls"]),
            f'<span class="bar" style="width:{max(1, round(240 * u["tokens"] / top))}px"></span>{u["tokens"]}',
        ]
        for u in usage
    ]
    return _table(["day", "phase", "calls", "tokens"], rows)


def _cards(stats: dict[str, Any]) -> str:
    shown = [k for k in stats if k not in ("conversation", "consolidated_at", "usage", "retention_source")]
    return (
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{stats[k]}</b><span>{k.replace("_", " ")}</span></div>' for k in shown)
        + "</div>"
    )


def render_report(data: dict[str, Any], generated_at: datetime) -> str:
    """The report of one conversation from ``Overview.as_dict()``. Pure."""
    stats, entities, facts = data["stats"], data["entities"], data["facts"]
    communities = [c["id"] for c in data["communities"]]
    history: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for fact in facts:
        if fact["status"] == "superseded" and fact["superseded_by"] is not None:
            history[fact["superseded_by"]].append(fact)
    legend = "".join(
        f'<span><i style="background:{_colour(c["id"], communities)}"></i>{_e(c["label"] or "community " + str(c["id"]))}'
        f"{' (to regenerate)' if c['dirty'] else ''}</span>"
        for c in data["communities"]
    ) + (
        '<span><i style="background:#fff;border:2px solid #8a8f98;border-radius:0"></i>connective anchor</span>'
        '<span><i style="background:#e8a3a4;height:2px;border-radius:0"></i>superseded fact</span>'
    )
    current = "".join(_fact(f, history) for f in facts if f["status"] == "active") or '<p class="muted">No current facts.</p>'
    shown_note = "" if len(entities) == stats["entities"] else f" (the {len(entities)} most mentioned of {stats['entities']})"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stashbird memory audit: {_e(stats["conversation"])}</title><style>{STYLE}</style></head><body>
<header><h1>What Stashbird remembers about {_e(stats["conversation"])}</h1>
<p>Audit report generated {_e(generated_at.strftime("%Y-%m-%d %H:%M UTC"))}.
Deleted messages appear only as ids in the deletion log.</p></header>
<main>
<section><h2>At a glance</h2>{_cards(stats)}</section>
<section><h2>Entity graph{_e(shown_note)}</h2><div class="legend">{legend}</div>
{graph_svg(entities, facts, communities)}</section>
<section><h2>Current facts, their messages and what they superseded</h2>{current}</section>
<section><h2>Deletion log</h2>{_deletions(data["deletions"])}</section>
<section><h2>Usage over time</h2>{_usage(data["usage_by_day"])}</section>
</main></body></html>
"""
