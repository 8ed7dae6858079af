"""A Ray cluster of this machine for the tests and the measurements, held to loopback.

Meant to run inside a network namespace that holds only a loopback interface (``unshare -n``,
then ``ip link set lo up``): there Ray finds no address but 127.0.0.1. Every node is a
``ray start`` of its own with a small object store and no dashboard, under one temporary
directory; ``stop`` ends the cluster's processes by their ids (not ``ray stop``, which would end
every Ray process of the machine, another cluster's too) and waits until none is left. A process
is the cluster's only when it lives in the caller's network namespace: another cluster of the
machine (another test session's) may use the same ports and address in a namespace of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE_BYTES = 100 * 2**20
# Ray notices a lost node after health_check_failure_threshold (5) failed checks this far apart;
# its default, 3000 ms, makes the lost-node scenario wait 15 s. A killed raylet refuses each check
# at once, while a busy one still has health_check_timeout_ms (10 s, kept) per check to answer.
HEALTH_CHECK_PERIOD_MS = "500"


def namespace_command(argv: list[str]) -> list[str]:
    """``argv`` run in a network namespace of its own, with only loopback, up."""
    inner = " ".join(_quote(a) for a in argv)
    return ["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {inner}"]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def namespace_problem() -> str | None:
    """Why a loopback-only network namespace cannot be made here, or None when it can."""
    try:
        done = subprocess.run(namespace_command(["cat", "/proc/net/dev"]), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run unshare: {exc}"
    if done.returncode != 0:
        return f"cannot make a network namespace (unshare -n; needs root): {done.stderr.strip()[-300:]}"
    interfaces = [line.split(":")[0].strip() for line in done.stdout.splitlines()[2:]]
    if interfaces != ["lo"]:
        return f"the namespace holds {interfaces}, not only lo"
    return None


@dataclass
class Cluster:
    """A head node and worker nodes of one machine; the head offers no ``ptreg_bench`` unless
    asked, so that the timed units land on the worker nodes only."""

    temp_dir: Path
    port: int = 6399
    nodes: dict[str, int] = field(default_factory=dict)  # name -> node manager port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str], env: dict[str, str] | None, prefix: list[str]) -> None:
        manager_port = self.port + 10 + len(self.nodes)
        command = [*prefix, RAY, "start", "--node-manager-port", str(manager_port), "--disable-usage-stats", *args]
        environ = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
        done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"ray start ({name}) failed: {done.stdout[-1500:]} {done.stderr[-1500:]}")
        self.nodes[name] = manager_port

    def start_head(self, bench: bool = False, cpus: int = 1) -> None:
        resources = {"ptreg_bench": 1} if bench else {}
        self._start(
            "head",
            [
                "--head",
                "--port",
                str(self.port),
                "--num-cpus",
                str(cpus),
                "--resources",
                json.dumps(resources),
                "--object-store-memory",
                str(OBJECT_STORE_BYTES),
                "--include-dashboard=false",
                "--temp-dir",
                str(self.temp_dir),
            ],
            {"RAY_health_check_period_ms": HEALTH_CHECK_PERIOD_MS},
            [],
        )

    def add_node(self, name: str, cpus: int = 1, env: dict[str, str] | None = None, cores: str | None = None) -> None:
        """A worker node offering one ``ptreg_bench``; ``cores`` pins it (taskset) to those cores.

        Its dashboard agent serves on a free port: on Ray's fixed one (52365), already the head's,
        the agent retries for about 3 s, gives up, and the node registers only then."""
        self._start(
            name,
            [
                "--address",
                self.address,
                "--num-cpus",
                str(cpus),
                "--resources",
                json.dumps({"ptreg_bench": 1}),
                "--object-store-memory",
                str(OBJECT_STORE_BYTES),
                "--dashboard-agent-listen-port",
                "0",
            ],
            env,
            ["taskset", "-c", cores] if cores else [],
        )

    def agent_ports(self) -> dict[str, int]:
        """Node id -> the port its dashboard agent serves on, as Ray's session records it (-1:
        the agent could bind none)."""
        session = self.temp_dir / "session_latest"
        return {
            f.name.rsplit("_", 1)[1]: int(f.read_text().strip()) for f in session.glob("dashboard_agent_listen_port_*")
        }

    def raylet_pid(self, name: str) -> int:
        """The raylet of a node, found by its node manager port."""
        flag = f"--node_manager_port={self.nodes[name]}"
        for pid in self.processes():
            if "raylet" in _cmdline(pid) and flag in _cmdline(pid):
                return pid
        raise LookupError(f"no raylet for node {name}")

    def processes(self) -> list[int]:
        """Every live process of this cluster: those of this network namespace naming its temporary
        directory or address, and their descendants."""
        own = _namespace("self")
        here = [p for p in _pids() if _namespace(p) == own]
        mine = {p for p in here if str(self.temp_dir) in _cmdline(p) or self.address in _cmdline(p)}
        grew = True
        while grew:
            children = {p for p in here if _parent(p) in mine} - mine
            grew = bool(children)
            mine |= children
        return sorted(mine)

    def stop(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while self.processes() and time.monotonic() < deadline:
            for pid in self.processes():  # a process the first pass missed (started meanwhile)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _namespace(pid: int | str) -> str | None:
    """The network namespace a process lives in (None once it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def listening_addresses() -> list[str]:
    """The local address of every listening TCP socket in this network namespace."""
    found = []
    for name, width in (("tcp", 8), ("tcp6", 32)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            found.append(_address(fields[1].split(":")[0], width))
    return found


def _address(hex_text: str, width: int) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_text)
    # /proc prints each 32-bit word in host (little-endian) order
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
    packed = b"".join(words)
    return str(ipaddress.IPv4Address(packed) if width == 8 else ipaddress.IPv6Address(packed))


def is_loopback(address: str) -> bool:
    import ipaddress

    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback
