{
  "targets": [
    {
      "target_name": "tqserve_engine",
      # Each folder of the engine's sources as one translation unit, written under build/units/ as gyp reads this file,
      # and the CPU kernels' tiles and rows file by file (scripts/compile_units.py says why): what CMakeLists.txt compiles.
      "sources": ["<!@(python3 scripts/compile_units.py --out build/units csrc/addon csrc/batch csrc/cache csrc/common csrc/engine csrc/kernels csrc/model csrc/runner csrc/vision)"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "/usr/include/torch/csrc/api/include",
        "csrc"
      ],
      # The CPU build, as CMakeLists.txt builds it on Debian's libtorch (the CUDA build is CMake's only).
      "defines": ["TQ_ONEDNN=1", "TQ_CUDA=0", "NAPI_VERSION=8", "NODE_ADDON_API_CPP_EXCEPTIONS", "NODE_ADDON_API_CPP_EXCEPTIONS_ALL"],
      "cflags!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      # As CMake's Release build compiles (-O3; GNU dialect, so FMA contraction
      # is on): both builds then give bit-identical answers.
      # -fopenmp as in CMakeLists.txt: ATen's parallel_for is serial without it.
      "cflags_cc": ["-std=gnu++17", "-O3", "-frtti", "-fexceptions", "-fopenmp"],
      "ldflags": ["-fopenmp"],
      "libraries": ["-ltorch", "-ltorch_cpu", "-lc10", "-ldnnl"]
    },
    {
      # The HTTP server's own addon: no torch (csrc/host_addon/).
      "target_name": "tqserve_host",
      "sources": ["csrc/host_addon/module.cpp", "csrc/host_addon/release_memory.cpp", "csrc/host_addon/shared_memory.cpp"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_CPP_EXCEPTIONS", "NODE_ADDON_API_CPP_EXCEPTIONS_ALL"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=gnu++17", "-O2", "-fexceptions"]
    }
  ]
}
