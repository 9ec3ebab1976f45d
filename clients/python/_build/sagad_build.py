"""A PEP 517 build backend for sagad_client, standard library only.

It writes a pure-Python wheel (the sagad_client package and its metadata)
with zipfile, so installing the client needs no setuptools and no package
index. Only what pip asks of a backend is here: wheel (and editable wheel)
requirements and builds, and an sdist.
"""
import base64
import hashlib
import os
import tarfile
import zipfile

NAME, DIST, VERSION = "sagad-client", "sagad_client", "0.4.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"
METADATA = """Metadata-Version: 2.1
Name: {name}
Version: {version}
Summary: Client for sagad, the saga coordinator: submissions and agent runs
Requires-Python: >=3.9
License: Apache-2.0
""".format(name=NAME, version=VERSION)
WHEEL = "Wheel-Version: 1.0\nGenerator: sagad_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _write_wheel(directory, files):
    """files: [(archive path, bytes)]; returns the wheel's file name."""
    info = "%s-%s.dist-info" % (DIST, VERSION)
    files = list(files) + [(info + "/METADATA", METADATA.encode()),
                           (info + "/WHEEL", WHEEL.encode())]
    record = [_record_line(p, d) for p, d in files] + [info + "/RECORD,,"]
    name = "%s-%s-%s.whl" % (DIST, VERSION, TAG)
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(path, data)
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return name


def _package_files():
    out = []
    pkg = os.path.join(ROOT, DIST)
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py") or f == "py.typed":
            with open(os.path.join(pkg, f), "rb") as h:
                out.append((DIST + "/" + f, h.read()))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file puts the source tree on the path.
    return _write_wheel(wheel_directory, [(DIST + ".pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    name = "%s-%s" % (DIST, VERSION)
    path = os.path.join(sdist_directory, name + ".tar.gz")
    with tarfile.open(path, "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/sagad_build.py"] + \
                [p for p, _ in _package_files()]:
            t.add(os.path.join(ROOT, rel), arcname=name + "/" + rel)
        pkg_info = os.path.join(sdist_directory, "PKG-INFO")
        with open(pkg_info, "w") as f:
            f.write(METADATA)
        t.add(pkg_info, arcname=name + "/PKG-INFO")
        os.remove(pkg_info)
    return name + ".tar.gz"
