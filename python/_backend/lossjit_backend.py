"""The PEP 517 build backend of the lossjit Python package, in the standard library alone, so that
`pip install ./python` needs no package index and no setuptools (pyproject.toml: requires = [],
backend-path = ["_backend"]).

The wheel ships the C library the user built, liblossjit_c.so.1, inside the package (lossjit/), so
an installed lossjit needs neither the checkout nor LOSSJIT_LIBRARY; it is therefore a wheel for this
platform (py3-none-linux_x86_64), though any CPython 3 can use it (ctypes, no extension module).
The library is taken from LOSSJIT_LIBRARY (a path) or else from the checkout's CMake build folder,
../build/src/capi/liblossjit_c.so.1 relative to python/; without one the build stops and says how to
build it. An editable install (PEP 660, `pip install -e ./python`) is a .pth file naming python/:
the package then finds the library in the checkout's build folder, as with PYTHONPATH=python.

Nothing is written into the source tree: files go only to the directories pip passes (Python itself
may cache this module's bytecode in _backend/__pycache__/, which git ignores).
"""
import base64
import csv
import hashlib
import io
import os
import pathlib
import re
import sys
import sysconfig
import tarfile
import time
import zipfile

SOURCE = pathlib.Path(__file__).resolve().parents[1]  # python/ (or an unpacked sdist)
PACKAGE = "lossjit"
LIBRARY = "liblossjit_c.so.1"
BUILD_HINT = "cmake -S . -B build && cmake --build build"


# --- pyproject.toml ------------------------------------------------------------------------------

