"""A network lab for the local Flink: each TaskManager in a network namespace of its own behind a
shaped link, optionally under a CPU quota of its own (``streamsched flink-local start --link-mbit``).

Layout (facts in ``shared/reference/network-lab.md``): a Linux bridge in the root namespace with
the address ``10.213.X.1/24`` (the JobManager binds its RPC and blob ports there); TaskManager
``tm-k`` in the namespace ``<prefix>-tm-k`` with the address ``10.213.X.(k+1)``, joined to the
bridge by a veth pair. ``tc tbf`` on the namespace side of the pair limits what the TaskManager
sends (``out``), on the bridge side what it receives (``in``); an optional ``netem`` (delay,
loss) sits under each ``tbf``. A CPU quota is a cgroup (v1 ``cpu.cfs_quota_us`` or v2
``cpu.max``) the TaskManager's JVM joins before it enters its namespace
(:func:`launch_prefix`: ``ip netns exec`` would hide the cgroup mounts from the JVM).

Every name the lab creates starts with a prefix derived from the lab's directory
(:func:`prefix_of`) and is recorded in ``<dir>/netlab.json`` before it is created;
:func:`teardown` ends the processes inside the lab's namespaces and cgroups and removes the
namespaces, links (their qdiscs go with them) and cgroups, recorded or found by that prefix, so a
crash leaves nothing a later ``start``/``stop`` in the same directory does not remove, and
nothing of another directory's lab is touched. Needs root (iproute2, network namespaces, and
for quotas a cgroup ``cpu`` controller); otherwise :class:`LabError` names what is missing.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Mapping

import yaml

from streamsched.errors import InputError, StreamschedError
from streamsched.model.cluster import Cluster, Node
from streamsched.model.units import CORES

STATE_FILE = "netlab.json"
#: Lab subnets are ``10.213.X.0/24``; X starts at a value from the directory's hash.
NET = "10.213"
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000
#: tbf queue bound: what a link holds beyond its burst (the feasibility run's setting).
TBF_LATENCY = "100ms"
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


class LabError(StreamschedError):
    """The machine cannot build the lab (not root, no ``ip``, ...): one line naming what is missing."""


@dataclass(frozen=True)
class LabOptions:
    """What a user asks of the lab. Rates in Mbit/s (10^6 bit/s, as ``tc`` counts them, Ethernet
    frames); ``None``: unlimited. ``links`` per TaskManager: ``(in, out)``, over ``link_mbit``.
    ``delay_ms`` and ``loss_pct`` apply to each direction of every link; ``cpu_quota``: cores per
    TaskManager (e.g. ``{"tm-3": 0.25}``)."""

    link_mbit: float | None = None
    links: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    delay_ms: float = 0.0
    loss_pct: float = 0.0
    cpu_quota: Mapping[str, float] = field(default_factory=dict)

    def check(self, taskmanagers: int) -> None:
        names = {f"tm-{k}" for k in range(1, taskmanagers + 1)}
        for option, keys in (("--link-mbit-tm", self.links), ("--cpu-quota", self.cpu_quota)):
            unknown = sorted(set(keys) - names)
            if unknown:
                raise InputError(f"{option}: {', '.join(unknown)} is not a TaskManager (tm-1 .. tm-{taskmanagers})")
        rates = [self.link_mbit] + [r for pair in self.links.values() for r in pair]
        if any(r is not None and not (0 < r <= 100_000) for r in rates):
            raise InputError(f"--link-mbit: rates must be in (0, 100000] Mbit/s, got {rates}")
        if not (0 <= self.delay_ms <= 60_000) or not (0 <= self.loss_pct <= 100):
            raise InputError(f"--delay-ms 0..60000 and --loss-pct 0..100, got {self.delay_ms:g} and {self.loss_pct:g}")
        cores = machine_cores()
        for name, quota in self.cpu_quota.items():
            if not (0.01 <= quota <= cores):
                raise InputError(f"--cpu-quota {name}={quota:g}: must be between 0.01 and the machine's {cores} cores")
        if len(self.cpu_quota) < taskmanagers and sum(self.cpu_quota.values()) >= cores:
            raise InputError(f"--cpu-quota: the quotas ({sum(self.cpu_quota.values()):g} cores) leave none of the "
                             f"machine's {cores} cores to the TaskManagers without one")


@dataclass
class TaskManagerNet:
    """One TaskManager's place in the lab: namespace, veth ends, address, link rates, cgroup."""

    name: str
    netns: str
    veth_host: str
    veth_ns: str
    address: str
    in_mbit: float | None
    out_mbit: float | None
    cpu_quota: float | None
    cgroup: str | None


