/** What this CPU runs, from /proc/cpuinfo: the engine's instruction set levels, best first. */
import * as fs from 'fs';
import { IsaLevel, isaLevels } from '../../src/engine/native';

export function runnableIsaLevels(): IsaLevel[] {
  const flags = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1].split(/\s+/) ?? [];
  const has = (...names: string[]) => names.every((f) => flags.includes(f));
  const runs: Record<IsaLevel, boolean> = {
    'avx512-bf16': has('avx512f', 'avx512bw', 'avx512vl', 'avx512_bf16'),
    avx512: has('avx512f', 'avx512bw', 'avx512vl'),
    avx2: has('avx2', 'fma'),
    portable: true,
  };
  return isaLevels.filter((level) => runs[level]);
}
