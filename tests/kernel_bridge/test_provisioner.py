"""Kernelspecs that name a jupyter_client provisioner, launched unmodified (local, and SSH to localhost)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from system_deps import missing

from kernel_bridge import KernelPool
from kernel_bridge.errors import KernelStartError
from kernel_bridge.kernel_ledger import KernelLedger, owner_tag
from kernel_bridge.provisioner import PLACE_PREFIX, SWEEP_ATTEMPTS, ProvisionerLauncher

pytestmark = pytest.mark.anyio
_HERE = Path(__file__).parent
# Another loopback address: gateway_provisioners launches a kernel for 127.0.0.1 as a local child
# process, but over ssh (nohup, detached: nothing on the host watches our server) for this one.
REMOTE_HOST = "127.0.0.2"


def _write_local_spec(root: Path, name: str) -> Path:
    spec_dir = root / name
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name,
        "language": "python",
        "metadata": {"kernel_provisioner": {"provisioner_name": "local-provisioner"}},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return root


async def test_provisioner_kernelspec_runs_cells_and_restarts(tmp_path: Path) -> None:
    specs = _write_local_spec(tmp_path / "kernels", "named-local")
    launcher = ProvisionerLauncher("named-local", kernel_dirs=[str(specs)])
    assert launcher.provisioner_name() == "local-provisioner"
    pool = KernelPool(0, launcher=launcher)
    try:
        s = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "snap")
        assert (await s.execute("y = 6 * 7\nprint(y)").result()).output == "42\n"
        report = await s.restart()
        assert "y" in report
        assert (await s.execute("print(y)").result()).output == "42\n"
    finally:
        await pool.aclose()


async def test_provisioner_kernel_death_is_detected(tmp_path: Path) -> None:
    specs = _write_local_spec(tmp_path / "kernels", "dies")
    pool = KernelPool(0, launcher=ProvisionerLauncher("dies", kernel_dirs=[str(specs)]))
    try:
        s = await pool.acquire(cwd=tmp_path)
        result = await s.execute("import os\nos._exit(3)").result()
        assert result.status == "died"
        assert (await s.execute("print('fresh')").result()).output == "fresh\n"
    finally:
        await pool.aclose()


def test_unknown_kernelspec_names_the_setting_to_fix(tmp_path: Path) -> None:
    launcher = ProvisionerLauncher("no-such-spec", kernel_dirs=[str(tmp_path)])
    with pytest.raises(KernelStartError, match="kernel_name"):
        launcher.provisioner_name()


# -- SSH ("distributed") provisioner against an sshd on 127.0.0.1 ---------------------------------


@dataclass
class Sshd:
    port: int
    home: Path  # HOME for the client side: ~/.ssh/id_ed25519 is the authorized key
    kernels: Path  # kernelspec directory holding the ssh kernelspec


def _ssh_unavailable() -> str | None:
    if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
        return "no sshd here (apt-get install openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "no ssh-keygen here (apt-get install openssh-client)"
    if os.geteuid() != 0:
        return "sshd with a throwaway config needs root here"
    try:
        import gateway_provisioners  # noqa: F401
    except ImportError:
        return "gateway-provisioners is not installed (pip install 'continual-acp[distributed]')"
    return None


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    reason = _ssh_unavailable()
    if reason is not None and os.geteuid() != 0 and "needs root" in reason:
        pytest.skip(reason)  # not a missing package: this user cannot run a throwaway sshd
    if reason is not None:
        missing(reason)
    base = tmp_path_factory.mktemp("sshd")
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / "hostkey")], check=True)
    key = home / ".ssh" / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    authorized = base / "authorized_keys"
    authorized.write_text(Path(f"{key}.pub").read_text())
    authorized.chmod(0o600)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    # paramiko (the provisioner's ssh client) rejects unknown host keys.
    host_key = (base / "hostkey.pub").read_text().split()
    (home / ".ssh" / "known_hosts").write_text(f"[{REMOTE_HOST}]:{port} {host_key[0]} {host_key[1]}\n")
    config = base / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nListenAddress {REMOTE_HOST}\nHostKey {base / 'hostkey'}\nAuthorizedKeysFile {authorized}\n"
        f"PidFile {base / 'sshd.pid'}\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    sshd_bin = shutil.which("sshd") or "/usr/sbin/sshd"
    log = (base / "sshd.log").open("wb")
    process = subprocess.Popen(
        [sshd_bin, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 30
    while not _port_open(port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"sshd did not start: {(base / 'sshd.log').read_text()}")
        time.sleep(0.1)  # polling a real server's readiness against the deadline above
    prefix = base / "prefix"
    subprocess.run(
        [
            str(Path(sys.executable).parent / "jupyter-ssh-spec"),
            "install",
            f"--prefix={prefix}",
            "--kernel-name=ssh_py",
            "--remote-hosts=127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    kernels = prefix / "share" / "jupyter" / "kernels"
    spec_file = kernels / "ssh_py" / "kernel.json"
    spec = json.loads(spec_file.read_text())
    spec["argv"][0] = sys.executable  # the remote host's Python with ipykernel (this one, here)
    spec_file.write_text(json.dumps(spec))
    try:
        yield Sshd(port, home, kernels)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_ssh_provisioner_runs_a_session_on_localhost(sshd: Sshd, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HOME": str(sshd.home),
        "GP_SSH_PORT": str(sshd.port),
        "GP_REMOTE_HOSTS": "127.0.0.1",
        "GP_UNAUTHORIZED_USERS": "nobody-in-particular",  # root is refused by default
    }
    done = subprocess.run(
        [
            sys.executable,
            str(_HERE / "provisioner_driver.py"),
            "ssh_py",
            str(sshd.kernels),
            str(tmp_path),
            str(tmp_path / "ledger.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["provisioner"] == "distributed-provisioner"
    assert out["first"] == ["ok", f"42 {tmp_path}\n"]
    assert out["interrupt"] == ["interrupted", "KeyboardInterrupt"]
    assert "value" in out["restart_report"]
    assert out["after_restart"] == ["ok", "42\n"]
    # Recorded while it ran (one entry: the restart's old kernel was forgotten), forgotten at shutdown.
    assert len(out["ledger_while_running"]) == 1
    assert json.loads((tmp_path / "ledger.json").read_text()) == []
    # Every process the kernels ran as (launchers and their forked signal listeners) is gone.
    deadline = time.monotonic() + 15
    while (left := _processes_running_from(sshd.kernels)) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling /proc for exits against the deadline above
    assert left == []


def _ssh_env(sshd: Sshd, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(sshd.home),
        "GP_SSH_PORT": str(sshd.port),
        "GP_UNAUTHORIZED_USERS": "nobody-in-particular",  # root is refused by default
        "KERNEL_REMOTE_HOST": REMOTE_HOST,  # over ssh, as to another machine
        "GP_KERNEL_LOG_DIR": str(tmp_path),  # the "remote" kernel's log, not in /tmp
    }


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ssh_kernel_left_by_a_sigkilled_server_is_ended_by_the_next_start(sshd: Sshd, tmp_path: Path) -> None:
    env = _ssh_env(sshd, tmp_path)
    ledger = tmp_path / "provisioner-kernels.json"
    driver = str(_HERE / "provisioner_driver.py")
    server = subprocess.Popen(
        [sys.executable, driver, "hold", "ssh_py", str(sshd.kernels), str(tmp_path), str(ledger)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([server.stdout], [], [], 180)
        assert ready, "the server did not start its ssh kernel within 180 s"
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line, server.communicate(timeout=30)[1][-3000:]
        started = json.loads(line)
    finally:
        server.kill()  # SIGKILL: the server runs no cleanup
        server.communicate(timeout=30)
    assert started["status"] == "ok"
    pid = started["pid"]
    try:
        _sweep_and_check(sshd, env, ledger, pid)
    finally:
        if _alive(pid):  # the sweep failed: do not leave the kernel (and its listener) behind
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def _sweep_and_check(sshd: Sshd, env: dict[str, str], ledger: Path, pid: int) -> None:
    driver = str(_HERE / "provisioner_driver.py")
    (entry,) = json.loads(ledger.read_text())
    assert entry["info"]["provisioner_info"]["pid"] == pid
    assert _alive(pid), "the ssh kernel did not outlive its server: nothing to sweep"

    done = subprocess.run(
        [sys.executable, driver, "sweep", "ssh_py", str(sshd.kernels), str(ledger)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"ended": [entry["kernel_id"]]}
    deadline = time.monotonic() + 15
    while (left := _processes_running_from(sshd.kernels)) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling /proc for exits against the deadline above
    assert not _alive(pid)
    assert left == []  # its launcher's signal listener too
    assert json.loads(ledger.read_text()) == []


def _processes_running_from(directory: Path) -> list[str]:
    """Command lines of live processes that name a file under `directory`."""
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if str(directory).encode() in cmdline and state != "Z":
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace")[:200])
    return found


async def test_provisioner_check_names_a_provisioner_that_is_not_installed(tmp_path: Path) -> None:
    specs = _write_local_spec(tmp_path / "kernels", "odd")
    spec_file = specs / "odd" / "kernel.json"
    spec = json.loads(spec_file.read_text())
    spec["metadata"]["kernel_provisioner"]["provisioner_name"] = "no-such-provisioner"
    spec_file.write_text(json.dumps(spec))
    with pytest.raises(KernelStartError, match=r"no-such-provisioner.*not installed"):
        await ProvisionerLauncher("odd", kernel_dirs=[str(specs)]).check()


async def test_provisioner_check_passes_for_an_installed_provisioner(tmp_path: Path) -> None:
    specs = _write_local_spec(tmp_path / "kernels", "fine")
    assert await ProvisionerLauncher("fine", kernel_dirs=[str(specs)]).check() == (
        "kernelspec fine uses the local-provisioner"
    )


# -- the ledger rule of the provisioner sweep (no kernel needed) --------------------------------------


def _dead_owner() -> str:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return owner_tag(dead.pid)


async def test_provisioner_sweep_drops_an_entry_without_provisioner_state(tmp_path: Path) -> None:
    ledger = KernelLedger(tmp_path / "ledger.json")
    ledger.add(PLACE_PREFIX + "ssh_py", "k-1", _dead_owner(), {"provisioner": "distributed-provisioner"})
    launcher = ProvisionerLauncher("ssh_py", ledger_path=ledger.path)
    assert await launcher.sweep() == []
    assert json.loads(ledger.path.read_text()) == []


async def test_provisioner_sweep_retries_a_kernel_it_cannot_end_then_gives_up(tmp_path: Path) -> None:
    ledger = KernelLedger(tmp_path / "ledger.json")
    spec = {"argv": ["python"], "display_name": "x", "language": "python"}
    spec["metadata"] = {"kernel_provisioner": {"provisioner_name": "no-such-provisioner"}}
    info = {"spec": spec, "resource_dir": str(tmp_path), "provisioner_info": {"kernel_id": "k-2"}}
    ledger.add(PLACE_PREFIX + "gone_py", "k-2", _dead_owner(), info)
    attempts = []
    for _start in range(SWEEP_ATTEMPTS):
        assert await ProvisionerLauncher("any", ledger_path=ledger.path).sweep() == []
        attempts.append([e.get("attempts") for e in json.loads(ledger.path.read_text())])
    assert attempts == [[1], [2], []]


async def test_provisioner_sweep_leaves_kernels_of_a_live_server_alone(tmp_path: Path) -> None:
    ledger = KernelLedger(tmp_path / "ledger.json")
    ledger.add(PLACE_PREFIX + "ssh_py", "k-3", owner_tag(os.getppid()), {"provisioner_info": {}})
    assert await ProvisionerLauncher("ssh_py", ledger_path=ledger.path).sweep() == []
    assert [e["kernel_id"] for e in json.loads(ledger.path.read_text())] == ["k-3"]
