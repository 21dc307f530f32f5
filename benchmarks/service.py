"""``nlbandit serve`` under load on loopback, and a kill -9 in the middle of it.

Run: ``python benchmarks/service.py [--policy lin-ucb] [--clients 8] [--rounds 400] [--kill-after 1.0]
[--agents 1000] [--fleet-seconds 20]`` (needs the ``serve`` extra and httpx2, both in the ``test`` extra).

1. Load. A fresh service (d = 20, K = 50, journal and snapshots in a temporary folder) and ``--clients``
   concurrent clients, each playing ``--rounds`` rounds of ``POST /decide`` then ``POST /reward`` for the
   decision it got, as fast as the service answers. Printed: requests per second sustained, and the p50
   and p99 latency per request as the clients saw it (HTTP, agent, journal sync), separately for decide
   and reward.
2. Fault. The same load on a second fresh service, which is killed with SIGKILL ``--kill-after`` seconds
   in; then it is restarted on its folder, and the script counts: rewards answered 200 before the kill
   (accepted), rewards the restarted service holds (``/health``; at most one more per client: a reward in
   flight whose record reached the journal), and it resends every accepted reward: 409 (learnt, not learnt
   again) is right, 200 (the service had the decision but not the reward) or 404 (not even the decision)
   means it was lost (must be 0), and a count that grows by more than the 200s means one was applied twice
   (must be 0). While the restarted service runs, a second ``nlbandit serve`` on the same folder must be
   refused (the folder's lock). Then, stopped, its journal gets one flipped byte mid-file: the restarted
   service must refuse that agent (503, "is damaged") and leave the file byte for byte; restored, the service
   must hold the same rewards and answer 409 to every accepted one again.
3. Many agents (``--agents``, 0 to skip). A fresh service with no agent gets ``--agents`` named agents by
   ``PUT /agents/{name}`` (policies in turn: lin-ucb, lin-ts, lin-es; d = 20, K = 50, seeds 0..),
   timed; memory per agent is the service's resident-memory growth over them. Then ``--clients`` clients
   play for ``--fleet-seconds`` seconds, each round a decide and a reward on an agent drawn uniformly:
   requests/s and p50/p99 per kind. Then the same traffic is cut by SIGKILL after ``--kill-after`` seconds;
   the restarted service (its start-up timed) must hold, per agent, every reward answered 200 (at most one
   more per client: a record that reached the journal before the kill) and answer 409 to each one resent
   (0 lost, 0 duplicated, summed over the agents).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx
import numpy as np

D, K = 20, 50
FLEET_POLICIES = ("lin-ucb", "lin-ts", "lin-es")  # (the GLM policies keep per-arm statistics of a fixed arm set)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refused(folder: Path, port: int, expected: str) -> None:
    """``nlbandit serve`` on ``folder`` must exit with an error whose output says ``expected``."""
    code = "import sys; from nlbandit.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "serve", str(folder), "--port", str(port)],
                          capture_output=True, text=True, timeout=120)
    if done.returncode == 0 or expected not in done.stdout + done.stderr:
        raise SystemExit(f"FAIL: a start that should be refused ({expected}) gave: {done.stdout + done.stderr}")


def start(folder: Path, port: int, policy: str | None) -> subprocess.Popen:
    """Start ``nlbandit serve`` on ``folder`` (with its default agent of ``policy`` if new and a policy is given)
    and wait until it answers ``/health``."""
    code = "import sys; from nlbandit.cli import main; sys.exit(main(sys.argv[1:]))"
    args = [sys.executable, "-c", code, "serve", str(folder), "--port", str(port)]
    if policy is not None and not (folder / "agents" / "default" / "agent.json").exists():
        args += ["--policy", policy, "--d", str(D), "--k", str(K), "--horizon", "1000000"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code in (200, 503):  # up (503:
                return proc  # its default agent could not be recovered)
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the service did not start within 600 s")


def resend(folder: Path, port: int, policy: str, accepted: list, second_server: bool = False) -> tuple:
    """Restart the service on ``folder`` and resend every accepted reward: (rewards held before, the status of
    each resend, rewards held after); with ``second_server``, a second service on the folder must be refused
    meanwhile."""
    proc = start(folder, port, policy)
    try:
        if second_server:
            refused(folder, free_port(), "held by another nlbandit service")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            held = c.get("/health").json()["rewarded"]
            codes = [c.post("/reward", json={"event_id": e, "value": 0.0}).status_code for e in accepted]
            return held, codes, c.get("/health").json()["rewarded"]
    finally:
        proc.terminate()
        proc.wait()


def unavailable(folder: Path, port: int, policy: str, expected: str) -> None:
    """The service on ``folder`` must start and refuse its default agent (503) with ``expected`` in the reason."""
    proc = start(folder, port, policy)
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/decide", json={"contexts": [[0.0] * D] * K}, timeout=30)
        if r.status_code != 503 or expected not in r.text:
            raise SystemExit(f"FAIL: an agent that should be unavailable ({expected}) answered {r.status_code}: "
                             f"{r.text[:300]}")
    finally:
        proc.terminate()
        proc.wait()


async def client(url: str, rounds: int, seed: int, accepted: list, latency: dict) -> None:
    """Play ``rounds`` decide + reward rounds; record accepted event ids and latencies."""
    rng = np.random.default_rng(seed)
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        for _ in range(rounds):
            contexts = (rng.normal(size=(K, D)) / 5).round(6).tolist()
            t0 = time.perf_counter()
            r = await c.post("/decide", json={"contexts": contexts})
            latency["decide"].append(time.perf_counter() - t0)
            event = r.json()["event_id"]
            t0 = time.perf_counter()
            r = await c.post("/reward", json={"event_id": event, "value": float(rng.random() < 0.3)})
            latency["reward"].append(time.perf_counter() - t0)
            if r.status_code == 200:
                accepted.append(event)


async def load(url: str, clients: int, rounds: int) -> tuple[list, dict, float]:
    accepted, latency = [], {"decide": [], "reward": []}
    t0 = time.perf_counter()
    results = await asyncio.gather(*(client(url, rounds, i, accepted, latency) for i in range(clients)),
                                   return_exceptions=True)
    errors = [r for r in results if isinstance(r, Exception)]
    return accepted, latency, time.perf_counter() - t0 if not errors else -1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default="lin-ucb")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=400, help="decide + reward rounds per client")
    parser.add_argument("--kill-after", type=float, default=1.0, help="seconds of load before SIGKILL (fault)")
    parser.add_argument("--agents", type=int, default=1000, help="agents of the many-agent part (0: skip it; "
                        f"else at least {len(FLEET_POLICIES) + 1})")
    parser.add_argument("--fleet-seconds", type=float, default=20.0, help="seconds of the many-agent traffic")
    args = parser.parse_args()
    if args.agents and args.agents <= len(FLEET_POLICIES):
        parser.error(f"--agents must be 0 or more than {len(FLEET_POLICIES)}")
    with tempfile.TemporaryDirectory() as tmp:
        folder, port = Path(tmp) / "load", free_port()
        proc = start(folder, port, args.policy)
        url = f"http://127.0.0.1:{port}"
        try:
            accepted, latency, seconds = asyncio.run(load(url, args.clients, args.rounds))
        finally:
            proc.terminate()
            proc.wait()
        n = sum(len(v) for v in latency.values())
        print(f"load: {args.policy}, d = {D}, K = {K}, {args.clients} clients x {args.rounds} rounds: {n} requests "
              f"in {seconds:.2f} s = {n / seconds:.0f} requests/s")
        for kind, values in latency.items():
            ms = np.asarray(values) * 1e3
            print(f"  {kind:7s} p50 {np.percentile(ms, 50):6.2f} ms   p99 {np.percentile(ms, 99):6.2f} ms")

        folder, port = Path(tmp) / "fault", free_port()
        proc = start(folder, port, args.policy)
        url = f"http://127.0.0.1:{port}"
        accepted = []

        async def until_killed():
            task = asyncio.ensure_future(client_pool(url, args.clients, accepted))
            await asyncio.sleep(args.kill_after)
            os.kill(proc.pid, signal.SIGKILL)
            await asyncio.gather(task, return_exceptions=True)

        async def client_pool(url, clients, accepted):
            latency = {"decide": [], "reward": []}
            await asyncio.gather(*(client(url, 10**6, 100 + i, accepted, latency) for i in range(clients)),
                                 return_exceptions=True)

        asyncio.run(until_killed())
        proc.wait()
        held, codes, after = resend(folder, port, args.policy, accepted, second_server=True)
        journal = folder / "agents" / "default" / "journal.log"
        good = journal.read_bytes()
        middle = len(good) // 2
        journal.write_bytes(good[:middle] + bytes([good[middle] ^ 1]) + good[middle + 1:])
        damaged = journal.read_bytes()
        unavailable(folder, port, args.policy, "is damaged")
        if journal.read_bytes() != damaged:
            raise SystemExit("FAIL: start-up changed a damaged journal it refused")
        journal.write_bytes(good)
        restored, again, final = resend(folder, port, args.policy, accepted)
        lost, duplicated = codes.count(200) + codes.count(404), (after - held) - codes.count(200)
        if not 0 <= held - len(accepted) <= args.clients:
            raise SystemExit(f"FAIL: the service holds {held} rewards for {len(accepted)} accepted")
        print(f"fault: killed after {args.kill_after:.1f} s of load; {len(accepted)} rewards accepted (200) before "
              f"the kill; the restarted service holds {held} (the rest: answers cut short by the kill); resending "
              f"the accepted ones: {codes.count(409)} known and not relearnt (409), lost {lost}, duplicated "
              f"{duplicated}")
        print(f"lock and damage: a second server on the folder refused; a journal with one flipped byte at offset "
              f"{middle} of {len(good)} refused and left unchanged; restored, the service holds {restored} "
              f"rewards (before: {after}) and answers 409 to {again.count(409)} of the {len(accepted)} resent")
        if lost or duplicated:
            raise SystemExit("FAIL: accepted rewards lost or applied twice")
        if restored != after or final != after or again.count(409) != len(accepted):
            raise SystemExit("FAIL: the restored journal lost or repeated rewards")
        if args.agents:
            fleet(Path(tmp), args)



def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` (MB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def fleet_client(url: str, agents: int, seed: int, until: float, accepted: list, latency: dict) -> None:
    """Decide + reward rounds on agents drawn uniformly until ``until`` (monotonic seconds); accepted rewards as
    (agent, event id)."""
    rng = np.random.default_rng(seed)
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        while time.monotonic() < until:
            name = f"a{rng.integers(agents)}"
            contexts = (rng.normal(size=(K, D)) / 5).round(6).tolist()
            t0 = time.perf_counter()
            r = await c.post(f"/agents/{name}/decide", json={"contexts": contexts})
            latency["decide"].append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise RuntimeError(f"decide on {name} answered {r.status_code}: {r.text[:300]}")
            event = r.json()["event_id"]
            t0 = time.perf_counter()
            r = await c.post(f"/agents/{name}/reward", json={"event_id": event, "value": float(rng.random() < 0.3)})
            latency["reward"].append(time.perf_counter() - t0)
            if r.status_code == 200:
                accepted.append((name, event))


async def fleet_traffic(url: str, args, seconds: float, seed: int) -> tuple[list, dict]:
    accepted, latency = [], {"decide": [], "reward": []}
    until = time.monotonic() + seconds
    results = await asyncio.gather(*(fleet_client(url, args.agents, seed + i, until, accepted, latency)
                                     for i in range(args.clients)), return_exceptions=True)
    failed = [r for r in results if isinstance(r, RuntimeError)]  # (a kill gives transport errors)
    if failed:
        raise SystemExit(f"FAIL: {failed[0]}")
    return accepted, latency


def fleet(tmp: Path, args) -> None:
    """Part 3 of the module docstring."""
    folder, port = tmp / "fleet", free_port()
    proc = start(folder, port, None)
    url = f"http://127.0.0.1:{port}"
    try:
        first = len(FLEET_POLICIES)  # the first agent of each policy compiles its functions
        t0 = time.perf_counter()
        with httpx.Client(base_url=url, timeout=600) as c:
            for i in range(args.agents):
                if i == first:
                    before, t1 = rss_mb(proc.pid), time.perf_counter()
                body = {"policy": FLEET_POLICIES[i % len(FLEET_POLICIES)], "d": D, "k": K, "seed": i}
                if c.put(f"/agents/a{i}", json=body).status_code != 201:
                    raise SystemExit(f"FAIL: agent a{i} was not created")
        created, each = time.perf_counter() - t0, (time.perf_counter() - t1) / (args.agents - first)
        per_agent = (rss_mb(proc.pid) - before) / (args.agents - first)
        accepted, latency = asyncio.run(fleet_traffic(url, args, args.fleet_seconds, 1000))
        grown = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait()
    n = sum(len(v) for v in latency.values())
    print(f"fleet: {args.agents} agents ({', '.join(FLEET_POLICIES)} in turn; d = {D}, K = {K}) created in "
          f"{created:.1f} s ({each * 1e3:.1f} ms each after the first of each policy, which compiles); "
          f"{per_agent * 1024:.0f} KB of resident memory per agent after those ({grown:.0f} MB in all after the "
          "traffic)")
    print(f"  traffic: {args.clients} clients x {args.fleet_seconds:.0f} s on agents drawn uniformly: {n} requests = "
          f"{n / args.fleet_seconds:.0f} requests/s")
    for kind, values in latency.items():
        ms = np.asarray(values) * 1e3
        print(f"  {kind:7s} p50 {np.percentile(ms, 50):6.2f} ms   p99 {np.percentile(ms, 99):6.2f} ms")

    proc = start(folder, port, None)  # the same agents, restarted; traffic cut by SIGKILL
    accepted = []

    async def until_killed():
        task = asyncio.ensure_future(fleet_traffic(url, args, 3600, 2000))
        await asyncio.sleep(args.kill_after)
        os.kill(proc.pid, signal.SIGKILL)
        accepted.extend((await task)[0])

    asyncio.run(until_killed())
    proc.wait()
    t0 = time.perf_counter()
    proc = start(folder, port, None)
    restarted = time.perf_counter() - t0
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            held = {a["name"]: a["rewarded"] for a in c.get("/agents").json()["agents"]}
            codes = [c.post(f"/agents/{name}/reward", json={"event_id": e, "value": 0.0}).status_code
                     for name, e in accepted]
            after = {a["name"]: a["rewarded"] for a in c.get("/agents").json()["agents"]}
    finally:
        proc.terminate()
        proc.wait()
    lost, duplicated = codes.count(200) + codes.count(404), sum(after.values()) - sum(held.values()) - codes.count(200)
    print(f"  fault: killed after {args.kill_after:.1f} s of traffic; {len(accepted)} rewards accepted (200) on "
          f"{len({name for name, _ in accepted})} agents; restarted in {restarted:.1f} s with {len(held)} agents "
          f"holding {sum(held.values())} rewards; resending the accepted ones: {codes.count(409)} known (409), lost "
          f"{lost}, duplicated {duplicated}")
    if lost or duplicated or len(held) != args.agents:
        raise SystemExit("FAIL: accepted rewards lost or applied twice, or agents lost")


if __name__ == "__main__":
    main()
