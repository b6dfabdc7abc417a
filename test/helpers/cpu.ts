/** What this CPU runs, from /proc/cpuinfo: the engine's instruction set levels, best first. */
import * as fs from 'fs';
import { IsaLevel, isaLevels } from '../../src/engine/native';

function has(...names: string[]): boolean {
  const flags = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1].split(/\s+/) ?? [];
  return names.every((f) => flags.includes(f));
}

export function runnableIsaLevels(): IsaLevel[] {
  const runs: Record<IsaLevel, boolean> = {
    'avx512-bf16': has('avx512f', 'avx512bw', 'avx512vl', 'avx512_bf16'),
    avx512: has('avx512f', 'avx512bw', 'avx512vl'),
    avx2: has('avx2', 'fma'),
    generic: true,
  };
  return isaLevels.filter((level) => runs[level]);
}

/** Whether the int8 GEMM runs on AMX tiles here (csrc/kernels/cpu/gemm/gemm_amx.cpp's cpu_has_amx_int8: the CPU's flags; Linux then grants the tiles). */
export function runsInt8Amx(): boolean {
  return has('amx_tile', 'amx_int8') && runsInt8Vnni();
}

/** Whether the bf16 AMX kernel runs on the tiles here (csrc/kernels/cpu/gemm/gemm_amx_bf16.cpp's cpu_has_amx_bf16). */
export function runsBf16Amx(): boolean {
  return has('amx_tile', 'amx_bf16');
}

/** Whether the int8 GEMM runs on AVX-512 VNNI here (csrc/kernels/cpu/gemm/gemm_vnni.cpp's cpu_has_vnni: the same flags). */
export function runsInt8Vnni(): boolean {
  return has('avx512f', 'avx512bw', 'avx512vl', 'avx512_vnni');
}

/**
 * The int8 GEMM's kernel at a level on this CPU, what /health's quantized_kernels names (csrc/kernels/cpu/cpu_layer_kernels.cpp's
 * int8_kernel): AMX tiles or AVX-512 VNNI at avx512 and above, vpmaddubsw at avx2, else the generic loop.
 */
export function int8KernelAt(level: IsaLevel): string {
  const atLeast = (floor: IsaLevel) => isaLevels.indexOf(level) <= isaLevels.indexOf(floor);
  if (atLeast('avx512') && runsInt8Amx()) return 'amx-int8';
  if (atLeast('avx512') && runsInt8Vnni()) return 'avx512-vnni';
  if (atLeast('avx2') && has('avx2', 'fma')) return 'avx2';
  return 'generic';
}
