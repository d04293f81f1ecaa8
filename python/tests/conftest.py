import pathlib
import sys

# Run from the source tree without installing: the package is python/lossjit, the library is found
# in build/ (or LOSSJIT_LIBRARY).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
