"""A real Jupyter Kernel Gateway on 127.0.0.1 for the gateway tests (random port, random token)."""

from __future__ import annotations

import http.client
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Gateway:
    url: str
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _PortTaken(Exception):
    """Something other than the gateway answers on its port: the free port was taken between
    choosing it and the gateway binding it (by a kernel of another test worker: a ZMQ greeting)."""


def _answers(url: str, token: str) -> bool:
    request = urllib.request.Request(url + "/api", headers={"Authorization": f"token {token}"})
    unverified = ssl._create_unverified_context()  # readiness only; the tests check TLS themselves
    try:
        with urllib.request.urlopen(request, timeout=2, context=unverified) as response:
            return bool(response.status == 200)
    except http.client.HTTPException as exc:
        raise _PortTaken(str(exc)) from exc
    except (urllib.error.URLError, OSError):
        return False


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 (cert, key) made with openssl."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def start_gateway(directory: Path, timeout: float = 90.0, tls: tuple[Path, Path] | None = None) -> Gateway:
    """Start `jupyter kernelgateway` and wait (polling /api against a deadline) until it answers; on
    another port when the one chosen was taken before the gateway bound it."""
    for attempt in range(3):
        try:
            return _start_gateway(directory / f"attempt-{attempt}" if attempt else directory, timeout, tls)
        except _PortTaken:
            continue
    raise RuntimeError("the kernel gateway's port was taken by another process three times")


def _start_gateway(directory: Path, timeout: float, tls: tuple[Path, Path] | None) -> Gateway:
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    token = secrets.token_hex(16)
    log = directory / "gateway.log"
    handle = log.open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env["JUPYTER_RUNTIME_DIR"] = str(directory / "runtime")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernel_gateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}",
            "--KernelGatewayApp.port_retries=0",
            f"--KernelGatewayApp.auth_token={token}",
            "--JupyterWebsocketPersonality.list_kernels=True",  # the tests list kernels to check deletes
            *(
                [f"--KernelGatewayApp.certfile={tls[0]}", f"--KernelGatewayApp.keyfile={tls[1]}"]
                if tls
                else []
            ),
        ],
        cwd=directory,
        stdout=handle,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    handle.close()
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    gateway = Gateway(url, token, process, log)
    deadline = time.monotonic() + timeout
    try:
        while not _answers(url, token):
            if process.poll() is not None or time.monotonic() > deadline:
                if "Address already in use" in gateway.log_tail():
                    raise _PortTaken(f"port {port}")
                raise RuntimeError(f"the kernel gateway did not come up; its log:\n{gateway.log_tail()}")
            time.sleep(0.1)  # polling a real server's readiness against the deadline above
    except BaseException:
        stop_gateway(gateway)
        raise
    return gateway


def stop_gateway(gateway: Gateway) -> None:
    """Stop the gateway and its kernels (they are in its process group)."""
    if gateway.process.poll() is None:
        gateway.process.send_signal(signal.SIGTERM)
        try:
            gateway.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(gateway.process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    gateway.process.wait()
