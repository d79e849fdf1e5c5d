"""pyvenv.py - run a test script under a venv that holds PyPI packages.

    import pyvenv
    pyvenv.reexec(VENV, ["openai"], "import openai")   # returns inside the venv

The packages are not Debian ones: the first run makes a virtual environment
at VENV (python3-venv) and pip-installs them from PyPI, later runs reuse it;
then the script runs again under the venv's Python with the same arguments.
Without the network that first run FAILS, saying so: a skipped client test
would pass unseen.
"""
import os
import subprocess
import sys


def python(venv, packages, probe):
    """VENV's Python, the venv made and packages installed if `probe` (Python
    code) does not run there yet."""
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py) and subprocess.run([py, "-c", probe],
                                             stderr=subprocess.DEVNULL).returncode == 0:
        return py
    if subprocess.run([sys.executable, "-m", "venv", "--clear", venv]).returncode:
        sys.exit("FAIL: '%s -m venv' failed: is python3-venv installed "
                 "(scripts/deps.sh)?" % sys.executable)
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "-q",
           "--timeout", "30"] + list(packages)
    if subprocess.run(pip).returncode:
        sys.exit("FAIL: pip could not install %s from PyPI into %s: this test needs the "
                 "network (https://pypi.org) once" % (", ".join(packages), venv))
    return py


def reexec(venv, packages, probe):
    """Unless this is VENV's Python already, exec the script again under it."""
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        py = python(venv, packages, probe)
        os.execv(py, [py] + sys.argv)
