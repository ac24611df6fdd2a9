# lit configuration for Weft's FileCheck suites (Dialect, Import, Tools, ...).
import os

import lit.formats

config.name = "Weft"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.weft_obj_root, "test")
config.excludes = ["fixtures", "unit", "fuzz", "gpu", "Inputs", "detect", "docs",
                   "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

# Weft's tools first, then LLVM's FileCheck, not and count.
path = os.pathsep.join(config.weft_tool_dirs + [config.llvm_tools_dir,
                                                config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
config.substitutions.append(("%fixtures", os.path.join(config.test_source_root, "fixtures")))
# One kernel cache for the whole suite, so plans share compiled kernels.
config.substitutions.append(("%kernel_cache", os.path.join(config.weft_obj_root, "test", "kernel-cache")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# The Python that runs lit (CMake's Python3_EXECUTABLE, with numpy), not the
# first python3 on PATH, which may lack it.
import sys
config.substitutions.append(("%python", sys.executable))
# weft-serve's own path, for tests that copy it beside a fake weft-compile.
config.substitutions.append(("%weft_serve", os.path.join(config.weft_obj_root, "tools", "weft-serve",
                                                         "weft-serve")))
# weft-detect against a fake NVML and the machines it describes.
config.substitutions.append(("%fake_nvml", config.fake_nvml))
config.substitutions.append(("%nvml_boxes", os.path.join(config.test_source_root, "detect", "boxes")))

# Machines without an NVIDIA driver (CI): tests of what a user sees there.
if not os.path.exists("/dev/nvidiactl"):
    config.available_features.add("no-gpu")
