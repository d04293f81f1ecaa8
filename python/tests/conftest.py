import pathlib
import sys

# Run from the source tree without installing: the package is python/lossjit, the library is found
# in build/ (or LOSSJIT_LIBRARY).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def torch_extensions_dir(tmp_path_factory):
    """The native path (lossjit.build_native()) is built into a scratch folder for the session,
    not the user's cache; test_native.py and test_gpu.py share it."""
    env = pytest.MonkeyPatch()
    env.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path_factory.mktemp("torch_extensions")))
    yield
    env.undo()
