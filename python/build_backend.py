"""PEP 517 build backend of Tessera's Python package, on CMake.

build_wheel configures the checkout with TESSERA_PYTHON=ON for the running interpreter (tests and
benchmarks off), builds it in build-python/ (kept between builds; ccache is used when present),
installs it into a staging directory that becomes the package `tessera/` (module at its root,
bin/, lib/, share/, include/ beneath), adds python/tessera/*.py, and writes the wheel.
Environment: TESSERA_JOBS (build parallelism), TESSERA_CMAKE_ARGS (extra configure arguments).
"""
import base64
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NAME = "tessera"
_VERSION = "0.1.0"


def _tag():
    impl = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (impl, impl, plat)


def _run(cmd, **kw):
    print("build_backend:", " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, **kw)


def _build_tree(stage):
    build = os.path.join(_ROOT, "build-python")
    args = [
        "cmake", "-S", _ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
        "-DTESSERA_PYTHON=ON", "-DTESSERA_BUILD_TESTS=OFF", "-DTESSERA_BUILD_BENCHMARKS=OFF",
        "-DCMAKE_INSTALL_LIBDIR=lib", "-DPython_EXECUTABLE=" + sys.executable,
        "-DPYTHON_EXECUTABLE=" + sys.executable,
    ]
    if shutil.which("ccache"):
        args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
    args += shlex.split(os.environ.get("TESSERA_CMAKE_ARGS", ""))
    env = dict(os.environ)
    env.setdefault("CCACHE_BASEDIR", _ROOT)
    env.setdefault("CCACHE_NOHASHDIR", "1")
    _run(args, env=env)
    jobs = os.environ.get("TESSERA_JOBS", str(os.cpu_count() or 1))
    _run(["cmake", "--build", build, "-j", jobs], env=env)
    _run(["cmake", "--install", build, "--prefix", stage], env=env)


def _record_line(path, arcname):
    with open(path, "rb") as f:
        data = f.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: An inference engine for heterogeneous systems\n"
            "Requires-Python: >=3.9\nRequires-Dist: numpy\n" % (_NAME, _VERSION))


def _c_sdk_only(arcname):
    """Files of the installed tree the Python package does not need: the C/C++ library, its
    headers and its CMake and pkg-config files (install the tree with CMake for those)."""
    parts = arcname.split(os.sep)
    if len(parts) < 3 or parts[0] != _NAME:
        return False
    if parts[1] == "include":
        return True
    return parts[1] == "lib" and (parts[2].startswith("libtessera.so") or
                                  parts[2] in ("cmake", "pkgconfig"))


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = "%s-%s.dist-info" % (_NAME, _VERSION)
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory() as tmp:
        package = os.path.join(tmp, _NAME)
        _build_tree(package)
        for name in os.listdir(os.path.join(_ROOT, "python", _NAME)):
            if name.endswith(".py"):
                shutil.copy(os.path.join(_ROOT, "python", _NAME, name), package)
        dist_info = "%s-%s.dist-info" % (_NAME, _VERSION)
        os.makedirs(os.path.join(tmp, dist_info))
        with open(os.path.join(tmp, dist_info, "METADATA"), "w") as f:
            f.write(_metadata())
        with open(os.path.join(tmp, dist_info, "WHEEL"), "w") as f:
            f.write("Wheel-Version: 1.0\nGenerator: tessera build_backend\n"
                    "Root-Is-Purelib: false\nTag: %s\n" % _tag())
        wheel_name = "%s-%s-%s.whl" % (_NAME, _VERSION, _tag())
        records = []
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                             zipfile.ZIP_DEFLATED) as whl:
            for top in (_NAME, dist_info):
                for dirpath, _, files in os.walk(os.path.join(tmp, top)):
                    for name in sorted(files):
                        path = os.path.join(dirpath, name)
                        arcname = os.path.relpath(path, tmp)
                        if os.path.islink(path) or _c_sdk_only(arcname):
                            continue
                        zi = zipfile.ZipInfo.from_file(path, arcname)
                        zi.compress_type = zipfile.ZIP_DEFLATED
                        with open(path, "rb") as f:
                            whl.writestr(zi, f.read())
                        records.append(_record_line(path, arcname))
            record = "%s/RECORD" % dist_info
            whl.writestr(record, "\n".join(records + [record + ",,"]) + "\n")
    return wheel_name
