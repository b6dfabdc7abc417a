{
  "targets": [
    {
      "target_name": "tqserve_engine",
      "sources": [
        "csrc/addon.cpp",
        "csrc/attention.cpp",
        "csrc/bf16.cpp",
        "csrc/block_pool.cpp",
        "csrc/checkpoint.cpp",
        "csrc/engine.cpp",
        "csrc/engine_thread.cpp",
        "csrc/invariant_gemm.cpp",
        "csrc/kv_cache.cpp",
        "csrc/microbench.cpp",
        "csrc/model_config.cpp",
        "csrc/native_model.cpp",
        "csrc/onednn.cpp",
        "csrc/packed_linear.cpp",
        "csrc/readout.cpp",
        "csrc/rowwise.cpp",
        "csrc/safetensors.cpp",
        "csrc/scripted_model.cpp",
        "csrc/shared_prefix.cpp",
        "csrc/softmax.cpp",
        "csrc/swiglu.cpp",
        "csrc/transformer.cpp"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "/usr/include/torch/csrc/api/include"
      ],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_CPP_EXCEPTIONS", "NODE_ADDON_API_CPP_EXCEPTIONS_ALL"],
      "cflags!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      # As CMake's Release build compiles (-O3; GNU dialect, so FMA contraction
      # is on): both builds then give bit-identical answers.
      # -fopenmp as in CMakeLists.txt: ATen's parallel_for is serial without it.
      "cflags_cc": ["-std=gnu++17", "-O3", "-frtti", "-fexceptions", "-fopenmp"],
      "ldflags": ["-fopenmp"],
      "libraries": ["-ltorch", "-ltorch_cpu", "-lc10", "-ldnnl"]
    }
  ]
}