@dataclass
class Lab:
    """A lab as planned and recorded in ``<base>/netlab.json``."""

    base: str
    prefix: str
    bridge: str
    bridge_address: str
    subnet: str
    delay_ms: float
    loss_pct: float
    taskmanagers: list[TaskManagerNet]

    def tm(self, name: str) -> TaskManagerNet:
        for tm in self.taskmanagers:
            if tm.name == name:
                return tm
        raise InputError(f"lab {self.prefix}: no TaskManager {name!r}")


def machine_cores() -> int:
    return len(os.sched_getaffinity(0))


def prefix_of(base: str | Path) -> str:
    """``ss`` and 8 hex digits of SHA-256 over the lab directory's absolute path (10 characters:
    interface names, at most 15, get a role and an index after it)."""
    return "ss" + hashlib.sha256(str(Path(base).resolve()).encode()).hexdigest()[:8]


# --------------------------------------------------------------------------- the machine
def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and run.returncode != 0:
        raise StreamschedError(f"{' '.join(argv)}: {(run.stderr or run.stdout).strip()}")
    return run


def check_machine(cpu: bool) -> None:
    """Refuse, in one line naming what is missing, where the lab cannot be built."""
    for tool in ("ip", "tc", "nsenter"):
        if shutil.which(tool) is None:
            raise LabError(f"network lab: `{tool}` is not installed (iproute2 / util-linux)")
    if os.geteuid() != 0:
        raise LabError("network lab: needs root (network namespaces, veth links, tc qdiscs)")
    if not Path("/proc/self/ns/net").exists():
        raise LabError("network lab: the kernel has no network namespaces (/proc/self/ns/net)")
    if cpu and cgroup_kind() is None:
        raise LabError(f"network lab: --cpu-quota needs a cgroup cpu controller ({CGROUP_V1}/cpu.cfs_quota_us "
                       f"or 'cpu' in {CGROUP_V2}/cgroup.controllers)")


def cgroup_kind() -> str | None:
    """``v1`` (a ``cpu`` hierarchy at /sys/fs/cgroup/cpu), ``v2`` (``cpu`` in the unified
    hierarchy at /sys/fs/cgroup) or ``None``."""
    if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
        return "v1"
    controllers = CGROUP_V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return "v2"
    return None


def _cgroup_root() -> Path:
    return CGROUP_V1 if cgroup_kind() == "v1" else CGROUP_V2


def _networks_in_use() -> list[ipaddress.IPv4Network]:
    run = _run("ip", "-j", "-4", "route", "show", "table", "all")
    out = []
    for route in json.loads(run.stdout or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default":
            try:
                out.append(ipaddress.ip_network(dst, strict=False))
            except ValueError:
                pass
    return out


def plan(base: str | Path, taskmanagers: int, options: LabOptions) -> Lab:
    """Names, addresses, rates and cgroups of a lab in ``base`` (nothing created): a /24 of
    ``10.213.0.0/16`` that no route of the machine overlaps, from the prefix's hash on."""
    options.check(taskmanagers)
    if taskmanagers > 250:
        raise InputError(f"network lab: at most 250 TaskManagers, got {taskmanagers}")
    prefix = prefix_of(base)
    used = _networks_in_use()
    start = int(prefix[2:], 16) % 256
    for step in range(256):
        subnet = ipaddress.ip_network(f"{NET}.{(start + step) % 256}.0/24")
        if not any(subnet.overlaps(n) for n in used):
            break
    else:
        raise LabError(f"network lab: every /24 of {NET}.0.0/16 is in use on this machine")
    hosts = list(subnet.hosts())
    root = _cgroup_root()
    tms = []
    for k in range(1, taskmanagers + 1):
        name = f"tm-{k}"
        rate_in, rate_out = options.links.get(name, (options.link_mbit, options.link_mbit))
        quota = options.cpu_quota.get(name)
        tms.append(TaskManagerNet(name, f"{prefix}-{name}", f"{prefix}h{k}", f"{prefix}n{k}", str(hosts[k]),
                                  rate_in, rate_out, quota, str(root / f"{prefix}-{name}") if quota else None))
    return Lab(str(Path(base).resolve()), prefix, f"{prefix}br", str(hosts[0]), str(subnet), options.delay_ms,
               options.loss_pct, tms)


def _record(lab: Lab) -> None:
    path = Path(lab.base) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(lab), indent=1))
    os.replace(tmp, path)


