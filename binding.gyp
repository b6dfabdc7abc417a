{
  "targets": [
    {
      "target_name": "tqserve_engine",
      "sources": [
        "csrc/addon/addon.cpp",
        "csrc/addon/engine_thread.cpp",
        "csrc/addon/js_values.cpp",
        "csrc/batch/cascade_plan.cpp",
        "csrc/batch/pack_requests.cpp",
        "csrc/batch/shared_prefix.cpp",
        "csrc/batch/step_buckets.cpp",
        "csrc/batch/step_plan.cpp",
        "csrc/batch/visibility.cpp",
        "csrc/cache/block_pool.cpp",
        "csrc/cache/kv_cache.cpp",
        "csrc/cache/pending_boundaries.cpp",
        "csrc/engine/device.cpp",
        "csrc/engine/engine.cpp",
        "csrc/engine/host_allocator.cpp",
        "csrc/engine/paged_model.cpp",
        "csrc/engine/readout.cpp",
        "csrc/kernels/aten/aten_layer_kernels.cpp",
        "csrc/kernels/aten/fp8_linear.cpp",
        "csrc/kernels/shifted_layer_kernels.cpp",
        "csrc/kernels/cascade/aten_attention.cpp",
        "csrc/kernels/cascade/attention_merge.cpp",
        "csrc/kernels/cascade/cascade_layer_kernels.cpp",
        "csrc/kernels/cascade/flash_attention.cpp",
        "csrc/kernels/cascade/reference_attention.cpp",
        "csrc/kernels/fused/fused_layer_kernels.cpp",
        "csrc/kernels/fused/row_kernels_host.cpp",
        "csrc/kernels/cpu/attention.cpp",
        "csrc/kernels/cpu/bf16.cpp",
        "csrc/kernels/cpu/cpu_layer_kernels.cpp",
        "csrc/kernels/cpu/gemm_dpbf16.cpp",
        "csrc/kernels/cpu/gemm_fma.cpp",
        "csrc/kernels/cpu/gemm_vnni.cpp",
        "csrc/kernels/cpu/gemm_maddubs.cpp",
        "csrc/kernels/cpu/int8_gemm.cpp",
        "csrc/kernels/cpu/int8_linear.cpp",
        "csrc/kernels/cpu/invariant_gemm.cpp",
        "csrc/kernels/cpu/isa.cpp",
        "csrc/kernels/cpu/key_pairs.cpp",
        "csrc/kernels/cpu/onednn.cpp",
        "csrc/kernels/cpu/packed_linear.cpp",
        "csrc/kernels/cpu/row_math.cpp",
        "csrc/kernels/cpu/rowwise.cpp",
        "csrc/kernels/cpu/softmax.cpp",
        "csrc/kernels/cpu/swiglu.cpp",
        "csrc/model/checkpoint.cpp",
        "csrc/model/model_config.cpp",
        "csrc/model/rotary.cpp",
        "csrc/model/safetensors.cpp",
        "csrc/model/scripted_model.cpp",
        "csrc/model/transformer.cpp",
        "csrc/vision/image_prompt.cpp",
        "csrc/vision/patches.cpp",
        "csrc/vision/vision_tower.cpp",
        "csrc/vision/windows.cpp"
      ],
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
    }
  ]
}
