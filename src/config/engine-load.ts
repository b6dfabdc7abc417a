/**
 * What an engine loads its model with, from the flags: the server's engine processes (server/start-engines.ts; the
 * head and image engines change the path) and `tqserve decide` alike, so that decide answers as the server does
 * (the same dtype, quantization, attention, device...: the answer is a function of those, not of the kernel level or
 * the threads, docs/arithmetic.md). Each flag's row in the flag table names its load option (flags.ts, `engine`):
 * nothing is mapped by hand here.
 */
import * as os from 'os';
import { NativeLoadOptions } from '../engine/native';
import { ResolvedBase } from './bases';
import { FlagDef, flagDefs, Flags } from './flags';

/** A flag's value as its engine option takes it: on/off as a boolean, the rest as it is. */
function loadValue(def: FlagDef, value: string | number | boolean): unknown {
  const onOff = def.kind === 'choice' && def.choices?.length === 2 && def.choices.includes('on') && def.choices.includes('off');
  return onOff ? value === 'on' : value;
}

export function engineLoad(flags: Flags, base: ResolvedBase): NativeLoadOptions {
  const load: Record<string, unknown> = { path: base.checkpoint };
  for (const def of flagDefs) {
    const value = (flags as Record<string, string | number | boolean | undefined>)[def.name];
    // Unset (--attention, --cuda-forward, --cuda-graphs): the engine chooses by device (csrc/engine/engine_options.cpp,
    // resolve_forward_defaults): on CUDA the fused forward with CUDA graphs, on the CPU its own kernels. /health says what runs.
    if (def.engine && value !== undefined) load[def.engine] = loadValue(def, value);
  }
  // --threads 0: one per core.
  return { ...(load as unknown as NativeLoadOptions), threads: flags.threads || os.cpus().length };
}