def load(base: str | Path) -> Lab | None:
    """The lab recorded in ``base``, or ``None``."""
    path = Path(base).resolve() / STATE_FILE
    try:
        data = json.loads(path.read_text())
        data["taskmanagers"] = [TaskManagerNet(**tm) for tm in data["taskmanagers"]]
        return Lab(**data)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a network lab record ({exc})") from None


def _shape(device: str, netns: str | None, mbit: float | None, delay_ms: float, loss_pct: float) -> None:
    """``tbf`` at ``mbit`` on ``device``'s egress (burst 32 KiB or 4 ms of the rate, queue
    :data:`TBF_LATENCY`), ``netem`` delay/loss under it; without a rate only the ``netem``."""
    tc = ["tc", *(["-n", netns] if netns else [])]
    netem = ["netem", *(["delay", f"{delay_ms:g}ms"] if delay_ms else []), *(["loss", f"{loss_pct:g}%"] if loss_pct else [])]
    if len(netem) > 1 and not _netem_known(tc, device):
        raise LabError("network lab: --delay-ms/--loss-pct need the kernel's netem qdisc (sch_netem), "
                       "which this kernel lacks")
    if mbit is not None:
        kbit = max(1, round(mbit * 1000))
        burst = max(32 * 1024, math.ceil(mbit * 1e6 / 8 * 0.004))
        _run(*tc, "qdisc", "replace", "dev", device, "root", "handle", "1:", "tbf", "rate", f"{kbit}kbit",
             "burst", str(burst), "latency", TBF_LATENCY)
        if len(netem) > 1:
            _run(*tc, "qdisc", "add", "dev", device, "parent", "1:1", "handle", "10:", *netem)
    elif len(netem) > 1:
        _run(*tc, "qdisc", "replace", "dev", device, "root", "handle", "1:", *netem)


def _netem_known(tc: list[str], device: str) -> bool:
    """The kernel has ``netem``: tried as ``device``'s root qdisc (replaced by the shaping next)."""
    run = _run(*tc, "qdisc", "replace", "dev", device, "root", "netem", "delay", "0ms", check=False)
    if run.returncode != 0 and "unknown" in run.stderr.lower():
        return False
    _run(*tc, "qdisc", "del", "dev", device, "root", check=False)
    return True


