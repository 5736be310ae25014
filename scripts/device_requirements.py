"""aclcap's requirements held against what this Python has installed, one line each: where
device_check.sh installs aclcap with --no-deps (no network: pip cannot resolve), a missing
package or a torch out of range should fail in a second, not minutes into the run.
Usage: python scripts/device_requirements.py [CARRIED_DIR]; exit 1 when one is not met.
Packages found under CARRIED_DIR are marked "carried" (the wheels brought along)."""

from __future__ import annotations

import importlib.metadata as md
import sys

try:
    from packaging.requirements import Requirement
except ImportError:  # not every image has packaging; pip always vendors it
    from pip._vendor.packaging.requirements import Requirement


def check(requirements: list[str], carried: str | None = None) -> tuple[list[str], list[str]]:
    """(what is installed, one line per requirement; what is not met). Requirements of an
    extra (npu, dev, plot) are left out: the device check needs none of them."""
    found: list[str] = []
    unmet: list[str] = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            unmet.append(f"{req.name} is missing (aclcap needs {req.name}{req.specifier})")
            continue
        if not req.specifier.contains(dist.version, prereleases=True):
            unmet.append(f"{req.name} {dist.version} does not satisfy {req.name}{req.specifier}")
        origin = str(dist.locate_file(""))
        where = "carried" if carried and origin.startswith(carried) else "installed"
        found.append(f"{req.name} {dist.version} ({where})")
    return found, unmet


def main() -> int:
    found, unmet = check(md.requires("aclcap") or [], sys.argv[1] if len(sys.argv) > 1 else None)
    print("aclcap's requirements: " + ", ".join(found))
    if unmet:
        print("error: " + "; ".join(unmet) + ": add its wheel to scripts/fetch_device_wheels.sh "
              "(or use the torch the image has)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
