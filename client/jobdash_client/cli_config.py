"""Where the `jobdash` command finds its server and token: the flags, else JOBDASH_URL /
JOBDASH_TOKEN, else the config file ($JOBDASH_CONFIG or ~/.config/jobdash/config.yaml,
keys `server` and `token`), each setting on its own."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml


class ConfigError(Exception):
    """Something the user must fix before the command can talk to a server: one line."""


@dataclass(frozen=True)
class Settings:
    server: str
    token: str


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("JOBDASH_CONFIG"):
        return Path(env["JOBDASH_CONFIG"]).expanduser()
    return Path("~/.config/jobdash/config.yaml").expanduser()


def read_config(path: Path) -> dict[str, str]:
    """The file's settings; {} when it does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not YAML: {str(error).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with the keys server and token")
    return {key: str(data[key]) for key in ("server", "token") if data.get(key)}


def resolve(
    server: str | None, token: str | None, env: Mapping[str, str] | None = None, path: Path | None = None
) -> Settings:
    """Flag, else environment, else config file, for the server and the token each."""
    env = os.environ if env is None else env
    path = config_path(env) if path is None else path
    server = server or env.get("JOBDASH_URL")
    token = token or env.get("JOBDASH_TOKEN")
    if not (server and token):
        stored = read_config(path)
        server = server or stored.get("server")
        token = token or stored.get("token")
    if not server:
        raise ConfigError(f"no server configured: pass --server URL, set JOBDASH_URL, or run `jobdash login` ({path})")
    if not token:
        raise ConfigError(f"no token configured: pass --token, set JOBDASH_TOKEN, or run `jobdash login` ({path})")
    if not server.startswith(("http://", "https://")):
        raise ConfigError(f"the server must be an http:// or https:// URL, not {server!r}")
    return Settings(server=server, token=token)


def write_config(path: Path, server: str, token: str) -> None:
    """Write the file readable by its owner only (mode 0600, also when it existed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump({"server": server, "token": token}, sort_keys=False)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text)