def create(base: str | Path, taskmanagers: int, options: LabOptions) -> Lab:
    """Build the lab in ``base`` (whatever an earlier lab there left is removed first); on any
    failure everything made so far is removed again."""
    check_machine(cpu=bool(options.cpu_quota))
    teardown(base)
    lab = plan(base, taskmanagers, options)
    _record(lab)
    try:
        if BRIDGE_NF.exists():  # bridged lab traffic must not pass iptables (br_netfilter loaded)
            BRIDGE_NF.write_text("0\n")
        prefix_len = ipaddress.ip_network(lab.subnet).prefixlen
        _run("ip", "link", "add", lab.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{lab.bridge_address}/{prefix_len}", "dev", lab.bridge)
        _run("ip", "link", "set", lab.bridge, "up")
        for tm in lab.taskmanagers:
            _run("ip", "netns", "add", tm.netns)
            _run("ip", "link", "add", tm.veth_host, "type", "veth", "peer", "name", tm.veth_ns, "netns", tm.netns)
            _run("ip", "link", "set", tm.veth_host, "master", lab.bridge, "up")
            _run("ip", "-n", tm.netns, "link", "set", "lo", "up")
            _run("ip", "-n", tm.netns, "addr", "add", f"{tm.address}/{prefix_len}", "dev", tm.veth_ns)
            _run("ip", "-n", tm.netns, "link", "set", tm.veth_ns, "up")
            _run("ip", "-n", tm.netns, "route", "add", "default", "via", lab.bridge_address)
            _shape(tm.veth_ns, tm.netns, tm.out_mbit, lab.delay_ms, lab.loss_pct)
            _shape(tm.veth_host, None, tm.in_mbit, lab.delay_ms, lab.loss_pct)
            if tm.cgroup:
                _make_cgroup(Path(tm.cgroup), tm.cpu_quota)
    except BaseException:
        teardown(base)
        raise
    return lab


def _make_cgroup(path: Path, cores: float) -> None:
    path.mkdir(exist_ok=True)
    quota = max(1000, round(cores * CFS_PERIOD_US))
    if cgroup_kind() == "v1":
        (path / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (path / "cpu.cfs_quota_us").write_text(str(quota))
    else:
        control = CGROUP_V2 / "cgroup.subtree_control"
        if "cpu" not in control.read_text().split():
            control.write_text("+cpu")
        (path / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")


def launch_prefix(lab: Lab, name: str) -> list[str]:
    """The command that runs what follows it as TaskManager ``name``: in its cgroup (joined by
    the shell before anything else) and its network namespace (``nsenter --net``, which keeps
    the mount namespace, so the JVM sees its cgroup). The pid stays the command's own."""
    tm = lab.tm(name)
    enter = ["nsenter", f"--net=/run/netns/{tm.netns}", "--"]
    if not tm.cgroup:
        return enter
    return ["sh", "-c", 'echo $$ > "$1" || exit 97; shift; exec "$@"', "sh", str(Path(tm.cgroup) / "cgroup.procs"),
            *enter]


def set_rate(base: str | Path, name: str, in_mbit: float, out_mbit: float,
             cluster_file: str | Path | None = None) -> Lab:
    """Change TaskManager ``name``'s link rates while the lab runs (another tenant's traffic
    taking part of its link): ``tc qdisc change`` of the ``tbf`` on each side of its veth pair
    (the ``netem`` under it, if any, stays; an unlimited direction gets a ``tbf`` by ``replace``),
    recorded in ``<base>/netlab.json``; with ``cluster_file`` (the lab's cluster.yaml) the node's
    ``net_in``/``net_out`` and ``bandwidth_mbps`` are rewritten there too (atomically), as a
    monitor of link capacity would. Returns the lab as recorded."""
    lab = load(base)
    if lab is None:
        raise InputError(f"{Path(base) / STATE_FILE}: no network lab recorded there")
    tm = lab.tm(name)
    for rate in (in_mbit, out_mbit):
        if not (isinstance(rate, (int, float)) and 0 < rate <= 100_000):
            raise InputError(f"link rate {rate!r} Mbit/s for {name}: must be in (0, 100000]")
    for device, netns, old, new in ((tm.veth_ns, tm.netns, tm.out_mbit, out_mbit),
                                    (tm.veth_host, None, tm.in_mbit, in_mbit)):
        tc = ["tc", *(["-n", netns] if netns else [])]
        kbit = max(1, round(new * 1000))
        burst = max(32 * 1024, math.ceil(new * 1e6 / 8 * 0.004))
        verb = "change" if old is not None else "replace"
        _run(*tc, "qdisc", verb, "dev", device, "root", "handle", "1:", "tbf", "rate", f"{kbit}kbit",
             "burst", str(burst), "latency", TBF_LATENCY)
    tm.in_mbit, tm.out_mbit = float(in_mbit), float(out_mbit)
    _record(lab)
    if cluster_file is not None:
        cluster = Cluster.load(cluster_file)
        nodes = tuple(replace(n, net_in=in_mbit * 1e6 / 8, net_out=out_mbit * 1e6 / 8,
                              bandwidth_mbps=float(min(in_mbit, out_mbit))) if n.name == name else n
                      for n in cluster.nodes)
        target = Path(cluster_file)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(yaml.safe_dump(replace(cluster, nodes=nodes).to_dict(), sort_keys=False))
        os.replace(tmp, target)
    return lab


# --------------------------------------------------------------------------- teardown
def _owned(base: str | Path) -> tuple[list[str], list[str], list[Path]]:
    """Namespaces, links and cgroups of the lab in ``base`` that exist now: recorded in its
    netlab.json or named with its prefix."""
    prefix = prefix_of(base)
    lab = load(base)
    names = set()
    run = _run("ip", "netns", "list", check=False)
    present = {line.split()[0] for line in run.stdout.splitlines() if line.strip()}
    netns = sorted(n for n in present if n.startswith(prefix + "-") or lab and n in {t.netns for t in lab.taskmanagers})
    run = _run("ip", "-j", "link", "show", check=False)
    for link in json.loads(run.stdout or "[]"):
        if link.get("ifname", "").startswith(prefix):
            names.add(link["ifname"])
    cgroups = []
    for root in {CGROUP_V1, CGROUP_V2}:
        if root.is_dir():
            cgroups += sorted(p for p in root.glob(f"{prefix}-*") if p.is_dir())
    if lab:
        cgroups += [Path(t.cgroup) for t in lab.taskmanagers if t.cgroup and Path(t.cgroup).is_dir()
                    and Path(t.cgroup) not in cgroups]
    return netns, sorted(names), cgroups


def _pids(netns: list[str], cgroups: list[Path]) -> set[int]:
    pids: set[int] = set()
    for ns in netns:
        pids |= {int(p) for p in _run("ip", "netns", "pids", ns, check=False).stdout.split() if p.isdigit()}
    for group in cgroups:
        try:
            pids |= {int(p) for p in (group / "cgroup.procs").read_text().split()}
        except OSError:
            pass
    pids.discard(os.getpid())
    return pids


def teardown(base: str | Path, timeout_s: float = 20.0) -> list[str]:
    """End every process inside the lab's namespaces and cgroups (SIGTERM, SIGKILL after
    ``timeout_s``), delete its namespaces, links (with their qdiscs) and cgroups and its record;
    what was removed. Another directory's lab (another prefix) is left alone."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        if load(base) is not None:
            raise LabError(f"{Path(base) / STATE_FILE}: removing a network lab needs root and `ip`")
        return []
    netns, links, cgroups = _owned(base)
    removed = []
    pids = _pids(netns, cgroups)
    for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            pids = {p for p in pids if _running(p)}
            time.sleep(0.1)
        if not pids:
            break
    if pids:
        raise StreamschedError(f"network lab {prefix_of(base)}: processes {sorted(pids)} did not end")
    for name in links:  # a veth's end here takes its peer in the namespace with it
        run = _run("ip", "link", "delete", name, check=False)
        if run.returncode == 0 or "Cannot find device" in run.stderr:
            removed.append(f"link {name}")
    for ns in netns:
        _run("ip", "netns", "delete", ns)
        removed.append(f"netns {ns}")
    for group in cgroups:
        for attempt in range(50):
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.1)
        removed.append(f"cgroup {group}")
    left = _owned(base)
    if any(left):
        raise StreamschedError(f"network lab {prefix_of(base)}: could not remove {[*left[0], *left[1], *left[2]]}")
    (Path(base).resolve() / STATE_FILE).unlink(missing_ok=True)
    return removed


def _running(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# --------------------------------------------------------------------------- reading the lab
#: Mbit/s of an unshaped veth direction in the cluster file: about 11 Gbit/s measured here by a
#: socket test (shared/reference/network-lab.md), stated round.
UNSHAPED_MBIT = 10_000.0


def cluster_of(lab: Lab, slots: int, ram_mb: float) -> Cluster:
    """The lab as a streamsched cluster (capacity in cores): one node per TaskManager with its
    CPU (its quota, or an equal share of the cores the quotas leave) and its link's capacity in
    and out in bytes/s (``net_in``/``net_out``: the shaped rate of Ethernet frames, 10^6/8 bytes/s
    per Mbit/s; an unshaped direction :data:`UNSHAPED_MBIT`, what a veth carries here, so that
    the throughput model judges every lab, a CPU-bound one too; ``bandwidth_mbps`` the smaller
    direction)."""
    cores = machine_cores()
    free = [tm for tm in lab.taskmanagers if not tm.cpu_quota]
    share = (cores - sum(tm.cpu_quota or 0.0 for tm in lab.taskmanagers)) / len(free) if free else 0.0
    nodes = []
    for tm in lab.taskmanagers:
        cpu = round(tm.cpu_quota or share, 6)
        rates = [UNSHAPED_MBIT if r is None else r for r in (tm.in_mbit, tm.out_mbit)]
        nodes.append(Node(name=tm.name, capacity=cpu, slots=1, cores=max(1, math.ceil(cpu)), ram_mb=float(ram_mb),
                          task_slots=slots, bandwidth_mbps=float(min(rates)),
                          net_in=rates[0] * 1e6 / 8, net_out=rates[1] * 1e6 / 8))
    return Cluster(name=f"flink-lab-{lab.prefix}", nodes=tuple(nodes), capacity_unit=CORES)


def link_bytes(lab: Lab) -> dict[str, dict[str, int]]:
    """Bytes each TaskManager's link has carried so far, ``in`` (to it) and ``out`` (from it):
    the bridge-side veth's ``tx_bytes`` and ``rx_bytes``."""
    out = {}
    for tm in lab.taskmanagers:
        stats = Path("/sys/class/net") / tm.veth_host / "statistics"
        out[tm.name] = {"in": int((stats / "tx_bytes").read_text()), "out": int((stats / "rx_bytes").read_text())}
    return out


_RECEIVE = """
import json, socket, sys, time
server = socket.socket(); server.bind((sys.argv[1], 0)); server.listen(1)
print(server.getsockname()[1], flush=True)
conn, _ = server.accept(); warm = float(sys.argv[2]); marks = []; total = 0
while True:
    data = conn.recv(1 << 16)
    if not data:
        break
    total += len(data); marks.append((time.monotonic(), total))
t0 = marks[0][0] + warm
first = next(m for m in marks if m[0] >= t0)
print(json.dumps({"bytes": marks[-1][1] - first[1], "seconds": marks[-1][0] - first[0]}), flush=True)
"""
_SEND = """
import socket, sys, time
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
chunk = b"x" * (1 << 16); end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    conn.sendall(chunk)
conn.close()
"""


def measure(lab: Lab, source: str, target: str, seconds: float = 4.0, warm_s: float = 1.0) -> float:
    """Payload bytes/s of one TCP stream from TaskManager ``source`` to ``target`` (``"host"``:
    the root namespace, at the bridge address), counted by the receiver after ``warm_s``."""
    def where(name: str) -> tuple[list[str], str]:
        if name == "host":
            return [], lab.bridge_address
        tm = lab.tm(name)
        return ["nsenter", f"--net=/run/netns/{tm.netns}", "--"], tm.address

    rx_prefix, rx_address = where(target)
    tx_prefix, _ = where(source)
    receiver = subprocess.Popen([*rx_prefix, sys.executable, "-c", _RECEIVE, rx_address, str(warm_s)],
                                stdout=subprocess.PIPE, text=True)
    try:
        port = receiver.stdout.readline().strip()
        subprocess.run([*tx_prefix, sys.executable, "-c", _SEND, rx_address, port, str(seconds + warm_s)],
                       check=True, timeout=seconds + warm_s + 30)
        result = json.loads(receiver.communicate(timeout=30)[0])
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    return result["bytes"] / result["seconds"]
