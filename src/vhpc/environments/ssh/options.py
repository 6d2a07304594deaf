"""Options of the ``ssh`` kind (``-e ssh:host=node7,user=me,cpus=0-3``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from vhpc.environments.options import EnvOptions, IndexList


def remote_workdir(workdir: str) -> str:
    """``workdir`` as given to the remote shell, which starts in the login's home: ``~`` and
    ``~/x`` become ``.`` and ``x`` (the commands quote the path, so a ``~`` would otherwise be
    a folder literally named ``~``).  Raises ValueError for ``~user/...`` (not expanded)."""
    w = workdir.rstrip("/") or "/"
    if w == "~":
        return "."
    if w.startswith("~/"):
        return w[2:].lstrip("/").rstrip("/") or "."
    if w.startswith("~"):
        raise ValueError(f"workdir={workdir!r}: ~user is not expanded: give a path relative to "
                         "the remote home (.cache/vhpc) or an absolute one")
    return w


class SshOptions(EnvOptions):
    """``ssh``: ``host`` (name, address or ssh_config alias), ``user``, ``port``, ``identity``
    (as ``ssh -l -p -i``), ``cpus`` / ``nodes`` / ``membind`` binding on the remote host as for
    ``native``, ``workdir`` (remote directory for vhpc's files)."""

    host: str = Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._:\[\]%-]+$")
    user: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    port: int | None = Field(None, ge=1, le=65535)
    identity: str | None = Field(None, min_length=1, max_length=4096)
    cpus: IndexList | None = None
    nodes: IndexList | None = None
    membind: IndexList | None = None
    workdir: str = Field(".cache/vhpc", min_length=1, max_length=4096)

    @field_validator("workdir")
    @classmethod
    def _home_relative(cls, v):
        """``~/x`` is the remote home's ``x``; ``~user/...`` is refused (never expanded)."""
        remote_workdir(v)
        return v

    @field_validator("host", "user")
    @classmethod
    def _not_an_option(cls, v, info):
        """A host or user starting with ``-`` would reach ssh(1) as an option (``-V``,
        ``-oProxyCommand=...``)."""
        if v is not None and v.startswith("-"):
            raise ValueError(f"{info.field_name}={v!r} starts with '-', which ssh would read "
                             f"as an option: give a {'host name or address' if info.field_name == 'host' else 'login name'}")
        return v
