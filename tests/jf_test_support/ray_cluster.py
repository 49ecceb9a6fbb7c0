"""A Ray cluster on loopback for the Ray executor's test and benchmark: a head node (no CPU, so no
judge worker lands on it) and ``workers`` nodes of one CPU each, all on this machine.

The cluster lives in a child process (this file run as a script, ``ray.cluster_utils.Cluster``)
so the test process holds no Ray state; the driver under test (``judgefuse judge --executor
ray --address ...``) joins it with :attr:`RayCluster.env`. Every address is 127.0.0.1:
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray take the loopback address for its nodes, as on
a laptop, instead of the machine's outward one; the head's ports are free ones picked here, and
the cluster's files (sockets, logs, the address file) live in a short temporary folder removed
at the end. Usage statistics are off.

The script reads commands on stdin, one a line: ``kill I`` removes worker node I at once (its
raylet and processes SIGKILLed: a machine lost), ``add`` starts another worker node, ``stop``
(or end of input) shuts the cluster down. It answers ``READY address``, ``KILLED I``, ``ADDED I``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
START_TIMEOUT_S = 240.0  # a head and two nodes take ~20 s on this 2-core machine when it is busy


def ray_env(tmp: str) -> dict[str, str]:
    """What a process joining (or running) the cluster needs in its environment."""
    return {
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # loopback node addresses
        "RAY_TMPDIR": tmp,  # the address file and sessions under our own folder
        "RAY_USAGE_STATS_ENABLED": "0",
    }


class RayCluster:
    """The cluster process; use as a context manager (stops the cluster and removes its folder)."""

    def __init__(self, workers: int = 2, *, log: Path | None = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="jfray-", dir="/tmp")  # unix socket paths must stay short
        self.env = {**os.environ, **ray_env(self.tmp)}
        self._log = (log or Path(self.tmp) / "cluster.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), str(workers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=self.env,
            start_new_session=True,  # its own process group: the fallback kill reaches only it
        )
        self.address = self._expect("READY", START_TIMEOUT_S)

    def _expect(self, word: str, timeout: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the Ray cluster process ended before {word}: see {self._log.name}")
            if line.startswith(word + " "):
                return line.split(" ", 1)[1].strip()
        raise TimeoutError(f"no {word} from the Ray cluster within {timeout:.0f} s")

    def _send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill_worker(self, index: int) -> None:
        """Remove worker node ``index`` at once (SIGKILL of its processes)."""
        self._send(f"kill {index}")
        self._expect("KILLED", 60)

    def add_worker(self) -> None:
        self._send("add")
        self._expect("ADDED", START_TIMEOUT_S)

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self._send("stop")
                    self.proc.wait(timeout=60)
                except (OSError, subprocess.TimeoutExpired):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=30)
        finally:
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
            self._log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(workers: int) -> None:
    from ray.cluster_utils import Cluster

    tmp = os.environ["RAY_TMPDIR"]
    Path(tmp, "ray").mkdir(exist_ok=True)
    node = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            **node,
            "num_cpus": 0,
            "include_dashboard": False,
            "gcs_server_port": _free_port(),
            "dashboard_port": _free_port(),
            "dashboard_agent_listen_port": _free_port(),
            "temp_dir": str(Path(tmp, "ray")),
        },
    )
    nodes = [cluster.add_node(**node) for _ in range(workers)]
    cluster.wait_for_nodes()
    print("READY", cluster.address, flush=True)
    try:
        for line in sys.stdin:
            command = line.split()
            if command[:1] == ["kill"]:
                index = int(command[1])
                cluster.remove_node(nodes[index], allow_graceful=False)
                print("KILLED", index, flush=True)
            elif command[:1] == ["add"]:
                nodes.append(cluster.add_node(**node))
                print("ADDED", len(nodes) - 1, flush=True)
            elif command[:1] == ["stop"]:
                break
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]))
