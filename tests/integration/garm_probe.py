"""Talk to GARM from inside the garm container (standard library only, run by python3 there).

The integration helpers send this file's source as an argument of ``python3 -c`` over
``juju ssh``; it is never imported by the tests. Admin credentials, when needed, arrive as a JSON
object ``{"username": ..., "password": ...}`` on standard input so that they never appear on a
command line (Juju and jubilant log command lines). The result is one JSON line on standard
output; a token is never printed.

Usage::

    python3 garm_probe.py get PATH           # GET without auth
    python3 garm_probe.py login              # POST /api/v1/auth/login; reports the status only
    python3 garm_probe.py admin-get PATH     # log in, then GET with the bearer token
    python3 garm_probe.py agent-image        # the image's garm-agent: manifest, digests, version
"""

import hashlib
import json
import subprocess
import sys
import urllib.error
import urllib.request

GARM_URL = "http://127.0.0.1:8080"
LOGIN_PATH = "/api/v1/auth/login"
TIMEOUT = 30
AGENT_MANIFEST = "/opt/garm-agent/manifest.json"


def _request(method, path, body=None, token=""):
    """Return (status, decoded body); status 0 means GARM could not be reached."""
    data = None if body is None else json.dumps(body).encode()
    # The URL is always GARM on loopback over plain HTTP.
    request = urllib.request.Request(GARM_URL + path, data=data, method=method)  # noqa: S310
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
            return response.status, _decode(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _decode(exc.read())
    except (urllib.error.URLError, OSError) as exc:
        return 0, "unreachable: " + type(exc).__name__


def _decode(raw):
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _login():
    """Log in with the credentials on stdin; return (status, token)."""
    credentials = json.loads(sys.stdin.read())
    status, body = _request(
        "POST",
        LOGIN_PATH,
        {"username": credentials["username"], "password": credentials["password"]},
    )
    token = body.get("token", "") if isinstance(body, dict) else ""
    return status, token or ""


def _agent_image():
    """The image's garm-agent manifest, each binary's digest, and what the amd64 build prints."""
    with open(AGENT_MANIFEST, encoding="utf-8") as source:
        manifest = json.load(source)
    digests = {}
    for tool in manifest["tools"]:
        with open(tool["path"], "rb") as binary:
            digests[tool["path"]] = hashlib.sha256(binary.read()).hexdigest()
    # The pod runs on amd64: that build runs here; the arm64 one is only checked by digest.
    amd64 = [t["path"] for t in manifest["tools"] if t["os_arch"] == "amd64"]
    ran = subprocess.run(
        [*amd64[:1], "version"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    return {"manifest": manifest, "digests": digests, "version": [ran.returncode, ran.stdout]}


def main(argv):
    """Run one probe command and print its JSON result."""
    command = argv[0] if argv else ""
    if command == "get" and len(argv) == 2:
        status, body = _request("GET", argv[1])
        result = {"status": status, "body": body}
    elif command == "login" and len(argv) == 1:
        status, token = _login()
        result = {"status": status, "token_received": bool(token)}
    elif command == "admin-get" and len(argv) == 2:
        status, token = _login()
        if status != 200 or not token:
            result = {"status": status, "body": "login failed"}
        else:
            status, body = _request("GET", argv[1], token=token)
            result = {"status": status, "body": body}
    elif command == "agent-image" and len(argv) == 1:
        result = _agent_image()
    else:
        sys.stderr.write("usage: garm_probe.py get PATH | login | admin-get PATH | agent-image\n")
        return 2
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
