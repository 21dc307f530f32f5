"""The service's status pages: server-rendered HTML, no external assets, no script.

``GET /`` (:func:`render_index`): every agent with its policy, shapes, counters and status (a link to its
page), and the service's request counts and decide latencies. ``GET /agents/{name}/status``
(:func:`render`): what the agent has seen since this process started (:class:`Activity`, fed by the request
handlers): decisions and rewards per minute over the last hour, the arms chosen, the mean reward with its 95%
normal interval, request rates and decide latencies; and the agent's own counters (decisions, rewards learnt,
pending), which include what start-up recovered. Charts are inline SVG.
"""

from __future__ import annotations

import html
import math
import time
from collections import Counter, deque
from typing import Any

BUCKET_S = 60
"""Seconds per bar of the time series."""
BUCKETS = 60
"""Bars kept (an hour)."""
CHARTED_ARMS = 200
"""The most arms the arms chart shows: all of them up to this K, else the most chosen (a bar for each of
K = 4,000,000 arms made a 346 MB page, rendered in 6 s on the event loop)."""


class Activity:
    """Counts of decisions and rewards by minute, arms chosen, and the rewards' running mean and variance."""

    def __init__(self, clock=time.time):
        self.clock, self.started = clock, clock()
        self.decisions: deque = deque(maxlen=BUCKETS)  # [minute, decisions, rewards]
        self.arms: Counter = Counter()
        self.n, self.mean, self.m2 = 0, 0.0, 0.0  # Welford's running moments of the rewards

    def _bucket(self) -> list:
        minute = int(self.clock() // BUCKET_S)
        if not self.decisions or self.decisions[-1][0] != minute:
            self.decisions.append([minute, 0, 0])
        return self.decisions[-1]

    def decided(self, arms: list[int]) -> None:
        """Count decisions that chose ``arms``."""
        self._bucket()[1] += len(arms)
        self.arms.update(arms)

    def rewarded(self, values: list[float]) -> None:
        """Count accepted rewards ``values``."""
        self._bucket()[2] += len(values)
        for v in values:
            self.n += 1
            delta = v - self.mean
            self.mean += delta / self.n
            self.m2 += delta * (v - self.mean)

    def reward_interval(self) -> tuple[float, float, float] | None:
        """(mean, low, high): the mean reward and its 95% normal interval; None before two rewards."""
        if self.n < 2:
            return None
        half = 1.96 * math.sqrt(self.m2 / (self.n - 1) / self.n)
        return self.mean, self.mean - half, self.mean + half


_AXIS = 14
"""Pixels of a chart's scale text above and below its bars."""
_STYLE = """<style>body{font-family:sans-serif;margin:2em;max-width:62em} .chart rect{fill:#3b6ea5}
.chart text{font-size:11px;fill:#555} .chart line{stroke:#999}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}
.bad{color:#b00}</style>"""


def _bars(values: list[float], labels: list[str], width: int = 560, height: int = 120) -> str:
    """An inline SVG bar chart of ``values`` (each bar's label and value in its tooltip), with its scale: the largest
    value at the top left, a base line, and the first and last bars' labels under it."""
    top, area = max(values, default=0) or 1, height - _AXIS
    step = width / max(len(values), 1)
    bars = "".join(f'<rect x="{i * step:.1f}" y="{height - v / top * area:.1f}" width="{max(step - 1, 1):.1f}" '
                   f'height="{v / top * area:.1f}"><title>{html.escape(label)}: {v:g}</title></rect>'
                   for i, (v, label) in enumerate(zip(values, labels)))
    scale = (f'<text x="0" y="{_AXIS - 3}">{max(values):g}</text>'
             f'<line x1="0" y1="{height + 0.5}" x2="{width}" y2="{height + 0.5}"/>'
             f'<text x="0" y="{height + _AXIS}">{html.escape(labels[0])}</text>'
             f'<text x="{width}" y="{height + _AXIS}" text-anchor="end">{html.escape(labels[-1])}</text>'
             if values else "")
    return f'<svg width="{width}" height="{height + _AXIS + 3}" role="img" class="chart">{bars}{scale}</svg>'


def render(health: dict[str, Any], metrics: dict[str, Any], activity: Activity) -> str:
    """The status page of a service with ``health`` and ``metrics`` (:class:`~nlbandit.service.app.Service`)."""
    up = max(activity.clock() - activity.started, 1e-9)
    now = int(activity.clock() // BUCKET_S)
    seen = {b[0]: b for b in activity.decisions}
    minutes = [seen.get(m, [m, 0, 0]) for m in range(now - BUCKETS + 1, now + 1)]  # the last hour, zero-filled
    labels = [time.strftime("%H:%M UTC", time.gmtime(b[0] * BUCKET_S)) for b in minutes]
    decided, rewarded = _bars([b[1] for b in minutes], labels), _bars([b[2] for b in minutes], labels)
    k = health["k"]
    shown = range(k) if k <= CHARTED_ARMS else sorted(a for a, _ in activity.arms.most_common(CHARTED_ARMS))
    arms = _bars([activity.arms.get(a, 0) for a in shown], [f"arm {a}" for a in shown])
    which = "" if k <= CHARTED_ARMS else f" (the {CHARTED_ARMS} most chosen of K = {k}, if chosen)"
    interval = activity.reward_interval()
    reward = ("fewer than two rewards yet" if interval is None else
              f"{interval[0]:.4f} (95% interval {interval[1]:.4f} to {interval[2]:.4f}, {activity.n} rewards)")
    latency = metrics["decide_latency_ms"]
    lat = ", ".join(f"{q} {latency[q]:.2f} ms" for q in ("p50", "p90", "p99") if q in latency) or "no decisions yet"
    counts = metrics["counts"]
    rows = "".join(f"<tr><td>{html.escape(kind)}</td><td>{n}</td><td>{n / up:.2f}</td></tr>"
                   for kind, n in sorted(counts.items()))
    status = html.escape(str(health["status"]))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>nlbandit serve: {html.escape(health['policy'])}</title>
{_STYLE}</head>
<body>
<h1>nlbandit serve</h1>
<p><a href="/">All agents</a></p>
<p>Agent <b>{html.escape(health['policy'])}</b> (d = {health['d']}, K = {k}): status
<span class="{'bad' if status != 'ok' else ''}">{status}</span>; {health['rounds']} decisions,
{health['rewarded']} rewards learnt, {health['pending']} pending. Recovered at start-up:
{html.escape(str(health['recovered']))}.{' Last snapshot failure: ' + html.escape(health['snapshot_error'])
                                        if health.get('snapshot_error') else ''}</p>
<h2>Since this process started ({up / 60:.1f} min)</h2>
<p>Mean reward: {reward}.</p>
<h3>Decisions per minute (the last hour, UTC)</h3>{decided}
<h3>Rewards per minute</h3>{rewarded}
<h3>Arms chosen{which}</h3>{arms}
<h3>Requests</h3><table><tr><th>outcome</th><th>count</th><th>per second</th></tr>{rows}</table>
<p>Decide latency (agent and journal sync, last 10,000): {lat}.</p>
</body></html>
"""



def render_index(agents: list[dict[str, Any]], metrics: dict[str, Any]) -> str:
    """The service's page: ``agents`` (:meth:`~nlbandit.service.fleet.Fleet.listing`) and the service's
    ``metrics`` (:func:`~nlbandit.service.server.service_totals`)."""
    rows = "".join(
        f"<tr><td><a href=\"/agents/{html.escape(a['name'])}/status\">{html.escape(a['name'])}</a></td>"
        f"<td>{html.escape(str(a.get('policy', '')))}</td><td>{a.get('d', '')}</td><td>{a.get('k', '')}</td>"
        f"<td>{a.get('rounds', '')}</td><td>{a.get('rewarded', '')}</td>"
        f"<td class=\"{'' if a['status'] == 'ok' else 'bad'}\">{html.escape(a['status'])}</td></tr>" for a in agents)
    latency = metrics["decide_latency_ms"]
    lat = ", ".join(f"{q} {latency[q]:.2f} ms" for q in ("p50", "p90", "p99") if q in latency) or "no decisions yet"
    counts = "".join(f"<tr><td>{html.escape(kind)}</td><td>{n}</td></tr>"
                     for kind, n in sorted(metrics["counts"].items()))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>nlbandit serve: {len(agents)} agents</title>
{_STYLE}</head>
<body>
<h1>nlbandit serve</h1>
<p>{metrics['agents']} agents{f", {metrics['unavailable']} unavailable" if metrics['unavailable'] else ""};
{metrics['journal_records']} journal records. Decide latency (all agents, agent and journal sync, last 10,000):
{lat}.</p>
<table><tr><th>agent</th><th>policy</th><th>d</th><th>K</th><th>decisions</th><th>rewards</th><th>status</th></tr>
{rows}</table>
<h3>Requests</h3><table><tr><th>outcome</th><th>count</th></tr>{counts}</table>
</body></html>
"""


__all__ = ["Activity", "render", "render_index"]