def _project():
    text = (SOURCE / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+ (Debian 12's python3)
    except ImportError:
        try:
            import tomli as tomllib  # the same parser, packaged for older Pythons
        except ImportError:
            raise RuntimeError("building lossjit's package reads pyproject.toml with tomllib: use Python 3.11 or "
                               "later, or install tomli") from None
    return tomllib.loads(text)["project"]


def _normalized(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    body = ""
    readme = project.get("readme")
    if isinstance(readme, str):
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + (SOURCE / readme).read_text(encoding="utf-8")
    return ("\n".join(lines) + "\n" + body).encode()


# --- the library ---------------------------------------------------------------------------------

_ELF_MACHINES = {"x86_64": 62, "aarch64": 183}  # e_machine of the platform's shared libraries


def _find_library():
    env = os.environ.get("LOSSJIT_LIBRARY")
    if env:
        path, origin = pathlib.Path(env), "LOSSJIT_LIBRARY"
    else:
        path, origin = SOURCE.parent / "build" / "src" / "capi" / LIBRARY, "the checkout's build folder"
    if not path.is_file():
        sys.exit(f"lossjit: no {LIBRARY} to put in the package: {path} ({origin}) does not exist.\n"
                 f"Build the C library first: {BUILD_HINT}\n"
                 f"(from the repository root), or set LOSSJIT_LIBRARY to the path of a built {LIBRARY}.")
    data = path.read_bytes()  # through the symlinks: liblossjit_c.so.1 -> liblossjit_c.so.1.0
    machine = _ELF_MACHINES.get(sysconfig.get_platform().rpartition("-")[2])
    if data[:4] != b"\x7fELF" or (machine and data[5] == 1 and int.from_bytes(data[18:20], "little") != machine):
        sys.exit(f"lossjit: {path} ({origin}) is not a shared library for {sysconfig.get_platform()}")
    return path, data


def _platform_tag():
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


# --- wheels --------------------------------------------------------------------------------------

def _timestamp():
    return time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", 315532800)), 315532800))[:6]


class _Wheel:
    def __init__(self, directory, project, tag, pure):
        self.name, self.version = _normalized(project["name"]), project["version"]
        self.tag, self.pure = tag, pure
        self.dist_info = f"{self.name}-{self.version}.dist-info"
        self.filename = f"{self.name}-{self.version}-{tag}.whl"
        self.zip = zipfile.ZipFile(os.path.join(directory, self.filename), "w", zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, arcname, data, mode=0o644):
        info = zipfile.ZipInfo(arcname, _timestamp())
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append((arcname, f"sha256={digest}", str(len(data))))

    def close(self, metadata):
        for name, data in _dist_info_files(metadata, self.tag, self.pure).items():
            self.add(f"{self.dist_info}/{name}", data)
        record = io.StringIO()
        writer = csv.writer(record, lineterminator="\n")
        writer.writerows(self.records + [(f"{self.dist_info}/RECORD", "", "")])
        info = zipfile.ZipInfo(f"{self.dist_info}/RECORD", _timestamp())
        info.external_attr = (0o100644) << 16
        self.zip.writestr(info, record.getvalue().encode(), zipfile.ZIP_DEFLATED)
        self.zip.close()
        return self.filename


def _dist_info_files(metadata, tag, pure):
    wheel = (f"Wheel-Version: 1.0\nGenerator: lossjit_backend (python/_backend)\n"
             f"Root-Is-Purelib: {'true' if pure else 'false'}\nTag: {tag}\n")
    return {"METADATA": metadata, "WHEEL": wheel.encode(), "top_level.txt": f"{PACKAGE}\n".encode()}


def _package_files():
    """The package's Python files and the native path's C++ source (lossjit/_native.cpp), relative to
    python/ (no __pycache__, no stray libraries)."""
    root = SOURCE / PACKAGE
    return sorted(p.relative_to(SOURCE).as_posix() for pattern in ("*.py", "*.cpp") for p in root.rglob(pattern)
                  if "__pycache__" not in p.parts)


HEADER = f"{PACKAGE}/include/lossjit/lossjit.h"  # the C API's header, which the native path is built with


def _header():
    """The header's bytes: from an unpacked sdist's package, else from the checkout's include/."""
    for path in (SOURCE / HEADER, SOURCE.parent / "include" / "lossjit" / "lossjit.h"):
        if path.is_file():
            return path.read_bytes()
    raise RuntimeError("lossjit: include/lossjit/lossjit.h not found beside python/ (the native path's source needs it)")


def _write_metadata(directory, tag, pure):
    project = _project()
    dist_info = pathlib.Path(directory) / f"{_normalized(project['name'])}-{project['version']}.dist-info"
    dist_info.mkdir()
    for name, data in _dist_info_files(_metadata(project), tag, pure).items():
        (dist_info / name).write_bytes(data)
    return dist_info.name


# --- the PEP 517 / PEP 660 hooks -----------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory, _platform_tag(), pure=False)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory, "py3-none-any", pure=True)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """lossjit/*.py, the native path's source and header, and lossjit/liblossjit_c.so.1 (the built library,
    symlinks followed)."""
    library, data = _find_library()
    project = _project()
    wheel = _Wheel(wheel_directory, project, _platform_tag(), pure=False)
    for name in _package_files():
        wheel.add(name, (SOURCE / name).read_bytes())
    wheel.add(HEADER, _header())
    wheel.add(f"{PACKAGE}/{LIBRARY}", data, mode=0o755)
    print(f"lossjit: packaged {library} as {PACKAGE}/{LIBRARY} in {wheel.filename}", file=sys.stderr)
    return wheel.close(_metadata(project))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A .pth file that puts python/ on sys.path: the checkout's package, its library from build/."""
    project = _project()
    wheel = _Wheel(wheel_directory, project, "py3-none-any", pure=True)
    wheel.add(f"__editable__.{wheel.name}-{wheel.version}.pth", f"{SOURCE}\n".encode())
    return wheel.close(_metadata(project))


def build_sdist(sdist_directory, config_settings=None):
    """pyproject.toml, README.md, the backend, the package's files and the C header; no library (building
    a wheel from it needs LOSSJIT_LIBRARY)."""
    project = _project()
    base = f"{_normalized(project['name'])}-{project['version']}"
    files = ["pyproject.toml", project.get("readme", "README.md"), "_backend/lossjit_backend.py"] + _package_files()
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", 315532800))

    def add(tar, name, data):
        info = tarfile.TarInfo(f"{base}/{name}")
        info.size, info.mtime, info.mode = len(data), mtime, 0o644
        tar.addfile(info, io.BytesIO(data))

    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name in files:
            add(tar, name, (SOURCE / name).read_bytes())
        add(tar, HEADER, _header())
        add(tar, "PKG-INFO", _metadata(project))
    return filename
