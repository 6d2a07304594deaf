"""vhpc guest agent: runs inside the guest as its init, stdlib only.

Protocol (newline-delimited JSON over the virtio-serial port named ``vhpc.agent``):

* on start the agent sends ``{"event": "ready", "uname": ..., "ncpus": ...}``;
* request ``{"id": N, "op": "run", "argv": [...], "env": {...}, "cwd": "/tmp",
  "timeout": seconds}`` → reply ``{"id": N, "rc": int, "stdout": str, "stderr": str,
  "elapsed": seconds, "timed_out": bool}``; a timed-out command's process group is killed;
* request ``{"id": N, "op": "read", "path": P}`` → ``{"id": N, "data": str}`` or ``"error"``.

The host stops the VM with QMP ``quit``; the agent never needs to power off.
"""

import json
import os
import resource
import signal
import subprocess
import sys
import time

OUTPUT_LIMIT = 4 << 20  # bytes kept per stream


def find_port(name="vhpc.agent"):
    base = "/sys/class/virtio-ports"
    for _ in range(200):
        if os.path.isdir(base):
            for port in os.listdir(base):
                try:
                    with open(os.path.join(base, port, "name")) as f:
                        if f.read().strip() == name:
                            return "/dev/" + port
                except OSError:
                    pass
        time.sleep(0.05)
    raise SystemExit("vhpc-agent: virtio-serial port %s not found" % name)


def run(req):
    env = dict(os.environ)
    env.update(req.get("env") or {})
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            req["argv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=req.get("cwd") or "/tmp", env=env, start_new_session=True,
        )
    except OSError as exc:
        return {"rc": 127, "stdout": "", "stderr": "vhpc-agent: %s" % exc,
                "elapsed": 0.0, "timed_out": False}
    timed_out = False
    try:
        out, err = proc.communicate(timeout=req.get("timeout"))
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "rusage": {"user_s": ru1.ru_utime - ru0.ru_utime, "sys_s": ru1.ru_stime - ru0.ru_stime,
                   "minflt": ru1.ru_minflt - ru0.ru_minflt, "majflt": ru1.ru_majflt - ru0.ru_majflt,
                   "nvcsw": ru1.ru_nvcsw - ru0.ru_nvcsw, "nivcsw": ru1.ru_nivcsw - ru0.ru_nivcsw},
        "rc": proc.returncode,
        "stdout": out[-OUTPUT_LIMIT:].decode("utf-8", "replace"),
        "stderr": err[-OUTPUT_LIMIT:].decode("utf-8", "replace"),
        "elapsed": time.monotonic() - start,
        "timed_out": timed_out,
    }


def read(req):
    try:
        with open(req["path"], "rb") as f:
            return {"data": f.read().decode("utf-8", "replace")}
    except OSError as exc:
        return {"error": str(exc)}


def main():
    os.environ.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    os.environ["HOME"] = "/tmp"
    os.environ["TMPDIR"] = "/tmp"
    fd = os.open(find_port(), os.O_RDWR)
    port = os.fdopen(fd, "r+b", buffering=0)

    def send(obj):
        port.write((json.dumps(obj) + "\n").encode())

    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    send({"event": "ready", "uname": os.uname().release, "ncpus": os.cpu_count(),
          "uptime": uptime})
    buf = b""
    while True:
        chunk = port.read(65536)
        if not chunk:
            time.sleep(0.01)
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            handler = {"run": run, "read": read}.get(req.get("op"))
            reply = handler(req) if handler else {"error": "unknown op %r" % req.get("op")}
            reply["id"] = req.get("id")
            send(reply)


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:  # noqa: BLE001 - init must say why it stopped
        print("vhpc-agent: fatal: %r" % (exc,), file=sys.stderr, flush=True)
        time.sleep(1)
        raise
